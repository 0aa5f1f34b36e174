"""The log cleaner's choice (broker/storage/log/cleaner.py) on real segment files, with Kafka's knobs:
min.cleanable.dirty.ratio, min.compaction.lag.ms, max.compaction.lag.ms; the time is the caller's."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.log.cleaner import LogCleaner, dirtiness, filthiest
from kbroker.broker.storage.log.compaction import compact, compact_async
from kbroker.protocol.record_batch import Record, encode_batch

COMPACT = dict(cleanup_policy="compact", segment_bytes=1_000)


def filled(path: Path, name: str, config: LogConfig, batches: int, start_ts: int = 0) -> PartitionLog:
    """`batches` batches of two records each, every key its own: a cleaning keeps them all."""
    plog = PartitionLog(path / f"{name}-0", name, 0, config, flush_policy="never")
    add(plog, batches, start_ts, unique=True)
    return plog


def add(plog: PartitionLog, batches: int, start_ts: int, unique: bool = False) -> None:
    """`batches` batches of two records; unless `unique`, always keys k0 and k1 (garbage but the newest)."""
    for i in range(batches):
        ts = start_ts + i * 1_000
        keys = [b"u%d-%d-%d" % (start_ts, i, j) if unique else b"k%d" % j for j in range(2)]
        plog.append(encode_batch([Record(j, ts, key, b"x" * 100) for j, key in enumerate(keys)]), leader_epoch=0,
                    now_ms=ts)


def test_a_never_cleaned_log_is_all_dirty_and_clean_after_a_cleaning(tmp_path: Path) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 40)
    assert len(plog.segments) > 4
    assert dirtiness(plog, 100_000) == (1.0, False)
    assert filthiest([plog], 100_000) is plog
    compact(plog, 100_000)
    assert plog.cleaned_to == plog.segments[-1].base_offset
    assert dirtiness(plog, 100_000) == (0.0, False)
    assert filthiest([plog], 100_000) is None


def test_the_dirty_ratio_decides(tmp_path: Path) -> None:
    """A little new garbage after a cleaning: below the default ratio (0.5) the log waits, above a
    low one it is cleaned."""
    lazy = filled(tmp_path, "lazy", LogConfig(**COMPACT), 40)
    eager = filled(tmp_path, "eager", LogConfig(**COMPACT, min_cleanable_dirty_ratio=0.01), 40)
    for plog in (lazy, eager):
        compact(plog, 100_000)
        add(plog, 10, 200_000)  # a few more segments roll: dirty, but far less than half
    ratios = [dirtiness(plog, 300_000)[0] for plog in (lazy, eager)]
    assert ratios[0] == ratios[1] and 0.01 < ratios[0] < 0.5
    assert filthiest([lazy], 300_000) is None
    assert filthiest([lazy, eager], 300_000) is eager


def test_the_filthiest_goes_first(tmp_path: Path) -> None:
    config = LogConfig(**COMPACT, min_cleanable_dirty_ratio=0.01)
    little = filled(tmp_path, "little", config, 40)
    compact(little, 100_000)
    add(little, 10, 200_000)
    never = filled(tmp_path, "never", config, 40)
    assert filthiest([little, never], 300_000) is never


def test_min_compaction_lag_keeps_young_records_out(tmp_path: Path) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT, min_compaction_lag_ms=60_000), 40)  # records 0 .. 39 s
    assert filthiest([plog], 50_000) is None  # no inactive segment is a minute old yet
    assert dirtiness(plog, 10_000_000) == (1.0, False)
    assert filthiest([plog], 10_000_000) is plog


def test_max_compaction_lag_forces_a_cleaning_below_the_ratio(tmp_path: Path) -> None:
    """The same little garbage: the log whose oldest uncleaned record is past max.compaction.lag.ms is
    cleaned, the other waits for its ratio."""
    logs = []
    for name, lag in (("patient", None), ("bounded", 100_000)):
        config = LogConfig(**COMPACT) if lag is None else LogConfig(**COMPACT, max_compaction_lag_ms=lag)
        plog = filled(tmp_path, name, config, 40)  # records at 0 .. 39 s
        compact(plog, 50_000)
        add(plog, 10, 200_000)  # dirty: the segment that was active at 39 s, and these
        logs.append(plog)
    patient, bounded = logs
    assert dirtiness(patient, 120_000)[0] < 0.5
    ratio, forced = dirtiness(bounded, 120_000)
    assert ratio < 0.5 and not forced  # the oldest uncleaned record (at 36 s) is 84 s old
    assert filthiest(logs, 120_000) is None
    assert dirtiness(bounded, 150_000)[1] is True  # now 114 s old
    assert filthiest(logs, 150_000) is bounded


def test_a_compacted_log_rolls_by_max_compaction_lag(tmp_path: Path) -> None:
    """Kafka's maxSegmentMs: a compacted log's active segment rolls once max.compaction.lag.ms
    passes, so its records become cleanable in time."""
    config = LogConfig(cleanup_policy="compact", max_compaction_lag_ms=5_000)
    plog = filled(tmp_path, "t", config, 3)  # 0, 1 s, 2 s: one segment
    assert len(plog.segments) == 1
    add(plog, 1, 10_000)
    assert len(plog.segments) == 2


def test_the_cleaner_loop_cleans_then_sleeps_the_backoff(tmp_path: Path) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 40)
    cleaner = LogCleaner(lambda: [plog], lambda: 100_000)

    async def rounds_past(n: int) -> None:
        while cleaner.rounds <= n:
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        task = asyncio.create_task(cleaner.run(lambda: 3_600_000))
        await asyncio.wait_for(rounds_past(0), 60)  # a bound against a hang, not a timing
        await asyncio.sleep(0.05)
        assert cleaner.rounds == 1  # nothing dirty left: it sleeps the (hour-long) backoff
        add(plog, 120, 200_000)  # three times the clean bytes in garbage: past the 0.5 ratio
        assert dirtiness(plog, 100_000)[0] > 0.5
        cleaner.wake()
        await asyncio.wait_for(rounds_past(1), 60)
        task.cancel()

    asyncio.run(scenario())
    assert dirtiness(plog, 100_000)[0] == 0.0


class HeldThread:
    """A throttler (compaction's hook in its worker thread) that holds the cleaning's thread at its first
    read until released, so records can come on the loop while it runs, as they do under load."""

    slept_ms = 0

    def __init__(self) -> None:
        self.reading, self.go = threading.Event(), threading.Event()

    def observe(self, nbytes: int) -> None:
        self.reading.set()
        assert self.go.wait(60)  # a bound against a hang


def test_segments_rolled_while_a_cleaning_ran_are_cleaned_by_the_next(tmp_path: Path) -> None:
    """The cleaning's memo of the log it left (no rerun until the log changes) was taken after the swap,
    with the segments rolled during the run in it: the next rounds found the log 'unchanged' and never
    cleaned them (the broker's cleaner stopped short of the active segment under load)."""
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 20)
    held = HeldThread()

    async def scenario() -> None:
        cleaning = asyncio.create_task(compact_async(plog, 100_000, held))  # type: ignore[arg-type]
        while not held.reading.is_set():
            await asyncio.sleep(0.01)
        add(plog, 20, 200_000)  # garbage, rolling segments, while the thread cleans the first ones
        held.go.set()
        await cleaning

    asyncio.run(scenario())
    assert plog.cleaned_to < plog.segments[-1].base_offset
    assert filthiest([plog], 300_000) is plog
    compact(plog, 300_000)
    assert plog.cleaned_to == plog.segments[-1].base_offset
    assert dirtiness(plog, 300_000) == (0.0, False)
