"""Group commit: turning many appends into few fsyncs, off the event loop.

Design: one `Flusher` per partition log, whose asyncio task exists only while someone waits.
* Partitions are separate files, so their fsyncs are independent: per-log tasks let the default
  executor run several partitions' fsyncs in parallel instead of queueing them behind one another.
* An idle partition costs nothing (no timer, no task), which matters with thousands of partitions.
* While one fsync runs in a worker thread, new appends keep landing in the page cache and their
  waiters queue up; the next round's single fsync covers all of them. That is the group commit.

The `interval:MS` policy instead uses one shared periodic task in the LogManager (see manager.py):
with no waiters to serve, N timers would be pure overhead.

A failed fsync (or a failed write, see PartitionLog.append) fences the log until restart, as
Kafka's LogDirFailureChannel takes a log directory offline: after an fsync error the kernel may
have dropped the dirty pages, so a later successful fsync proves nothing about the failed records.
Fenced, the log marks nothing durable again, its waiters fail with KAFKA_STORAGE_ERROR, and every
later append and wait fails the same way; restart recovery decides what the files really hold.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
from typing import TYPE_CHECKING, Callable, Protocol

import structlog

from ....protocol.errors import ErrorCode, KafkaError

from .config import FlushPolicy

if TYPE_CHECKING:
    from .partition_log import PartitionLog
    from .segment import LogSegment
    from .sync_batcher import SyncBatcher

log = structlog.get_logger(__name__)


class StorageError(KafkaError):
    code = ErrorCode.KAFKA_STORAGE_ERROR


def sync_segments(segments: list[tuple[LogSegment, bool]], fsync: Callable[[int], None]) -> None:
    """fsync each (segment, with_indexes); runs in a worker thread."""
    for segment, with_indexes in segments:
        segment.sync(fsync, with_indexes=with_indexes)


async def flush_dirty(logs: list[PartitionLog], fsync: Callable[[int], None]) -> None:
    """One tick of the `interval:MS` policy (LogManager's one task for every log): each log's dirty
    segments snapshotted on the loop, fsynced in one worker-thread call, then each log's durable
    offset advanced. A log whose flusher was never made was never appended to since load: it needs a
    round only for what load left unsynced (an inactive segment's indexes), and only then gets one."""
    rounds = [(plog, *plog.flusher.snapshot()) for plog in logs if plog.has_flusher or plog.segments_to_sync()]
    work = [item for _, _, segments in rounds for item in segments]
    if work:
        try:
            await asyncio.to_thread(sync_segments, work, fsync)
        except OSError as exc:
            log.error("interval_flush_failed", error=repr(exc))
            for plog, _, segments in rounds:
                if segments:  # which file failed is unknown: none of them may count as durable
                    plog.flusher.fence(exc)
            return
    for plog, target, _ in rounds:
        plog.flusher.complete(target)


def _consume_outcome(future: asyncio.Future[None]) -> None:
    """A flush nobody awaits: its failure has fenced the log and been logged (log_fenced)."""
    if not future.cancelled():
        future.exception()


# Heap tie-breaks of every Flusher (only their order within one heap matters): one counter, not one
# per idle partition.
_TIEBREAK = itertools.count()


class FlushedLog(Protocol):
    """What a Flusher makes durable: a partition's log (PartitionLog)."""

    topic: str
    partition: int

    def end_to_sync(self) -> int: ...  # the log end offset a sync started now covers

    def segments_to_sync(self) -> list[tuple[LogSegment, bool]]: ...  # (segment, with its indexes)

    def after_sync(self) -> None: ...  # run on the loop after a sync covered what segments_to_sync gave

    def durable_moved(self) -> None: ...  # run on the loop when the durable offset moved forward


class Flusher:
    # One per partition, thousands idle: slots ("__dict__" keeps other attributes possible), and the
    # log itself rather than three bound methods of it and a name string (~250 B per partition).
    __slots__ = ("_log", "_batcher", "_policy", "_fsync",
                 "durable_offset", "_waiters", "_tiebreak", "_task", "_closed", "fenced", "__dict__")

    def __init__(
        self,
        policy: FlushPolicy,
        flushed: FlushedLog,
        fsync: Callable[[int], None] = os.fsync,
        batcher: SyncBatcher | None = None,
    ) -> None:
        self._log = flushed
        self._batcher = batcher  # shares worker-thread jobs with other partitions' rounds (sync_batcher.py)
        self._policy = policy
        self._fsync = fsync
        # Offsets below this are on disk. What recovery found at start-up counts as durable: it is
        # what the log holds, and no producer is waiting on it.
        self.durable_offset = flushed.end_to_sync()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._tiebreak = _TIEBREAK
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.fenced: StorageError | None = None

    @property
    def name(self) -> str:
        """topic-partition, for log events"""
        return f"{self._log.topic}-{self._log.partition}"

    def fence(self, exc: BaseException) -> StorageError:
        """Refuse every later append and wait of this log until restart (see the module docstring)."""
        if self.fenced is None:
            self.fenced = StorageError(f"log {self.name or '?'} is offline after a storage error: {exc!r}")
            log.error("log_fenced", log=self.name, error=repr(exc))
        self._fail_waiters(self.fenced)
        return self.fenced

    @property
    def policy(self) -> FlushPolicy:
        return self._policy

    async def wait_durable(self, offset: int) -> None:
        """Return once the record at `offset` (and everything before it) is fsynced.

        Only `always` waits; with `interval:MS` and `never` durability is the background's business.
        """
        future = self.durable_future(offset)
        if future is not None:
            await future

    def durable_future(self, offset: int) -> asyncio.Future[None] | None:
        """`wait_durable` as a plain future (None: durable already), so that a request waiting on many
        partitions gathers futures instead of starting a task per partition."""
        if self.fenced is not None:
            raise self.fenced
        if self._policy.kind != "always" or offset < self.durable_offset:
            return None
        if self._closed:
            raise StorageError("log is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiters, (offset, next(self._tiebreak), future))
        if self._task is None:
            self._task = loop.create_task(self._run(), name="log-flush")
        return future

    def request(self) -> None:
        """Make what is appended durable though nobody waits for it (acks=0 under `always`: the high
        watermark is the durable end, so records nobody flushed would never be read)."""
        if self.fenced is not None or self._closed or self._policy.kind != "always":
            return
        end = self._log.end_to_sync()
        if end > self.durable_offset:
            future = self.durable_future(end - 1)
            if future is not None:
                future.add_done_callback(_consume_outcome)

    def after_round(self, callback: Callable[[], None]) -> bool:
        """Run `callback` on the loop once the flush round in progress has ended (and no waiter is
        left for it); False, and nothing registered, when no round is in progress."""
        task = self._task
        if task is None or task.done():
            return False
        task.add_done_callback(lambda _task: callback())
        return True

    def snapshot(self) -> tuple[int, list[tuple[LogSegment, bool]]]:
        """What a flush round starting now covers: the log end offset and the segments to fsync."""
        return self._log.end_to_sync(), self._log.segments_to_sync()

    def complete(self, target: int) -> None:
        """Bookkeeping after a round that covered `target`; must run on the event loop."""
        if self.fenced is not None:
            return
        self._mark_durable(target)
        self._log.after_sync()

    @property
    def fsync(self) -> Callable[[int], None]:
        return self._fsync

    async def flush_async(self) -> None:
        """One flush round in a worker thread (segment roll); bookkeeping back on the loop."""
        target, segments = self.snapshot()
        if segments:
            try:
                await asyncio.to_thread(sync_segments, segments, self._fsync)
            except OSError as exc:
                raise self.fence(exc) from exc
        self.complete(target)

    def sync_now(self) -> None:
        """Synchronous full flush (close, roll without a loop, interval ticks from a thread)."""
        if self.fenced is not None:
            raise self.fenced
        target = self._log.end_to_sync()
        try:
            sync_segments(self._log.segments_to_sync(), self._fsync)
        except OSError as exc:
            raise self.fence(exc) from exc
        self._mark_durable(target)
        self._log.after_sync()

    def _mark_durable(self, target: int) -> None:
        if target > self.durable_offset:
            self.durable_offset = target
            self._log.durable_moved()
        waiters = self._waiters
        while waiters and waiters[0][0] < self.durable_offset:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(None)

    async def _run(self) -> None:
        try:
            while self._waiters:
                target = self._log.end_to_sync()
                segments = self._log.segments_to_sync()
                if segments and self._batcher is not None:
                    await self._batcher.sync(segments, self._fsync)
                elif segments:
                    await asyncio.to_thread(sync_segments, segments, self._fsync)
                self._mark_durable(target)
                self._log.after_sync()
                if self._waiters and self._waiters[0][0] >= self._log.end_to_sync() and not self._log.segments_to_sync():
                    # Waiting on offsets the log no longer has (truncated): nothing will ever cover them.
                    self._fail_waiters(StorageError("offset was truncated before it became durable"))
        except Exception as exc:
            log.error("log_flush_failed", log=self.name, error=repr(exc))
            self.fence(exc)
        finally:
            self._task = None

    def _fail_waiters(self, exc: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, future in waiters:
            if not future.done():
                future.set_exception(exc)

    async def drain(self) -> None:
        """Let an in-flight flush finish (before close)."""
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    def close(self) -> None:
        """Final synchronous flush; releases any waiter."""
        self._closed = True
        try:
            if self.fenced is None:
                self.sync_now()
        finally:
            self._fail_waiters(StorageError("log closed"))

    def abandon(self) -> None:
        """The log is being deleted: no final flush, just release waiters."""
        self._closed = True
        self._fail_waiters(StorageError("log deleted"))
