"""The log cleaner's I/O throttle (Kafka's Throttler, `log.cleaner.io.max.bytes.per.second`): the
cleaning reports the bytes it reads and writes; once per check interval (300 ms, as Kafka's) the
rate since the last check is measured, and when it is above the limit the cleaning thread sleeps as
long as the bytes should have taken at that rate. It runs in the compaction's worker thread, never
on the event loop. The limit is read at each check (a dynamic broker config)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

CHECK_INTERVAL_NS = 300_000_000


class Throttler:
    def __init__(self, max_bytes_per_s: Callable[[], float], *, now_ns: Callable[[], int] = time.monotonic_ns,
                 sleep_s: Callable[[float], None] = time.sleep) -> None:
        self._rate = max_bytes_per_s
        self._now_ns = now_ns
        self._sleep_s = sleep_s
        self._period_start_ns = now_ns()
        self._observed = 0
        self.slept_ms = 0  # in all, for the cleaning's log line

    def observe(self, nbytes: int) -> None:
        """`nbytes` read or written; sleeps when the rate since the last check is above the limit."""
        self._observed += nbytes
        now = self._now_ns()
        elapsed_ns = now - self._period_start_ns
        if elapsed_ns <= CHECK_INTERVAL_NS or self._observed <= 0:
            return
        rate = self._rate()
        if 0 < rate and math.isfinite(rate) and self._observed * 1e9 / elapsed_ns > rate:
            sleep_ms = round(self._observed / (rate / 1000) - elapsed_ns / 1e6)
            if sleep_ms > 0:
                self._sleep_s(sleep_ms / 1000)
                self.slept_ms += sleep_ms
                now = self._now_ns()
        self._period_start_ns = now
        self._observed = 0
