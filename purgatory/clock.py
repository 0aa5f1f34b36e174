"""Time sources.

Deadlines are measured on a monotonic clock (`now_ms`) so that a wall-clock jump never fires or
starves a timer; timestamps that end up in `__consumer_offsets` records (commit time, state change
time) come from the wall clock (`wall_ms`) because they are compared across broker restarts.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds on a monotonic clock; only differences are meaningful."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch, for timestamps stored in records."""
        ...


class SystemClock:
    __slots__ = ()

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to; tests drive timers with it.

    Monotonic and wall time move together, so `wall_ms() - now_ms()` stays `wall_offset_ms`.
    """

    __slots__ = ("_now_ms", "_wall_offset_ms")

    def __init__(self, start_ms: int = 0, wall_offset_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._wall_offset_ms = wall_offset_ms

    def now_ms(self) -> int:
        return self._now_ms

    def wall_ms(self) -> int:
        return self._now_ms + self._wall_offset_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a clock cannot go backwards")
        self._now_ms += ms
        return self._now_ms
