"""Coordinator-level records for `__consumer_offsets`.

Field names follow Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value (snake_case) so that
protocol/records/codec.py can serialize them one-to-one. A tombstone is its own type: the key with a
null value.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..fast_init import fast_init
from .consumer_records import ConsumerRecord


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # Only set when the client asked for a retention time (OffsetCommit v2-v4); then the value is
    # written as OffsetCommitValue v1 and keeps the old per-offset expiry semantics.
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitTombstone:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    group: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[GroupMetadataMember, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupMetadataTombstone:
    group: str


ClassicRecord = OffsetCommitRecord | OffsetCommitTombstone | GroupMetadataRecord | GroupMetadataTombstone
# Every record of `__consumer_offsets`: classic groups and offsets, and consumer groups (KIP-848).
Record = ClassicRecord | ConsumerRecord
