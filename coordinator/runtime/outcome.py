"""What a shard decides: replies, records to persist, timers, events. The runtime carries it out.

Ordering contract for the runtime (partition.py, through execute.py), per Outcome:
1. send `replies` (they do not depend on any write);
2. apply `timers` in order;
3. append the records of all `writes` in one call; when durable, `replay` them, release each
   write's `replies`, then hand each write's `then` back to the shard (`on_write_done`);
   when the append fails, release `result.failed(translated code)` instead and still hand
   `then` back, with the error.

Nothing here names a group or a transaction: a timer's expiry, a write's follow-up (`then`) and an
event are whatever the shard made them, and the shard gets them back (the expiry as a command in
its key's turn, the follow-up through `on_write_done`); events go to the runtime's `on_event`,
which logs each under its `log_event`. So a new kind of shard, or a new group type inside the
group shard, brings its own expiries, follow-ups and events without an edit here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.fast_init import fast_init


class Result(Protocol):
    """An answer the runtime may have to downgrade when the write it waited for failed."""

    def failed(self, code: ErrorCode) -> Any: ...


class Event(Protocol):
    """Something a shard reports: logged by the runtime's owner under `log_event`, with its fields."""

    log_event: ClassVar[str]


@fast_init
@dataclass(frozen=True, slots=True)
class Reply:
    to: Any  # the opaque handle the command came with (its `reply_to`: a future in the broker)
    result: Any


@fast_init
@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    key: str
    delay_ms: int
    expiry: Any  # a command, handed back to the shard in its key's turn when the timer fires


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: str


TimerOp = ScheduleTimer | CancelTimer


class Durability(enum.Enum):
    """How a pending write reaches durability; chosen by the code that creates the write.

    STRICT: append, wait for the fsync, then apply to memory and reply (group membership: a
    generation must never be visible before it is on disk). PIPELINED: append and apply at once,
    reply once the fsync lands, so a group's commits share fsyncs; readers of what it changed
    (an Outcome with `after_pipelined`) answer only after that fsync, and a failed fsync unloads
    the partition.
    """

    STRICT = "strict"
    PIPELINED = "pipelined"
    # The records are in the log already: a committed transaction's offsets, appended by
    # TxnOffsetCommit and made visible by the COMMIT marker. Kafka replays them into memory at the
    # marker (OffsetMetadataManager.replayEndTransactionMarker) and writes nothing more; so do we.
    IN_LOG = "in_log"


@dataclass(slots=True)
class PendingWrite:
    records: Sequence[Any]
    replies: list[Reply] = field(default_factory=list)  # released only once durable
    then: Any = None  # a follow-up, handed back to the shard's on_write_done once the write is done
    durability: Durability = Durability.STRICT


@dataclass(slots=True)
class Outcome:
    replies: list[Reply] = field(default_factory=list)
    writes: list[PendingWrite] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    # The replies read state that pipelined writes may have changed (OffsetFetch): the runtime
    # releases them only once every pipelined write of the partition before them is durable.
    after_pipelined: bool = False

    def reply(self, to: Any, result: Any) -> None:
        if to is not None:
            self.replies.append(Reply(to, result))

    def schedule(self, key: str, delay_ms: int, expiry: Any) -> None:
        self.timers.append(ScheduleTimer(key, delay_ms, expiry))

    def cancel(self, key: str) -> None:
        self.timers.append(CancelTimer(key))

    def write(self, records: Sequence[Any], replies: list[Reply] | None = None,
              then: Any = None, durability: Durability = Durability.STRICT) -> None:
        self.writes.append(PendingWrite(records, replies or [], then, durability))

    def merge(self, other: Outcome) -> None:
        self.replies.extend(other.replies)
        self.writes.extend(other.writes)
        self.timers.extend(other.timers)
        self.events.extend(other.events)
        self.after_pipelined = self.after_pipelined or other.after_pipelined
