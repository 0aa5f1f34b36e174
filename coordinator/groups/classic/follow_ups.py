"""The classic group's follow-ups: in-memory changes that must wait for (or undo after) a write.
The shard hands each back to the classic type once its write is done (classic.on_write_done)."""

from __future__ import annotations

from dataclasses import dataclass

from .member import Protocols


@dataclass(frozen=True, slots=True)
class AssignmentWritten:
    """Leader's SyncGroup: on success install the assignment and go Stable."""

    group_id: str
    generation_id: int
    assignment: tuple[tuple[str, bytes], ...]
    leader_id: str


@dataclass(frozen=True, slots=True)
class EmptyGroupWritten:
    group_id: str
    generation_id: int


@dataclass(frozen=True, slots=True)
class StaticMemberReplaced:
    """A static member rejoined a Stable group under a new id without a rebalance."""

    group_id: str
    instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: Protocols
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    previous_leader_id: str
    supports_skip_assignment: bool


CLASSIC_FOLLOW_UPS = (AssignmentWritten, EmptyGroupWritten, StaticMemberReplaced)
