"""Inputs to the coordinator: requests (already adapted from whatever wire version arrived) and
timer expiries. Plain data; `reply_to` is the opaque handle the answer is addressed to.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...protocol.fast_init import fast_init
from .classic.member import Handle, Protocols

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


def _protocols(value: object) -> Protocols:
    return tuple((str(name), bytes(metadata)) for name, metadata in value)  # type: ignore[attr-defined]


# Kafka's clients cut a JoinGroup or LeaveGroup reason to 255 characters
# (JoinGroupRequest.maybeTruncateReason); the coordinator keeps no more of any client's, since it
# stays in the rebalance history and its file (20 groups left with 10 MiB reasons held 470 MiB).
MAX_REASON_CHARS = 255


def client_reason(reason: str | None) -> str | None:
    return reason if reason is None or len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS]


@dataclass(slots=True)
class JoinGroup:
    group_id: str
    member_id: str
    group_instance_id: str | None
    # The broker sets it: JoinGroup v4+ from a dynamic member (no instance id).
    require_known_member_id: bool
    client_id: str
    client_host: str
    # JoinGroup v0 has none; the broker passes the session timeout, as Kafka does.
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    reason: str | None = None  # KIP-800, JoinGroup v8+
    supports_skip_assignment: bool = False  # JoinGroup v9+
    reply_to: Handle | None = None

    def __post_init__(self) -> None:
        self.protocols = _protocols(self.protocols)


@dataclass(slots=True)
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+
    assignments: tuple[tuple[str, bytes], ...] = ()  # only the leader sends them
    reply_to: Handle | None = None

    def __post_init__(self) -> None:
        self.assignments = tuple((str(m), bytes(a)) for m, a in self.assignments)


@dataclass(slots=True)
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    reply_to: Handle | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class LeaveGroup:
    """v3+ carries a batch; v0-2 is a batch of one built by the broker."""

    group_id: str
    members: tuple[LeavingMember, ...]
    reply_to: Handle | None = None

    def __post_init__(self) -> None:
        self.members = tuple(self.members)


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = -1  # OffsetCommit v1's own commit time; -1: when the coordinator handles it


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(slots=True)
class OffsetCommit:
    group_id: str
    generation_id: int
    member_id: str
    topics: tuple[OffsetCommitTopic, ...]
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-v4 only; -1 means the broker's retention
    api_version: int = 9  # from v9 an unknown group is GROUP_ID_NOT_FOUND, not ILLEGAL_GENERATION
    reply_to: Handle | None = None
    # A committed transaction's offsets (TxnOffsetCommit): checked when they were sent, materialised
    # now whatever the group's state, as Kafka does on the commit marker: applied to memory only,
    # since their records are in the log already (Durability.IN_LOG).
    transactional: bool = False
    # TxnOffsetCommit's group check (KIP-447) before the offsets join the transaction: validate the
    # member and generation only, write nothing.
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    name: str
    partitions: tuple[int, ...]


@dataclass(slots=True)
class OffsetFetch:
    group_id: str
    topics: tuple[TopicPartitions, ...] | None = None  # None: every committed partition
    require_stable: bool = False
    reply_to: Handle | None = None
    # v9+: checked against consumer group (KIP-848) members only
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(slots=True)
class OffsetDelete:
    group_id: str
    topics: tuple[TopicPartitions, ...]
    reply_to: Handle | None = None


@dataclass(slots=True)
class DeleteTopicOffsets:
    """Topics were deleted (Kafka's GroupCoordinatorShard.onTopicsDeleted): the group's offsets of them
    go, tombstoned, with `pending`, the partitions of them an open transaction committed for the group
    (held by the transaction coordinator: their tombstones end them in the log's replay as in Kafka's)."""

    group_id: str
    topics: frozenset[str]
    pending: tuple[tuple[str, int], ...] = ()
    reply_to: Handle | None = None


@dataclass(slots=True)
class DescribeGroup:
    group_id: str
    api_version: int = 5  # v6+ answers GROUP_ID_NOT_FOUND for an unknown group
    reply_to: Handle | None = None


@dataclass(slots=True)
class ListGroups:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()
    reply_to: Handle | None = None


@dataclass(slots=True)
class DeleteGroup:
    group_id: str
    reply_to: Handle | None = None
    # the group's partitions with an offset an open transaction committed (held by the transaction
    # coordinator): tombstoned too, which ends them (Kafka's deleteAllOffsets)
    pending: tuple[tuple[str, int], ...] = ()


# -- timer expiries (keys: join-<g>, sync-<g>, heartbeat-<g>-<m>, pending-<g>-<m>) -------------


@dataclass(frozen=True, slots=True)
class JoinExpired:
    group_id: str


@dataclass(frozen=True, slots=True)
class InitialJoinExpired:
    group_id: str
    delay_ms: int
    remaining_ms: int


@dataclass(frozen=True, slots=True)
class SyncExpired:
    group_id: str
    generation_id: int


@fast_init
@dataclass(frozen=True, slots=True)
class HeartbeatExpired:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class PendingMemberExpired:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class OffsetExpiryCheck:
    group_id: str


Request = (
    JoinGroup | SyncGroup | Heartbeat | LeaveGroup | OffsetCommit | OffsetFetch | OffsetDelete
    | DescribeGroup | DeleteGroup
)
TimerExpiry = (
    JoinExpired | InitialJoinExpired | SyncExpired | HeartbeatExpired | PendingMemberExpired
    | OffsetExpiryCheck
)
Command = Request | TimerExpiry


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def pending_key(group_id: str, member_id: str) -> str:
    return f"pending-{group_id}-{member_id}"

