"""The log cleaner: compaction with Kafka's cadence and knobs (LogCleaner and LogCleanerManager, one
cleaner thread), apart from the retention check.

Each round picks the filthiest compacted log and cleans it (compaction.py); when none needs it, the
cleaner sleeps `log.cleaner.backoff.ms` (a dynamic broker config, read each round; a change wakes it).
A log needs cleaning when its cleanable ratio passes its `min.cleanable.dirty.ratio`, or when its
oldest uncleaned record is older than its `max.compaction.lag.ms` (Kafka's needCompactionNow). Of
the logs that need it, the one with the highest ratio goes first.

The ratio is Kafka's: dirty bytes / (clean + dirty bytes) over the cleanable segments: the inactive
ones whose records are all older than `min.compaction.lag.ms`, below the first unstable offset
(txn_cleaning.py). A segment is clean when it ends at or before the log's first dirty offset: where
the last cleaning stopped (`PartitionLog.cleaned_to`), or the log start. That offset is kept across
restarts in Kafka's cleaner-offset-checkpoint file (cleaner_checkpoint.py), read when the cleaner is
made (after the logs load) and checked as Kafka's LogCleanerManager checks it: one below the log start
counts from the log start, one beyond the log end (the log's tail lost meanwhile) is dropped with a
warning, and the log counts as all dirty.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from . import compaction
from .cleaner_checkpoint import CleanerCheckpoint, Offsets
from .throttler import Throttler
from .txn_cleaning import cleanable_below_limit
from .txn_cleaning import for_log as txn_cleaning_for

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = structlog.get_logger(__name__)


def dirtiness(plog: PartitionLog, now_ms: int) -> tuple[float, bool]:
    """(cleanable ratio, whether max.compaction.lag.ms forces a cleaning now) of a compacted log."""
    cleanable = cleanable_below_limit(compaction.cleanable_segments(plog, now_ms), txn_cleaning_for(plog))
    if not cleanable:
        return 0.0, False
    first_dirty = max(plog.cleaned_to, plog.log_start_offset)
    ends = {id(s): n.base_offset for s, n in zip(plog.segments, plog.segments[1:])}
    clean = dirty = 0
    oldest_dirty = -1  # the first dirty segment's first batch time (Kafka's earliest dirty timestamp)
    for segment in cleanable:
        if ends[id(segment)] <= first_dirty:
            clean += segment.size
            continue
        if dirty == 0 and oldest_dirty < 0:
            oldest_dirty = segment.first_batch_timestamp
        dirty += segment.size
    total = clean + dirty
    ratio = dirty / total if total else 0.0
    max_lag = plog.config.max_compaction_lag_ms
    forced = dirty > 0 and 0 <= oldest_dirty and now_ms - oldest_dirty > max_lag
    return ratio, forced


def filthiest(logs: Iterable[PartitionLog], now_ms: int) -> PartitionLog | None:
    """The compacted log that needs cleaning most, or None (LogCleanerManager.grabFilthiestCompactedLog)."""
    best: tuple[float, PartitionLog] | None = None
    for plog in logs:
        if plog.closed or not plog.config.compact or plog.maintenance_lock.locked():
            continue  # a replay or a retention pass is reading it: a later round
        ratio, forced = dirtiness(plog, now_ms)
        if (ratio > plog.config.min_cleanable_dirty_ratio or forced) and (best is None or ratio > best[0]):
            best = (ratio, plog)
    return best[1] if best is not None else None


class LogCleaner:
    """The cleaner's loop over the logs in use (LogManager.logs)."""

    def __init__(self, logs: Callable[[], list[PartitionLog]], now_ms: Callable[[], int],
                 log_dir: Path | None = None) -> None:
        self._logs = logs
        self._now_ms = now_ms
        self._wake = asyncio.Event()
        self.rounds = 0  # logs cleaned, for tests and metrics
        # log.cleaner.io.max.bytes.per.second (a dynamic broker config; unlimited until run() says)
        self._io_max_bytes_per_s: Callable[[], float] = lambda: math.inf
        self._throttler = Throttler(lambda: self._io_max_bytes_per_s())
        # the checkpoint file of the log directory (none: kept in memory only, as unit tests run it)
        self._checkpoint = CleanerCheckpoint(log_dir) if log_dir is not None else None
        self._kept: Offsets = {}  # what the file holds (or will once the write in flight ends)
        if self._checkpoint is not None:
            self._seed(self._checkpoint.read())

    def _seed(self, offsets: Offsets) -> None:
        """Each loaded log's first dirty offset from the checkpoint (LogCleanerManager.cleanableOffsets'
        checks); entries of logs that are no more are dropped at the next write, as Kafka drops them."""
        for plog in self._logs():
            offset = offsets.get((plog.topic, plog.partition))
            if offset is None or plog.closed:
                continue
            if offset > plog.log_end_offset:
                log.warning("cleaner_checkpoint_beyond_log_end", topic=plog.topic, partition=plog.partition,
                            checkpoint=offset, log_end_offset=plog.log_end_offset,
                            action="the log counts as all dirty")
                continue
            plog.cleaned_to = max(plog.cleaned_to, offset)
        self._kept = self._offsets()

    def _offsets(self) -> Offsets:
        return {(p.topic, p.partition): p.cleaned_to for p in self._logs() if not p.closed and p.cleaned_to > 0}

    def _snapshot(self) -> tuple[int, bytes] | None:
        """The checkpoint's new content when it changed (taken on the loop), else None."""
        offsets = self._offsets()
        if self._checkpoint is None or offsets == self._kept:
            return None
        self._kept = offsets
        return self._checkpoint.snapshot(offsets)

    def _write(self, snapshot: tuple[int, bytes]) -> None:
        assert self._checkpoint is not None
        try:
            self._checkpoint.write(snapshot)
        except OSError as exc:  # the cleaning stands; a restart before the next write cleans the log again
            log.error("cleaner_checkpoint_write_failed", path=str(self._checkpoint.path), error=repr(exc))

    def forget_deleted(self) -> None:
        """A topic was deleted: its entries leave the file now, so that a topic made again under its
        name does not inherit them after a restart (Kafka's updateCheckpoints on deletion)."""
        snapshot = self._snapshot()
        if snapshot is not None:
            self._write(snapshot)

    def wake(self) -> None:
        """Look again now (a config changed) rather than after the backoff."""
        self._wake.set()

    async def clean_filthiest(self) -> bool:
        """Clean the filthiest log; False when none needs cleaning."""
        now_ms = self._now_ms()
        plog = filthiest(self._logs(), now_ms)
        if plog is None:
            return False
        ratio, forced = dirtiness(plog, now_ms)
        before = plog.cleaned_to
        stats = await compaction.compact_async(plog, now_ms, self._throttler)
        if plog.cleaned_to == before:
            return False  # taken meanwhile, or nothing to do after all: the next round sees
        self.rounds += 1
        snapshot = self._snapshot()
        if snapshot is not None:
            await asyncio.to_thread(self._write, snapshot)
        log.info("log_cleaned", topic=plog.topic, partition=plog.partition, dirty_ratio=round(ratio, 3),
                 forced_by_max_compaction_lag=forced, segments_rewritten=stats.segments_rewritten,
                 throttled_ms=stats.throttled_ms,
                 bytes_before=stats.bytes_before, bytes_after=stats.bytes_after)
        return True

    async def run(self, backoff_ms: Callable[[], int],
                  io_max_bytes_per_s: Callable[[], float] = lambda: math.inf) -> None:
        """Clean while a log needs it; otherwise sleep the backoff; the cleaning's reads and writes held
        to `io_max_bytes_per_s` (both read as they are used: dynamic configs)."""
        self._io_max_bytes_per_s = io_max_bytes_per_s
        while True:
            try:
                cleaned = await self.clean_filthiest()
            except Exception:
                log.exception("log_cleaner_failed")
                cleaned = False
            if cleaned:
                await asyncio.sleep(0)  # let the loop breathe between logs
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), backoff_ms() / 1000)
            except TimeoutError:
                pass
