"""Answers written to clients that have not read them yet, counted across every connection.

A connection takes no further request while its transport's write buffer is over the high-water
mark (broker/connection.py), so one connection holds about one unread answer. Fetch answers are the
big ones: up to fetch.max.bytes (55 MiB), read from the log into memory, where Kafka sends them from
the page cache with sendfile and holds nothing. Twenty clients that each sent one Fetch and read
nothing held 983 MiB. So the bytes waiting in paused transports are summed broker-wide, and a Fetch
reads at most what is left of `FACTOR` x fetch.max.bytes; with nothing left it still gets its first
batch (Kafka's rule that a fetch makes progress), a megabyte rather than fifty-five.

A client reading its answers at any pace leaves its transport paused only while one answer drains,
so a single consumer is never held back; many large consumers at once share the allowance.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

log = structlog.get_logger("kbroker.fetch")

FACTOR = 4  # unread answers may hold this many fetch.max.bytes in all before Fetch answers shrink
LOG_EVERY_S = 10.0  # one `fetch_answers_shrunk` event at most this often: a slow reader can last


class UnsentAnswers:
    """The transports whose write buffers are over their high-water mark (the shell reports each
    pause and resume), and what a Fetch may still read while they hold their bytes."""

    def __init__(self, fetch_max_bytes: int, factor: int = FACTOR) -> None:
        self.limit = factor * fetch_max_bytes
        self._paused: set[Any] = set()
        self._logged_at = float("-inf")

    def paused(self, transport: Any) -> None:
        self._paused.add(transport)

    def resumed(self, transport: Any) -> None:
        self._paused.discard(transport)

    def held(self) -> int:
        """Bytes written but not yet taken by the peers of paused transports."""
        return sum(t.get_write_buffer_size() for t in self._paused if not t.is_closing())

    def fetch_bytes(self, wanted: int, **log_fields: Any) -> int:
        """What a Fetch wanting `wanted` bytes may read now."""
        if not self._paused:
            return wanted
        room = max(0, self.limit - self.held())
        if room >= wanted:
            return wanted
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning("fetch_answers_shrunk", wanted=wanted, allowed=room, unread_bytes=self.limit - room,
                        limit=self.limit, slow_connections=len(self._paused), **log_fields)
        return room
