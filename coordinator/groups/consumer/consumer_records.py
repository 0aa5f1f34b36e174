"""Consumer group records (Kafka's ConsumerGroup* coordinator records): their builders and replay.

The record types are the protocol's (protocol/records/consumer_records.py), beside their codec.

`replay` is the only code that changes a ConsumerGroup; the shell calls it for every record once
it is durable, and at load time for every record in the partition.
"""

from __future__ import annotations

from collections.abc import Callable

from .consumer_group import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroup, ConsumerGroupMember, MemberState
from ....protocol.records.consumer_records import (
    Assignment,
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadataRecord,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupRegularExpressionRecord,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadataRecord,
    ConsumerGroupTargetAssignmentMetadataTombstone,
    ConsumerRecord,
)


# -- builders (Kafka's GroupCoordinatorRecordHelpers) --------------------------------------------


def member_subscription_record(group_id: str, m: ConsumerGroupMember) -> ConsumerGroupMemberMetadataRecord:
    return ConsumerGroupMemberMetadataRecord(
        group_id, m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
        m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor, m.classic)


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignmentRecord:
    return ConsumerGroupCurrentMemberAssignmentRecord(
        group_id, m.member_id, m.member_epoch, m.previous_member_epoch, int(m.state),
        dict(m.assigned_partitions), dict(m.partitions_pending_revocation))


def member_tombstones(group_id: str, member_id: str) -> list[ConsumerRecord]:
    """Kafka's removeMember: current assignment, target assignment, then subscription."""
    return [
        ConsumerGroupCurrentMemberAssignmentTombstone(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberTombstone(group_id, member_id),
        ConsumerGroupMemberMetadataTombstone(group_id, member_id),
    ]


def group_tombstones(group: ConsumerGroup) -> list[ConsumerRecord]:
    """Kafka's createGroupTombstoneRecords: every member's records, then the group's."""
    return group.tombstones()


# -- replay ---------------------------------------------------------------------------------------


def replay(groups: dict[str, ConsumerGroup], record: ConsumerRecord,
           create: Callable[[str], ConsumerGroup]) -> None:
    """Apply one durable record. `create` makes (and registers) a new group; it is the one place
    a classic group's offsets move into a consumer group that takes its id."""
    gid = record.group
    group = groups.get(gid)
    match record:
        case ConsumerGroupMetadataRecord():
            group = group or create(gid)
            group.group_epoch = record.epoch
            group.metadata_hash = record.metadata_hash
        case ConsumerGroupMetadataTombstone():
            if group is not None:
                group.deleted = True
                del groups[gid]
        case ConsumerGroupMemberMetadataRecord():
            group = group or create(gid)
            old = group.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
            group.put_member(old.replace(
                instance_id=record.instance_id, rack_id=record.rack_id, client_id=record.client_id,
                client_host=record.client_host, subscribed_topic_names=tuple(record.subscribed_topic_names),
                subscribed_topic_regex=record.subscribed_topic_regex,
                rebalance_timeout_ms=record.rebalance_timeout_ms, server_assignor=record.server_assignor,
                classic=record.classic,
            ))
        case ConsumerGroupMemberMetadataTombstone():
            if group is not None:
                group.remove_member(record.member_id)
        case ConsumerGroupTargetAssignmentMetadataRecord():
            group = group or create(gid)
            group.assignment_epoch = record.assignment_epoch
        case ConsumerGroupTargetAssignmentMetadataTombstone():
            if group is not None:
                group.assignment_epoch = -1
        case ConsumerGroupTargetAssignmentMemberRecord():
            group = group or create(gid)
            group.target_assignment[record.member_id] = {t: frozenset(p) for t, p in record.partitions.items() if p}
        case ConsumerGroupTargetAssignmentMemberTombstone():
            if group is not None:
                group.target_assignment.pop(record.member_id, None)
        case ConsumerGroupCurrentMemberAssignmentRecord():
            group = group or create(gid)
            old = group.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
            group.put_member(old.replace(
                member_epoch=record.member_epoch, previous_member_epoch=record.previous_member_epoch,
                state=_member_state(record.state),
                assigned_partitions={t: frozenset(p) for t, p in record.assigned_partitions.items() if p},
                partitions_pending_revocation={
                    t: frozenset(p) for t, p in record.partitions_pending_revocation.items() if p},
            ))
        case ConsumerGroupCurrentMemberAssignmentTombstone():
            if group is not None and record.member_id in group.members:
                old = group.members[record.member_id]
                group.put_member(old.replace(
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned_partitions={}, partitions_pending_revocation={}))
        case ConsumerGroupRegularExpressionRecord():
            group = group or create(gid)
            group.resolved_regexes[record.regex] = frozenset(record.topics)
        case ConsumerGroupRegularExpressionTombstone():
            if group is not None:
                group.resolved_regexes.pop(record.regex, None)
        case _:
            raise TypeError(f"not a consumer group record: {record!r}")
    if group is not None:
        group.revision += 1


def _member_state(value: int) -> MemberState:
    try:
        return MemberState(value)
    except ValueError:
        return MemberState.UNKNOWN
