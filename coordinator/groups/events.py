"""What the group shard reports besides its answers (the service logs each under its `log_event`,
and the rebalance history records those it keeps), and its follow-ups of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class RebalanceCompleted:
    log_event: ClassVar[str] = "rebalance_completed"

    group_id: str
    old_generation: int
    new_generation: int
    reason: str
    client_reason: str | None
    trigger_member: str | None
    members_in: tuple[str, ...]
    members_out: tuple[str, ...]
    member_count: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class AssignmentChanged:
    """One structured event per target assignment change of a consumer group (KIP-848;
    `consumer_group_assignment_changed`)."""

    log_event: ClassVar[str] = "consumer_group_assignment_changed"
    group_type: ClassVar[str] = "consumer"

    group_id: str
    group_epoch: int
    assignment_epoch: int
    reason: str
    trigger_member: str | None
    assignor: str
    members_moved: tuple[str, ...]
    member_count: int
    # For the group's rebalance history (history.py): the epoch it moved on from, who came and went,
    # and a fenced member's session timeout (how long its partitions went unserved before the fence).
    previous_epoch: int = -1
    members_in: tuple[str, ...] = ()
    members_out: tuple[str, ...] = ()
    session_timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ShareAssignmentChanged(AssignmentChanged):
    """A share group moved to a new group epoch (`share_group_assignment_changed`): a member came,
    left or was fenced, or a subscription or a subscribed topic changed; the history keeps it as a
    consumer group's."""

    log_event: ClassVar[str] = "share_group_assignment_changed"
    group_type: ClassVar[str] = "share"


@dataclass(frozen=True, slots=True)
class StreamsAssignmentChanged(AssignmentChanged):
    """A streams group (KIP-1071) moved to a new group epoch (`streams_group_assignment_changed`):
    a member came or went, the topology, the topics or the group's assignment configs changed."""

    log_event: ClassVar[str] = "streams_group_assignment_changed"
    group_type: ClassVar[str] = "streams"


@dataclass(frozen=True, slots=True)
class WriteFailed:
    """A write whose follow-up learnt that it failed (logged at warning level)."""

    log_event: ClassVar[str] = "coordinator_write_failed"
    log_level: ClassVar[str] = "warning"

    group_id: str
    what: str
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class GroupRemoved:
    """DeleteGroups or offset expiry: once the tombstones are durable the group is gone (the group
    store's own follow-up, whatever the group's type)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class ShareMemberGone:
    """A share group member left or was fenced (its session timed out): the broker's share-partitions
    give back at once what it holds, as Kafka's group coordinator has the share-partitions release a
    fenced member's records (KIP-932)."""

    log_event: ClassVar[str] = "share_member_gone"

    group_id: str
    member_id: str
    member_count: int
    left: bool = False  # it left (a heartbeat of epoch -1), not fenced: its share session stays its own
