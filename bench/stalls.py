"""Event-loop stalls (issue 10, section 8): the longest time the broker's loop could not answer anything
while it compacts a `__consumer_offsets` partition and while it replays one at start-up.

    python -m bench.stalls [--commits N] [--quick]

A probe task sleeps 5 ms over and over on the broker's own loop (uvloop) and records how late it wakes:
that lateness is how long a heartbeat or fetch arriving then would have waited. The storage runs in this
process (a LogManager over a temp directory, the real OffsetsTopic and GroupCoordinatorService), so the
figure is the loop's, not a network round trip's. For scale the same compaction is also run inline
(synchronously, as before issue 10): its duration is the stall it used to cause.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import uvloop

PROBE_S = 0.005


class LoopProbe:
    """Sleeps PROBE_S again and again; `longest_ms` is the worst oversleep seen (a stall)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            self.lags.append(time.perf_counter() - started - PROBE_S)

    def __enter__(self) -> LoopProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()

    @property
    def longest_ms(self) -> float:
        return 1000 * max(self.lags, default=0.0)

    def percentile_ms(self, q: float) -> float:
        if not self.lags:
            return 0.0
        ordered = sorted(self.lags)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _commits(n: int, groups: int = 1000, partitions: int = 10):
    from kbroker.protocol.records.classic_records import OffsetCommitRecord

    now = int(time.time() * 1000)
    for i in range(n):
        g, p = divmod(i % (groups * partitions), partitions)
        yield OffsetCommitRecord(f"bench-stall-{g}", "bench-stall-topic", p, i, -1, "", now)


async def _write(data_dir: Path, commits: int, per_batch: int = 10):
    """`commits` commit records in partition 0 of a one-partition `__consumer_offsets`, then a roll so
    they all sit in an inactive (compactable) segment."""
    from kbroker.broker.storage.log.manager import LogManager
    from kbroker.broker.coordinators.offsets_topic import TOPIC, OffsetsTopic
    from kbroker.broker.partitions.service import PartitionService

    logs = LogManager(data_dir, flush_policy="never")
    topic = OffsetsTopic(PartitionService.offline(logs), 1)
    topic.ensure()
    batch: list = []
    for record in _commits(commits):
        batch.append(record)
        if len(batch) == per_batch:
            await topic.append_records(0, batch)
            batch = []
    if batch:
        await topic.append_records(0, batch)
    plog = logs.get_log(TOPIC, 0)
    plog.roll()
    await topic.append_records(0, list(_commits(1)))  # the active segment is never compacted
    return logs, plog


async def measure(commits: int) -> dict:
    from kbroker.broker.storage.log import compaction
    from kbroker.broker.storage.log.manager import LogManager

    tmp = Path(tempfile.mkdtemp(prefix="kbroker-stalls-"))
    try:
        data = tmp / "data"
        logs, plog = await _write(data, commits)
        logs.close()
        shutil.copytree(data, tmp / "inline")
        out: dict = {"commits": commits}

        # compaction: inline (what used to block the loop) and as the broker runs it now
        inline = LogManager(tmp / "inline", flush_policy="never")
        started = time.perf_counter()
        stats = compaction.compact(inline.get_log("__consumer_offsets", 0), int(time.time() * 1000))
        out["compaction_inline_ms"] = 1000 * (time.perf_counter() - started)
        out["records_after"] = stats.records_after
        inline.close()
        logs = LogManager(data, flush_policy="never")
        plog = logs.get_log("__consumer_offsets", 0)
        with LoopProbe() as probe:
            started = time.perf_counter()
            stats = await compaction.compact_async(plog, int(time.time() * 1000))
            out["compaction_ms"] = 1000 * (time.perf_counter() - started)
        assert stats.segments_rewritten == 1, stats
        out["compaction_stall_ms"] = probe.longest_ms
        out["compaction_stall_p99_ms"] = probe.percentile_ms(0.99)
        logs.close()

        # the machine's own noise: the same probe with nothing else running
        with LoopProbe() as probe:
            await asyncio.sleep(1.0)
        out["idle_stall_ms"] = probe.longest_ms
        # replay at start-up: an uncompacted log, all commits in one partition
        await _replay_only(tmp, commits, out)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _replay_only(tmp: Path, commits: int, out: dict) -> None:
    from kbroker.broker.storage.log.manager import LogManager
    from kbroker.broker.coordinators.offsets_topic import OffsetsTopic
    from kbroker.broker.partitions.service import PartitionService
    from kbroker.coordinator.groups.service import GroupCoordinatorService

    data = tmp / "replay"
    logs, _ = await _write(data, commits)
    logs.close()
    logs = LogManager(data, flush_policy="never")
    topic = OffsetsTopic(PartitionService.offline(logs), 1)
    topic.ensure()

    async def no_append(*_: object) -> None:
        raise AssertionError("replay must not write")

    coordinator = GroupCoordinatorService(no_append, num_partitions=1)
    await coordinator.start()
    coordinator.mark_loading([0])
    with LoopProbe() as probe:
        started = time.perf_counter()
        await topic.load_all(coordinator)
        out["replay_ms"] = 1000 * (time.perf_counter() - started)
    out["replay_stall_ms"] = probe.longest_ms
    out["replay_stall_p99_ms"] = probe.percentile_ms(0.99)
    assert not coordinator.is_loading
    await coordinator.stop()
    logs.close()


def report(commits: int) -> dict:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")
    from kbroker.broker.process import GIL_SWITCH_INTERVAL_S

    previous = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # as `kbroker serve` runs
    try:
        r = uvloop.run(measure(commits))
    finally:
        sys.setswitchinterval(previous)
    print(f"  compaction of one __consumer_offsets partition, {commits:,} commits -> {r['records_after']:,} kept:")
    print(f"    longest event-loop stall {r['compaction_stall_ms']:.1f} ms (p99 {r['compaction_stall_p99_ms']:.1f} ms)"
          f" over {r['compaction_ms']:.0f} ms of compaction in a worker thread;"
          f" inline it blocks the loop {r['compaction_inline_ms']:.0f} ms")
    print(f"  replay of one __consumer_offsets partition, {commits:,} commits:")
    print(f"    longest event-loop stall {r['replay_stall_ms']:.1f} ms (p99 {r['replay_stall_p99_ms']:.1f} ms)"
          f" over {r['replay_ms']:.0f} ms of replay")
    print(f"  (the same probe with nothing else running: longest {r['idle_stall_ms']:.1f} ms; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stalls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=200_000, help="commit records (default 200,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 commits")
    args = parser.parse_args(argv)
    report(20_000 if args.quick else args.commits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
