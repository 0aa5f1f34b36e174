"""The runtime of one `__consumer_offsets` partition: its shard, its groups' queues, write-then-respond.

Kafka's CoordinatorRuntime keeps one CoordinatorContext per partition (the shard, the timers, the
pending writes); this is ours. The service (service.py) routes a request to the runtime of its
group's partition once the prechecks passed; the runtime runs it against the shard
(classic.GroupStateMachine, which holds every group type of the partition) and carries out the
Outcome (execute.py): replies, timers, records appended before the replies that depend on them.

Per-group order without locks. A group is *idle* when it has no queue here. A command for an idle
group runs at once, inside the caller (`dispatch`): if its Outcome needs no wait (no write, or only
PIPELINED writes the log takes synchronously) it is carried out on the spot, so a Heartbeat costs
no task and no loop turn. Otherwise the group gets a queue and one task that carries the Outcome
out (awaiting the append), then drains whatever arrived meanwhile, in arrival order, and ends; the
queue goes with it. So there is no idle actor to retire and no real-time wait: a group costs a task
only while it waits for a write.

A runtime that is unloaded (coordinator move, storage failure, stop) turns `active` off: the
command being carried out finishes, queued requests go back to the service (which refuses them or,
if the partition was loaded again meanwhile, hands them to the new runtime), queued expiries are
dropped (the unload cancelled their timers).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...purgatory.clock import Clock
from ...purgatory.timers import KeyedTimers, TimerFired

from ..groups import commands as c
from ..groups.classic.classic import GroupStateMachine
from .execute import (
    AppendNowait,
    AppendRecords,
    PipelinedWrites,
    apply_unwritten,
    execute_outcome,
    execute_pipelined,
    runs_without_waiting,
)
from .outcome import CancelTimer, Event, GroupExpiry, Outcome, Reply, TimerOp
from ...protocol.records.classic_records import Record
from ..groups.results import error_result_for

E = ErrorCode
log = structlog.get_logger("kbroker.coordinator")


class Expiry:
    """A timer's expiry on its way to the group; handled only if `claim` says it is still live."""

    __slots__ = ("cmd", "key", "token")

    def __init__(self, cmd: GroupExpiry, key: str, token: int) -> None:
        self.cmd = cmd
        self.key = key
        self.token = token


class Internal:
    """Periodic work with no timer key of its own (the offsets retention check)."""

    __slots__ = ("cmd",)

    def __init__(self, cmd: c.TimerExpiry) -> None:
        self.cmd = cmd


# Requests are queued as themselves (they carry their reply handle).
Item = Any  # c.Request | Control | Expiry | Internal


class GroupQueue:
    """A busy group's commands, carried out one at a time by `task`."""

    __slots__ = ("group_id", "items", "task")

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.items: deque[Item] = deque()
        self.task: asyncio.Task[None] | None = None


def deliver(reply: Reply) -> None:
    future = reply.to
    if isinstance(future, asyncio.Future) and not future.done():
        future.set_result(reply.result)


