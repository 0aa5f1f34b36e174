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
the last cleaning stopped (`PartitionLog.cleaned_to`), or the log start. Kafka keeps that offset in
its cleaner-offset-checkpoint file; kbroker keeps it in memory, so after a restart each compacted log
counts as all dirty and is cleaned once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog

from . import compaction
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

    def __init__(self, logs: Callable[[], list[PartitionLog]], now_ms: Callable[[], int]) -> None:
        self._logs = logs
        self._now_ms = now_ms
        self._wake = asyncio.Event()
        self.rounds = 0  # logs cleaned, for tests and metrics

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
        stats = await compaction.compact_async(plog, now_ms)
        if plog.cleaned_to == before:
            return False  # taken meanwhile, or nothing to do after all: the next round sees
        self.rounds += 1
        log.info("log_cleaned", topic=plog.topic, partition=plog.partition, dirty_ratio=round(ratio, 3),
                 forced_by_max_compaction_lag=forced, segments_rewritten=stats.segments_rewritten,
                 bytes_before=stats.bytes_before, bytes_after=stats.bytes_after)
        return True

    async def run(self, backoff_ms: Callable[[], int]) -> None:
        """Clean while a log needs it; otherwise sleep the backoff (read each round: a dynamic config)."""
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
