"""What a handler decides: replies, records to persist, timers, events. The shell executes it.

Ordering contract for the shell (runtime.py, through execute.py), per Outcome:
1. send `replies` (they do not depend on any write);
2. apply `timers` in order;
3. append the records of all `writes` in one call; when durable, `replay` them, release each
   write's `replies`, then hand each write's `then` back to the machine (`on_write_done`);
   when the append fails, release `result.failed(translated code)` instead and still hand
   `then` back, with the error.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Union

from ...protocol.fast_init import fast_init
from ...protocol.errors import ErrorCode

from ..groups.commands import TimerExpiry
from ..groups.consumer.consumer_commands import ConsumerExpiry
from ..groups.classic.member import Handle, Protocols
from ...protocol.records.classic_records import Record
from ..groups.results import Result

if TYPE_CHECKING:
    from ..groups.consumer.downgrade import DowngradedToClassic, JoinAfterConsumerGroupDeleted

# What a group's timers deliver, classic and consumer groups alike.
GroupExpiry = TimerExpiry | ConsumerExpiry


@fast_init
@dataclass(frozen=True, slots=True)
class Reply:
    to: Handle
    result: Result


@fast_init
@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    key: str
    delay_ms: int
    expiry: GroupExpiry  # handed to the group (in its turn) when the timer fires


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: str


TimerOp = ScheduleTimer | CancelTimer


# -- follow-ups: in-memory changes that must wait for (or undo after) a write --------------------


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


@dataclass(frozen=True, slots=True)
class GroupRemoved:
    """DeleteGroups or offset expiry: once the tombstones are durable the group is Dead."""

    group_id: str


# The consumer group's follow-ups live with the downgrade (which imports this module).
FollowUp = Union[AssignmentWritten, EmptyGroupWritten, StaticMemberReplaced, GroupRemoved,
                 "DowngradedToClassic", "JoinAfterConsumerGroupDeleted"]


class Durability(enum.Enum):
    """How a pending write reaches durability; chosen by the code that creates the write.

    STRICT: append, wait for the fsync, then apply to memory and reply (group membership: a
    generation must never be visible before it is on disk). PIPELINED: append and apply at once,
    reply once the fsync lands, so a group's commits share fsyncs; readers of what it changed
    (OffsetFetch) answer only after that fsync, and a failed fsync unloads the partition.
    """

    STRICT = "strict"
    PIPELINED = "pipelined"
    # The records are in the log already: a committed transaction's offsets, appended by
    # TxnOffsetCommit and made visible by the COMMIT marker. Kafka replays them into memory at the
    # marker (OffsetMetadataManager.replayEndTransactionMarker) and writes nothing more; so do we.
    IN_LOG = "in_log"


@dataclass(slots=True)
class PendingWrite:
    records: Sequence[Record]
    replies: list[Reply] = field(default_factory=list)  # released only once durable
    then: FollowUp | None = None
    durability: Durability = Durability.STRICT


# -- events (logged by the shell) -----------------------------------------------------------------


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
class WriteFailed:
    log_event: ClassVar[str] = "coordinator_write_failed"

    group_id: str
    what: str
    error: ErrorCode


# Every event names its log event (`log_event`); the service logs it with its fields, whatever
# the group type that emitted it.
Event = RebalanceCompleted | WriteFailed


@dataclass(slots=True)
class Outcome:
    replies: list[Reply] = field(default_factory=list)
    writes: list[PendingWrite] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def reply(self, to: Handle | None, result: Result) -> None:
        if to is not None:
            self.replies.append(Reply(to, result))

    def schedule(self, key: str, delay_ms: int, expiry: GroupExpiry) -> None:
        self.timers.append(ScheduleTimer(key, delay_ms, expiry))

    def cancel(self, key: str) -> None:
        self.timers.append(CancelTimer(key))

    def write(self, records: Sequence[Record], replies: list[Reply] | None = None,
              then: FollowUp | None = None, durability: Durability = Durability.STRICT) -> None:
        self.writes.append(PendingWrite(records, replies or [], then, durability))

    def merge(self, other: Outcome) -> None:
        self.replies.extend(other.replies)
        self.writes.extend(other.writes)
        self.timers.extend(other.timers)
        self.events.extend(other.events)