class PartitionRuntime:
    def __init__(
        self,
        shard: GroupStateMachine,
        *,
        clock: Clock,
        timers: KeyedTimers,
        append: AppendRecords,
        append_nowait: AppendNowait | None,
        queues: set[GroupQueue],
        on_event: Callable[[Event], None],
        on_storage_failure: Callable[[int, ErrorCode], None],
        requeue: Callable[[Item], None],
    ) -> None:
        self.partition = shard.partition
        self.shard = shard
        self.active = True
        self._clock = clock
        self._timers = timers
        self._append = append
        self._append_nowait = append_nowait
        self._queues: dict[str, GroupQueue] = {}
        self._all_queues = queues  # the service's view of every busy group (stop, quiesce)
        self._on_event = on_event
        self._on_storage_failure = on_storage_failure
        self._requeue = requeue
        self._pipelined = PipelinedWrites()  # pipelined writes (and their replies) waiting for their fsync

    # -- load / unload -------------------------------------------------------------------------

    async def replay(self, records: Iterable[Record]) -> None:
        """Rebuild the shard from the partition's log (tombstones included)."""
        shard = self.shard
        shard.begin_load()
        for i, record in enumerate(records, 1):
            shard.replay(record)
            if i % 1024 == 0:
                await asyncio.sleep(0)  # a long log must not starve other partitions

    def load_empty(self) -> None:
        """`replay([])` and `resume()` at once, for a partition that holds no record: an empty shard's
        resume has nothing to write, so it needs no turn of the event loop."""
        self.shard.begin_load()
        outcome = self.shard.finish_load(self._clock.wall_ms())
        if outcome.writes:
            raise RuntimeError(f"loading the empty partition {self.partition} wrote records")
        apply_unwritten(outcome, deliver, self._apply_timer, self._on_event)

    async def resume(self) -> None:
        """After the replay: members get fresh session deadlines, loaded groups carry on."""
        await self.execute(self.shard.finish_load(self._clock.wall_ms()))

    async def unload(self) -> None:
        """Stop serving: parked answers get NOT_COORDINATOR, timers stop, queued requests go back."""
        self.active = False
        await self.execute(self.shard.unload(self._clock.wall_ms()))

    # -- commands ------------------------------------------------------------------------------

    def dispatch(self, item: Item, group_id: str) -> None:
        """Run `item` now if its group is idle, else queue it behind the group's commands."""
        queue = self._queues.get(group_id)
        if queue is not None:
            queue.items.append(item)
            return
        outcome = self._handle(item)
        if outcome is None:
            return
        if not outcome.writes:
            apply_unwritten(outcome, deliver, self._apply_timer, self._on_event)
        elif self._append_nowait is not None and runs_without_waiting(outcome, True):
            execute_pipelined(self.shard, outcome, append_nowait=self._append_nowait, pipelined=self._pipelined,
                              deliver=deliver, apply_timer=self._apply_timer, on_event=self._on_event,
                              on_storage_failure=self._on_storage_failure)
        else:
            self._start(group_id, outcome)

    def enqueue(self, item: Item, group_id: str) -> None:
        """Queue `item` for a later loop turn even if the group is idle (timer expiries: they fire
        inside the timer driver, which must not run group handlers)."""
        queue = self._queues.get(group_id)
        if queue is None:
            self._start(group_id, None).items.append(item)
        else:
            queue.items.append(item)

    def _start(self, group_id: str, first: Outcome | None) -> GroupQueue:
        queue = self._queues[group_id] = GroupQueue(group_id)
        self._all_queues.add(queue)
        queue.task = asyncio.get_running_loop().create_task(self._drain(queue, first),
                                                            name=f"group:{group_id}")
        return queue

    async def _drain(self, queue: GroupQueue, first: Outcome | None) -> None:
        try:
            if first is not None:
                await self._execute_guarded(first)
            items = queue.items
            while items:
                item = items.popleft()
                if not self.active:
                    if not isinstance(item, (Expiry, Internal)):
                        self._requeue(item)
                    continue
                outcome = self._handle(item)
                if outcome is not None:
                    await self._execute_guarded(outcome)
        finally:
            # No await since the last check of `items`: nothing can have slipped in.
            if self._queues.get(queue.group_id) is queue:
                del self._queues[queue.group_id]
            self._all_queues.discard(queue)

    def _handle(self, item: Item) -> Outcome | None:
        if isinstance(item, Expiry):
            if not self._timers.claim(item.key, item.token):
                return None  # stale: the key was re-armed or cancelled after this expiry fired
            cmd = item.cmd
        elif isinstance(item, Internal):
            cmd = item.cmd
        else:
            cmd = item
        try:
            outcome = self.shard.handle(cmd, self._clock.wall_ms())
            if isinstance(cmd, c.OffsetFetch):
                self._hold_until_durable(cmd, outcome)
            return outcome
        except Exception:  # noqa: BLE001 - one bad command must not take the group down
            log.exception(
                "coordinator_error", group=getattr(cmd, "group_id", None), api=type(cmd).__name__,
                member=getattr(cmd, "member_id", None),
            )
            if not isinstance(item, (Expiry, Internal)):
                deliver(Reply(item.reply_to, error_result_for(item, E.UNKNOWN_SERVER_ERROR)))
            return None

    # -- carrying out an Outcome ---------------------------------------------------------------

    async def execute(self, outcome: Outcome) -> None:
        await execute_outcome(
            self.shard, outcome,
            now_ms=self._clock.wall_ms,
            append=self._append,
            append_nowait=self._append_nowait,
            deliver=deliver,
            apply_timer=self._apply_timer,
            on_event=self._on_event,
            pipelined=self._pipelined,
            on_storage_failure=self._on_storage_failure,
        )

    async def _execute_guarded(self, outcome: Outcome) -> None:
        """A bug while carrying one Outcome out must not strand the commands queued behind it."""
        try:
            await self.execute(outcome)
        except Exception:  # noqa: BLE001
            log.exception("coordinator_error", partition=self.partition)

    def _hold_until_durable(self, cmd: c.OffsetFetch, outcome: Outcome) -> None:
        """Answer an OffsetFetch only once every pipelined write it could see is on disk."""
        pending = self._pipelined.pending
        if pending is None or pending.done():
            if pending is not None and not pending.cancelled() and pending.exception() is not None:
                outcome.replies = [Reply(r.to, error_result_for(cmd, E.NOT_COORDINATOR)) for r in outcome.replies]
            return
        replies, outcome.replies = outcome.replies, []

        def release(done: asyncio.Future) -> None:
            failed = done.cancelled() or done.exception() is not None
            for reply in replies:
                deliver(Reply(reply.to, error_result_for(cmd, E.NOT_COORDINATOR)) if failed else reply)

        pending.add_done_callback(release)

    # -- timers --------------------------------------------------------------------------------

    def _apply_timer(self, op: TimerOp) -> None:
        if isinstance(op, CancelTimer):
            self._timers.cancel(op.key)
        else:
            self._timers.schedule(op.key, op.delay_ms, partial(self._on_timer, op.expiry))

    def _on_timer(self, expiry: GroupExpiry, fired: TimerFired) -> None:
        if self.active:
            self.enqueue(Expiry(expiry, fired.key, fired.token), expiry.group_id)

    # -- seeing into it ------------------------------------------------------------------------

    def queued(self, group_id: str) -> int:
        queue = self._queues.get(group_id)
        return len(queue.items) if queue is not None else 0
