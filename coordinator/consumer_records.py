"""Consumer group records (Kafka's ConsumerGroup* coordinator records) and their replay.

Kafka's record helpers (GroupCoordinatorRecordHelpers) name one record per concern; so do we:
group epoch (+ subscription metadata hash), member subscription, target assignment epoch, one
member's target assignment, one member's current assignment, a resolved regular expression. A
tombstone is the key with a null value; here, a `...Tombstone` type.

`replay` is the only code that changes a ConsumerGroup; the shell calls it for every record once
it is durable, and at load time for every record in the partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ClassicMemberMetadata,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataRecord:
    group: str
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataTombstone:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataRecord:
    group: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataTombstone:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataRecord:
    group: str
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataTombstone:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberRecord:
    group: str
    member_id: str
    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberTombstone:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentRecord:
    group: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentTombstone:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionRecord:
    group: str
    regex: str
    topics: tuple[str, ...]
    version: int = 0
    timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionTombstone:
    group: str
    regex: str


ConsumerRecord = (
    ConsumerGroupMetadataRecord | ConsumerGroupMetadataTombstone
    | ConsumerGroupMemberMetadataRecord | ConsumerGroupMemberMetadataTombstone
    | ConsumerGroupTargetAssignmentMetadataRecord | ConsumerGroupTargetAssignmentMetadataTombstone
    | ConsumerGroupTargetAssignmentMemberRecord | ConsumerGroupTargetAssignmentMemberTombstone
    | ConsumerGroupCurrentMemberAssignmentRecord | ConsumerGroupCurrentMemberAssignmentTombstone
    | ConsumerGroupRegularExpressionRecord | ConsumerGroupRegularExpressionTombstone
)
CONSUMER_RECORD_TYPES = ConsumerRecord.__args__


def is_consumer_record(record: object) -> bool:
    return isinstance(record, CONSUMER_RECORD_TYPES)


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
    records: list[ConsumerRecord] = []
    records += [ConsumerGroupCurrentMemberAssignmentTombstone(group.group_id, m) for m in group.members]
    records += [ConsumerGroupTargetAssignmentMemberTombstone(group.group_id, m) for m in group.members]
    records += [ConsumerGroupMemberMetadataTombstone(group.group_id, m) for m in group.members]
    records += [ConsumerGroupRegularExpressionTombstone(group.group_id, r) for r in group.resolved_regexes]
    records.append(ConsumerGroupTargetAssignmentMetadataTombstone(group.group_id))
    records.append(ConsumerGroupMetadataTombstone(group.group_id))
    return records


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


def topic_ids_sorted(assignment: Assignment) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps]
