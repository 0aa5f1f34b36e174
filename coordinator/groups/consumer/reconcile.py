"""Reconciling a member toward its target assignment (Kafka's CurrentAssignmentBuilder).

A member first gives up what it must revoke (staying in its epoch, UNREVOKED_PARTITIONS), and only
when its heartbeat no longer reports those partitions does it move to the target epoch and receive
new partitions; a partition still held by another member (its partition epoch is set) is withheld
(UNRELEASED_PARTITIONS) until released. So no partition is ever owned by two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from .consumer_group import ConsumerGroupMember, MemberState
from ....protocol.records.consumer_records import Assignment

OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]] | None
PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMemberEpoch(Exception):
    pass


def owns_revoked_partitions(owned: OwnedPartitions, pending: Assignment) -> bool:
    """Whether the member still reports a partition of `pending`; a heartbeat without owned
    partitions (null) tells nothing, so it counts as still owning them."""
    if owned is None:
        return True
    for topic_id, partitions in owned:
        revoking = pending.get(topic_id)
        if revoking and any(p in revoking for p in partitions):
            return True
    return False


def is_subset(owned: OwnedPartitions, target: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned:
        assigned = target.get(topic_id)
        if assigned is None or any(p not in assigned for p in partitions):
            return False
    return True


def maybe_reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
                    partition_epoch: PartitionEpoch, owned: OwnedPartitions) -> ConsumerGroupMember:
    """The member's next state (CurrentAssignmentBuilder.build); the same object if unchanged."""
    if member.is_reconciled_to(target_epoch):
        return member
    builder = _Builder(member, target_epoch, target, partition_epoch, owned)
    match member.state:
        case MemberState.STABLE:
            if member.member_epoch != target_epoch:
                return builder.compute_next_assignment(member.member_epoch, member.assigned_partitions)
            return member
        case MemberState.UNREVOKED_PARTITIONS:
            if owns_revoked_partitions(owned, member.partitions_pending_revocation):
                return member
            return builder.compute_next_assignment(member.member_epoch + 1, member.assigned_partitions)
        case MemberState.UNRELEASED_PARTITIONS:
            return builder.compute_next_assignment(member.member_epoch, member.assigned_partitions)
        case _:
            if owned is None or len(owned) != 0:
                raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                        "The member must abandon all its partitions and rejoin.")
            return builder.compute_next_assignment(target_epoch, member.assigned_partitions)


def _with_epoch(member: ConsumerGroupMember, epoch: int, **changes: object) -> ConsumerGroupMember:
    # updateMemberEpoch: the previous epoch is always the one the member had.
    return member.replace(member_epoch=epoch, previous_member_epoch=member.member_epoch, **changes)


class _Builder:
    __slots__ = ("member", "target_epoch", "target", "partition_epoch", "owned")

    def __init__(self, member: ConsumerGroupMember, target_epoch: int, target: Assignment,
                 partition_epoch: PartitionEpoch, owned: OwnedPartitions) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.partition_epoch = partition_epoch
        self.owned = owned

    def compute_next_assignment(self, member_epoch: int, current: Assignment) -> ConsumerGroupMember:
        has_unreleased = False
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        pending_revocation: dict[uuid.UUID, frozenset[int]] = {}
        pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
        for topic_id in set(self.target) | set(current):
            target = self.target.get(topic_id, frozenset())
            have = current.get(topic_id, frozenset())
            keep = have & target
            revoke = have - keep
            add = target - keep
            free = frozenset(p for p in add if self.partition_epoch(topic_id, p) == -1)
            if free != add:
                has_unreleased = True
            if keep:
                assigned[topic_id] = keep
            if revoke:
                pending_revocation[topic_id] = revoke
            if free:
                pending_assignment[topic_id] = free

        if pending_revocation and owns_revoked_partitions(self.owned, pending_revocation):
            return _with_epoch(self.member, member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                               assigned_partitions=assigned, partitions_pending_revocation=pending_revocation)
        if pending_assignment:
            for topic_id, partitions in pending_assignment.items():
                assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
            state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
            return _with_epoch(self.member, self.target_epoch, state=state, assigned_partitions=assigned,
                               partitions_pending_revocation={})
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return _with_epoch(self.member, self.target_epoch, state=state, assigned_partitions=assigned,
                           partitions_pending_revocation={})
