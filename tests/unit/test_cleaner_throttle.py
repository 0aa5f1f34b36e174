"""The log cleaner's I/O throttle (broker/storage/log/throttler.py, Kafka's Throttler for
log.cleaner.io.max.bytes.per.second) on a manual clock, and a cleaning held to it."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from kbroker.broker.storage.log import LogConfig
from kbroker.broker.storage.log.compaction import compact_async
from kbroker.broker.storage.log.throttler import Throttler
from kbroker.tests.unit.test_log_cleaner import COMPACT, add, filled

MS = 1_000_000


class Clock:
    def __init__(self, step_ms: int = 0) -> None:
        self.ns, self.step_ns, self.slept = 0, step_ms * MS, []

    def now(self) -> int:
        self.ns += self.step_ns
        return self.ns

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.ns += round(seconds * 1e9)


def test_above_the_rate_it_sleeps_what_the_bytes_should_have_taken() -> None:
    clock = Clock()
    throttler = Throttler(lambda: 1000.0, now_ns=clock.now, sleep_s=clock.sleep)
    throttler.observe(1000)  # within the first check interval: no check
    assert clock.slept == []
    clock.ns += 400 * MS
    throttler.observe(1000)  # 2,000 bytes in 0.4 s at 1,000 B/s: 2 s, so 1.6 s more
    assert clock.slept == [1.6] and throttler.slept_ms == 1600
    clock.ns += 2_000 * MS
    throttler.observe(1500)  # 1,500 bytes in 2 s: under the rate
    assert clock.slept == [1.6]


def test_unlimited_or_unset_never_sleeps() -> None:
    for rate in (math.inf, 0.0, -5.0):
        clock = Clock(step_ms=400)
        throttler = Throttler(lambda: rate, now_ns=clock.now, sleep_s=clock.sleep)
        for _ in range(10):
            throttler.observe(10_000_000)
        assert clock.slept == []


def test_a_cleaning_is_held_to_the_rate_and_says_so(tmp_path: Path) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 40)
    add(plog, 40, 100_000)  # garbage: keys k0 and k1 over and over
    clock = Clock(step_ms=400)
    throttler = Throttler(lambda: 1_000.0, now_ns=clock.now, sleep_s=clock.sleep)
    stats = asyncio.run(compact_async(plog, 200_000, throttler))
    assert stats.segments_rewritten > 0
    assert stats.throttled_ms == throttler.slept_ms > 0
    assert round(sum(clock.slept) * 1000) == stats.throttled_ms
