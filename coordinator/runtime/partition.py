"""The runtime of one partition of a coordinator's log: its shard, its keys' queues, write-then-respond.

Kafka's CoordinatorRuntime keeps one CoordinatorContext per partition (the shard, the timers, the
pending writes); this is ours, for any shard (shard.Shard: the group shard of a `__consumer_offsets`
partition, the transaction shard of a `__transaction_state` one). The coordinator runtime
(runtime.py) routes a command to the partition runtime of its key once the prechecks passed; this
runs it against the shard and carries out the Outcome (execute.py): replies, timers, records
appended before the replies that depend on them.

Per-key order without locks (a key is a group id, a transactional id: `Shard.key_of`). A key is
*idle* when it has no queue here. A command for an idle key runs at once, inside the caller
(`dispatch`): if its Outcome needs no wait (no write, or only PIPELINED writes the log takes
synchronously) it is carried out on the spot, so a Heartbeat costs no task and no loop turn.
Otherwise the key gets a queue and one task that carries the Outcome out (awaiting the append), then
drains whatever arrived meanwhile, in arrival order, and ends; the queue goes with it. So there is no
idle actor to retire and no real-time wait: a key costs a task only while it waits for a write.
A command dispatched without a key (`UNORDERED`) never queues: it runs at once and, if it must
wait, in a task of its own; the shard's state orders such commands itself (the transaction shard's
pending transitions answer CONCURRENT_TRANSACTIONS, as Kafka's TransactionCoordinator does).

A runtime that is unloaded (coordinator move, storage failure, stop) turns `active` off: the
command being carried out finishes, queued requests go back to the coordinator runtime (which
refuses them or, if the partition was loaded again meanwhile, hands them to the new runtime), queued
expiries are dropped (the unload cancelled their timers).
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

from .execute import (
    AppendNowait,
    AppendRecords,
    PipelinedWrites,
    apply_unwritten,
    execute_outcome,
    execute_pipelined,
    runs_without_waiting,
)
from .outcome import CancelTimer, Outcome, Reply, TimerOp
from .shard import Shard

E = ErrorCode
log = structlog.get_logger("kbroker.coordinator")


# The key of a command that keeps no order with others (`dispatch`).
UNORDERED = None
_ALONE = object()  # the key of one unordered command's queue, which no other command finds


class Expiry:
    """A timer's expiry on its way to its key's turn; handled only if `claim` says it is still live."""

    __slots__ = ("cmd", "key", "token")

    def __init__(self, cmd: Any, key: str, token: int) -> None:
        self.cmd = cmd
        self.key = key
        self.token = token


class Internal:
    """Periodic work with no timer key of its own (the offsets retention check): no answer."""

    __slots__ = ("cmd",)

    def __init__(self, cmd: Any) -> None:
        self.cmd = cmd


# Requests are queued as themselves (they carry their reply handle).
Item = Any  # a request | Expiry | Internal


class KeyQueue:
    """A busy key's commands, carried out one at a time by `task`."""

    __slots__ = ("key", "items", "task")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.items: deque[Item] = deque()
        self.task: asyncio.Task[None] | None = None


def deliver(reply: Reply) -> None:
    future = reply.to
    if isinstance(future, asyncio.Future) and not future.done():
        future.set_result(reply.result)


