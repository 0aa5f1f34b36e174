"""Consumer group records (Kafka's ConsumerGroup* coordinator records of `__consumer_offsets`): their types.

Kafka's record helpers (GroupCoordinatorRecordHelpers) name one record per concern; so do we:
group epoch (+ subscription metadata hash), member subscription, target assignment epoch, one
member's target assignment, one member's current assignment, a resolved regular expression. A
tombstone is the key with a null value; here, a `...Tombstone` type. consumer_codec.py turns them
into Kafka's key and value bytes; the coordinator builds and replays them
(coordinator/groups/consumer/consumer_records.py).

Assignments are keyed by topic id, as on the wire and in the records: {topic_id: frozenset(partitions)}.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol inside a consumer group (online migration):
    its JoinGroup session timeout and protocols (name, ConsumerProtocolSubscription bytes)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


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


def topic_ids_sorted(assignment: Assignment) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps]
