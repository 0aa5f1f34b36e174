"""The coordinator alone: CPU time per Heartbeat and per OffsetCommit through GroupCoordinatorService.

    python -m kbroker.bench.coordinator_calls [--requests N]

No sockets, no codec: a one-member Stable group, then N Heartbeats awaited one after the other as
the broker's handler awaits them, then N OffsetCommits (pipelined path: an append_nowait whose
fsync is already done). Figures are CPU time of this process (time.process_time), best of three,
so a shared, loaded machine changes them less than wall time would. To compare two trees, run it
from each (PYTHONPATH pointing at a directory holding the other tree as `kbroker`).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.service import GroupCoordinatorService
from kbroker.coordinator.config import GroupConfig
from kbroker.protocol.records.classic_records import Record
from kbroker.protocol.errors import ErrorCode
from kbroker.purgatory.clock import SystemClock
from kbroker.purgatory.timers import KeyedTimers
from kbroker.tests.coordinator_harness import join_request


async def measure(n: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()

    async def append(partition: int, records: list[Record]) -> None:
        return None

    def append_nowait(partition: int, records: list[Record]) -> asyncio.Future[None]:
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done

    timers = KeyedTimers(SystemClock())
    service = GroupCoordinatorService(append, append_records_nowait=append_nowait, timers=timers,
                                      config=GroupConfig(group_initial_rebalance_delay_ms=0))
    await service.start()
    await service.load(service.partition_for("g"), [])
    driver = loop.create_task(timers.run())
    first = await service.join_group(join_request("g", client_id="c"))
    joined = await service.join_group(join_request("g", first.member_id, client_id="c"))
    member, generation = joined.member_id, joined.generation_id
    synced = await service.sync_group(c.SyncGroup("g", generation, member, assignments=((member, b"a"),)))
    assert synced.error is ErrorCode.NONE, synced

    def commit(i: int) -> c.OffsetCommit:
        return c.OffsetCommit("g", generation, member, (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, i),)),))

    async def heartbeats() -> None:
        for _ in range(n):
            result = await service.heartbeat(c.Heartbeat("g", generation, member))
        assert result.error is ErrorCode.NONE, result

    async def commits() -> None:
        for i in range(n):
            result = await service.submit(commit(i))
        assert result.topics[0].partitions[0].error is ErrorCode.NONE, result

    runs: dict[str, Callable[[], Any]] = {"Heartbeat": heartbeats, "OffsetCommit": commits}
    figures: dict[str, float] = {}
    for name, run in runs.items():
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            await run()
            best = min(best, time.process_time() - started)
        figures[name] = best / n
    driver.cancel()
    await service.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    for name, seconds in asyncio.run(measure(args.requests)).items():
        print(f"{name:14} {seconds * 1e6:7.2f} us CPU per request   ({1 / seconds:,.0f} requests per CPU second)")


if __name__ == "__main__":
    main()