class PartitionRuntime:
    def __init__(
        self,
        shard: Shard,
        *,
        clock: Clock,
        timers: KeyedTimers,
        append: AppendRecords,
        append_nowait: AppendNowait | None,
        queues: set[KeyQueue],
        on_event: Callable[[Any], None],
        on_storage_failure: Callable[[int, ErrorCode], None],
        requeue: Callable[[Item, Any, int], None],
    ) -> None:
        self.partition = shard.partition
        self.shard = shard
        self.active = True
        self._clock = clock
        self._timers = timers
        self._append = append
        self._append_nowait = append_nowait
        self._queues: dict[Any, KeyQueue] = {}
        self._all_queues = queues  # the coordinator runtime's view of every busy key (stop, quiesce)
        self._on_event = on_event
        self._on_storage_failure = on_storage_failure
        self._requeue = requeue
        self._pipelined = PipelinedWrites()  # pipelined writes (and their replies) waiting for their fsync

    # -- load / unload -------------------------------------------------------------------------

    async def replay(self, records: Iterable[Any]) -> None:
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
        """After the replay: the shard arms what its loaded state needs (members' session deadlines)."""
        await self.execute(self.shard.finish_load(self._clock.wall_ms()))

    async def unload(self) -> None:
        """Stop serving: parked answers get NOT_COORDINATOR, timers stop, queued requests go back."""
        self.active = False
        await self.execute(self.shard.unload(self._clock.wall_ms()))

    # -- commands ------------------------------------------------------------------------------

    def dispatch(self, item: Item, key: Any) -> None:
        """Run `item` now if its key is idle, else queue it behind the key's commands. A command
        with the key UNORDERED never waits for another: if it must wait for a write, it does so in
        a task of its own."""
        queue = self._queues.get(key) if key is not UNORDERED else None
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
            self._start(key if key is not UNORDERED else _ALONE, outcome)

    def enqueue(self, item: Item, key: Any) -> None:
        """Queue `item` for a later loop turn even if the key is idle (timer expiries: they fire
        inside the timer driver, which must not run a shard's handlers)."""
        queue = self._queues.get(key) if key is not UNORDERED else None
        if queue is None:
            self._start(key if key is not UNORDERED else _ALONE, None).items.append(item)
        else:
            queue.items.append(item)

    def _start(self, key: Any, first: Outcome | None) -> KeyQueue:
        """A queue and its task for `key` (for _ALONE: one unordered command's, which no other finds)."""
        queue = KeyQueue(key)
        if key is not _ALONE:
            self._queues[key] = queue
        self._all_queues.add(queue)
        queue.task = asyncio.get_running_loop().create_task(self._drain(queue, first), name=f"key:{key}")
        return queue

    async def _drain(self, queue: KeyQueue, first: Outcome | None) -> None:
        try:
            if first is not None:
                await self._execute_guarded(first)
            items = queue.items
            while items:
                item = items.popleft()
                if not self.active:
                    if not isinstance(item, (Expiry, Internal)):
                        self._requeue(item, UNORDERED if queue.key is _ALONE else queue.key, self.partition)
                    continue
                outcome = self._handle(item)
                if outcome is not None:
                    await self._execute_guarded(outcome)
        finally:
            # No await since the last check of `items`: nothing can have slipped in.
            if self._queues.get(queue.key) is queue:
                del self._queues[queue.key]
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
            if outcome.after_pipelined:
                self._hold_until_durable(cmd, outcome)
            return outcome
        except Exception:  # noqa: BLE001 - one bad command must not take its key down
            log.exception(
                "coordinator_error", group=getattr(cmd, "group_id", None), api=type(cmd).__name__,
                member=getattr(cmd, "member_id", None), partition=self.partition,
            )
            if not isinstance(item, (Expiry, Internal)):
                deliver(Reply(item.reply_to, self.shard.error_result(item, E.UNKNOWN_SERVER_ERROR)))
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

    def _hold_until_durable(self, cmd: Any, outcome: Outcome) -> None:
        """Answer (an OffsetFetch) only once every pipelined write it could see is on disk."""
        pending = self._pipelined.pending
        if pending is None or pending.done():
            if pending is not None and not pending.cancelled() and pending.exception() is not None:
                outcome.replies = [Reply(r.to, self.shard.error_result(cmd, E.NOT_COORDINATOR))
                                   for r in outcome.replies]
            return
        replies, outcome.replies = outcome.replies, []
        shard = self.shard

        def release(done: asyncio.Future) -> None:
            failed = done.cancelled() or done.exception() is not None
            for reply in replies:
                deliver(Reply(reply.to, shard.error_result(cmd, E.NOT_COORDINATOR)) if failed else reply)

        pending.add_done_callback(release)

    # -- timers --------------------------------------------------------------------------------

    def _apply_timer(self, op: TimerOp) -> None:
        if isinstance(op, CancelTimer):
            self._timers.cancel(op.key)
        else:
            self._timers.schedule(op.key, op.delay_ms, partial(self._on_timer, op.expiry))

    def _on_timer(self, expiry: Any, fired: TimerFired) -> None:
        if self.active:
            self.enqueue(Expiry(expiry, fired.key, fired.token), self.shard.key_of(expiry))

    # -- seeing into it ------------------------------------------------------------------------

    def queued(self, key: Any) -> int:
        queue = self._queues.get(key)
        return len(queue.items) if queue is not None else 0
