"""The coordinator runtime (Kafka's CoordinatorRuntime): the shards of the partitions of one
coordinator log that this node leads, and the routing of each command to its partition's runtime.

    front (GroupCoordinatorService, TransactionCoordinatorService)   what a request means
      -> CoordinatorRuntime   (this module)   loaded partitions, prechecks, routing by key, life cycle
        -> PartitionRuntime   (partition.py)  per-key order, write-then-respond, timers
          -> Shard            (shard.py)      the partition's state machine: handle, replay, follow-ups

A partition is *loading* (its commands answered COORDINATOR_LOAD_IN_PROGRESS) from `mark_loading`
until `load` has replayed its records into a fresh shard; *loaded* until `unload` (resignation) or
a storage failure takes it offline; otherwise its commands are answered NOT_COORDINATOR. Every
answer the runtime makes itself (a refusal, an unload's leftovers) comes from the front's `refusal`,
so the runtime never needs to know what a command is.

Persistence goes through a `PartitionWriter` (shard.py) only; time comes from the injected clock and
one keyed timer driver (the broker's, or the runtime's own when it is used alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...purgatory.clock import Clock, SystemClock
from ...purgatory.timers import KeyedTimers
from .execute import AppendNowait, AppendRecords
from .partition import Expiry, Internal, Item, KeyQueue, PartitionRuntime
from .shard import PartitionWriter, Shard

E = ErrorCode
log = structlog.get_logger("kbroker.coordinator")

Refusal = Callable[[Any, ErrorCode], Any]


class CoordinatorRuntime:
    def __init__(
        self,
        new_shard: Callable[[int], Shard],
        *,
        append: AppendRecords,
        append_nowait: AppendNowait | None = None,
        partition_of: Callable[[str], int],
        refusal: Refusal,
        on_event: Callable[[Any], None],
        clock: Clock | None = None,
        timers: KeyedTimers | None = None,
        name: str = "coordinator",
    ) -> None:
        self.clock: Clock = clock or (timers.clock if timers is not None else SystemClock())
        # Without injected timers the runtime runs its own driver; a broker passes its shared one.
        self.timers = timers or KeyedTimers(self.clock)
        self._runs_timer_driver = timers is None
        self.name = name
        self._new_shard = new_shard
        self._append = append
        self._append_nowait = append_nowait
        self.partition_of = partition_of
        self._refusal = refusal
        self._on_event = on_event
        self._runtimes: dict[int, PartitionRuntime] = {}
        self._loading: set[int] = set()
        self._all_loaded = asyncio.Event()  # set while no partition is loading (until_loaded)
        self._all_loaded.set()
        self._offline: set[int] = set()
        self._unloads: set[asyncio.Task] = set()
        self._queues: set[KeyQueue] = set()  # every busy key's queue, of every partition runtime
        self.running = False
        # The loop serving it, kept at start: asking asyncio for the running loop costs a system call
        # (getpid, Python 3.11's check for a fork) on every request that makes a future.
        self.loop: asyncio.AbstractEventLoop | None = None
        self._driver: asyncio.Task[None] | None = None

    @classmethod
    def writing_to(cls, writer: PartitionWriter, new_shard: Callable[[int], Shard], **kw: Any) -> CoordinatorRuntime:
        """A runtime whose records go through `writer` (pipelined too)."""
        return cls(new_shard, append=writer.append_records, append_nowait=writer.append_records_nowait, **kw)

    # -- life cycle ----------------------------------------------------------------------------

    def start_now(self) -> None:
        self.running = True
        self.loop = asyncio.get_running_loop()
        if self._runs_timer_driver and self._driver is None:
            self._driver = self.loop.create_task(self.timers.run(), name=f"{self.name}-timers")

    async def stop(self) -> None:
        self.running = False
        for partition in list(self._runtimes):
            await self.unload(partition)
        queues, tasks = list(self._queues), []
        self._queues.clear()
        for queue in queues:
            if queue.task is not None:
                queue.task.cancel()
                tasks.append(queue.task)
            for item in queue.items:
                if not isinstance(item, (Expiry, Internal)):
                    self.refuse(item, E.COORDINATOR_NOT_AVAILABLE)
            queue.items.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._driver is not None:
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)
            self._driver = None
        self.loop = None  # a request after the stop gets its future on the loop it comes from

    async def load(self, partition: int, records: Iterable[Any]) -> None:
        """Become coordinator for `partition`: replay its records (tombstones included) into a new
        shard, then serve it. Its commands meanwhile get COORDINATOR_LOAD_IN_PROGRESS."""
        if partition in self._runtimes:
            await self.unload(partition)
        self._offline.discard(partition)  # a log opened again (kbroker over PostgreSQL reopens a failed one)
        self._loading.add(partition)
        self._all_loaded.clear()
        try:
            runtime = self._new_runtime(partition)
            await runtime.replay(records)
            self._runtimes[partition] = runtime
            await runtime.resume()
        finally:
            self._done_loading(partition)
        log.debug("partition_loaded", coordinator=self.name, partition=partition)

    def load_empty(self, partitions: Iterable[int]) -> None:
        """Become coordinator at once for partitions that hold no record (`load` with nothing to
        replay): a coordinator built with its first request serves that request."""
        for partition in partitions:
            if partition in self._runtimes:
                raise RuntimeError(f"partition {partition} is already loaded")
            runtime = self._new_runtime(partition)
            runtime.load_empty()
            self._runtimes[partition] = runtime
            self._done_loading(partition)

    def _done_loading(self, partition: int) -> None:
        self._loading.discard(partition)
        if not self._loading:
            self._all_loaded.set()

    def _new_runtime(self, partition: int) -> PartitionRuntime:
        return PartitionRuntime(
            self._new_shard(partition), clock=self.clock, timers=self.timers, append=self._append,
            append_nowait=self._append_nowait, queues=self._queues, on_event=self._on_event,
            on_storage_failure=self._on_storage_failure, requeue=self._requeue,
        )

    async def unload(self, partition: int) -> None:
        """Resign `partition`: parked answers get NOT_COORDINATOR, its timers stop, its queued
        requests are refused (or handed to the partition's next runtime)."""
        runtime = self._runtimes.pop(partition, None)
        if runtime is not None:
            await runtime.unload()
            log.debug("partition_unloaded", coordinator=self.name, partition=partition)

    def mark_loading(self, partitions: Iterable[int]) -> None:
        """Before replay begins: these partitions answer COORDINATOR_LOAD_IN_PROGRESS (not
        NOT_COORDINATOR) until `load` has replayed them."""
        self._loading.update(partitions)
        if self._loading:
            self._all_loaded.clear()

    @property
    def is_loading(self) -> bool:
        return bool(self._loading)

    async def until_loaded(self) -> None:
        """Return once no partition is loading (at once if none is)."""
        await self._all_loaded.wait()

    def loading(self, partition: int) -> bool:
        return partition in self._loading

    def shard(self, partition: int) -> Any:
        """The loaded shard of `partition`, or None (read it only between two of its commands)."""
        runtime = self._runtimes.get(partition)
        return runtime.shard if runtime is not None else None

    def shards(self) -> Iterable[Any]:
        """Every loaded shard (those still loading excepted)."""
        return [r.shard for p, r in self._runtimes.items() if p not in self._loading]

    @property
    def loaded_partitions(self) -> int:
        return len(self._runtimes)

    def loaded(self) -> list[int]:
        return sorted(self._runtimes)

    # -- routing -------------------------------------------------------------------------------

    def precheck(self, partition: int) -> ErrorCode | None:
        """Whether this node may serve `partition` now (None), else the error to answer."""
        if not self.running:
            return E.COORDINATOR_NOT_AVAILABLE
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._runtimes:
            return E.NOT_COORDINATOR
        return None

    def new_future(self) -> asyncio.Future[Any]:
        return (self.loop or asyncio.get_running_loop()).create_future()

    def dispatch(self, cmd: Any, key: Any, future: asyncio.Future[Any], partition: int | None = None) -> None:
        """Hand a command that passed its prechecks to its partition's runtime (its key's turn, or
        at once for the key UNORDERED); `future` gets its result. The command belongs to the runtime
        from here on (its `reply_to` is set)."""
        cmd.reply_to = future
        self._runtimes[self.partition_of(key) if partition is None else partition].dispatch(cmd, key)

    def dispatch_internal(self, partition: int, cmd: Any, key: Any, *, now: bool = False) -> None:
        """Periodic work for `key` (no answer): queued for a later loop turn, or run `now`."""
        runtime = self._runtimes.get(partition)
        if runtime is None:
            return
        if now:
            runtime.dispatch(Internal(cmd), key)
        else:
            runtime.enqueue(Internal(cmd), key)

    def refuse(self, cmd: Any, error: ErrorCode) -> None:
        deliver_to = getattr(cmd, "reply_to", None)
        if isinstance(deliver_to, asyncio.Future) and not deliver_to.done():
            deliver_to.set_result(self._refusal(cmd, error))

    def _requeue(self, cmd: Item, key: Any, partition: int) -> None:
        """A request queued in a runtime that was unloaded before its turn: refused as if it came
        now, or handed to the partition's new runtime (after its queued commands)."""
        error = self.precheck(partition)
        if error is not None:
            self.refuse(cmd, error)
        else:
            self._runtimes[partition].dispatch(cmd, key)

    def _on_storage_failure(self, partition: int, code: ErrorCode) -> None:
        """The partition's log is fenced: stop serving it until a restart reloads it."""
        if code is not E.KAFKA_STORAGE_ERROR or partition in self._offline:
            return
        self._offline.add(partition)
        log.error("coordinator_partition_offline", coordinator=self.name, partition=partition, error=code.name)
        runtime = self._runtimes.pop(partition, None)
        if runtime is not None:
            task = asyncio.ensure_future(runtime.unload())
            self._unloads.add(task)
            task.add_done_callback(self._unloads.discard)

    # -- tests and tools -----------------------------------------------------------------------

    async def quiesce(self, max_rounds: int = 1000) -> None:
        """Wait until no key has work queued or in progress (for tests driving a manual clock)."""
        await self.quiesce_until(lambda: not self._queues, max_rounds)

    @staticmethod
    async def quiesce_until(done: Callable[[], bool], max_rounds: int = 1000) -> None:
        """Let the loop run, one turn at a time, until `done()` holds (no real time involved)."""
        for _ in range(max_rounds):
            await asyncio.sleep(0)
            if done():
                return
        raise TimeoutError("the coordinator did not reach the expected state")

    def queued(self, key: Any) -> int:
        """How many commands of `key` wait behind the one in progress (0 when idle)."""
        runtime = self._runtimes.get(self.partition_of(key))
        return runtime.queued(key) if runtime is not None else 0

    async def advance_timers(self, now_ms: int | None = None) -> None:
        """Fire due timers at `now_ms` (default: the clock) and let the shards handle them."""
        self.timers.advance_to(self.clock.now_ms() if now_ms is None else now_ms)
        await self.quiesce()

    @property
    def busy_keys(self) -> int:
        """Keys with commands queued or in progress (an idle key has nothing here)."""
        return len(self._queues)
