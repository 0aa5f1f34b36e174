"""Fetch answers read for clients that have not taken them yet, counted across every connection.

Fetch answers are read from the log into memory (Kafka sends them from the page cache with sendfile
and holds nothing), up to fetch.max.bytes (55 MiB) each, and a client that stops reading leaves its
answer in the broker. Twenty clients that each sent a Fetch and read nothing held 983 MiB. So each
answer's bytes are counted from the moment they are read until the client's connection has taken
them (its transport was not left over its high-water mark by the write, or drains below it later,
or closes), and a Fetch reads at most what is left of `FACTOR` x fetch.max.bytes; with nothing left
it still gets its first batch (Kafka's rule that a fetch makes progress), a megabyte, not fifty-five.

The count is the shell's (broker/network/server.py reports each connection's writes, drains and closes); a
connection that answers nothing further before its Fetch answer leaves releases it a turn early,
and what the socket's own buffers took passes uncounted (on TLS, at most a write piece past the
socket transport's high-water mark and one piece in the encryption layer: broker/network/server.py
`_write_tls`): a soft bound, within about a megabyte per connection beside the kernel's buffers.
The allowance is first come, first served: many clients pulling large answers over slow links at
once share it, and each then gets less per Fetch.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

log = structlog.get_logger("kbroker.fetch")

FACTOR = 4  # unread answers may hold this many fetch.max.bytes in all before Fetch answers shrink
LOG_EVERY_S = 10.0  # one `fetch_answers_shrunk` event at most this often: a slow reader can last


class UnreadAnswers:
    """Bytes read for Fetch answers per connection (its peer address) and not yet taken by it."""

    def __init__(self, fetch_max_bytes: int, factor: int = FACTOR) -> None:
        self.limit = factor * fetch_max_bytes
        self.held = 0
        self._by_peer: dict[str, int] = {}
        self._logged_at = float("-inf")

    def fetch_bytes(self, wanted: int) -> int:
        """What a Fetch wanting `wanted` bytes may read now."""
        if self.held + wanted <= self.limit:
            return wanted
        return max(0, self.limit - self.held)

    def read(self, peer: str, n: int) -> None:
        """`n` bytes read for an answer to `peer`."""
        if n > 0:
            self._by_peer[peer] = self._by_peer.get(peer, 0) + n
            self.held += n

    def holds(self, peer: str) -> bool:
        return peer in self._by_peer

    def taken(self, peer: str) -> None:
        """`peer`'s connection has taken what was written to it, or is gone."""
        self.held -= self._by_peer.pop(peer, 0)

    def shrunk(self, wanted: int, allowed: int, **log_fields: Any) -> None:
        """A Fetch read `allowed` bytes where it wanted `wanted`: logged at most every LOG_EVERY_S."""
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning("fetch_answers_shrunk", wanted=wanted, allowed=allowed, unread_bytes=self.held,
                        limit=self.limit, connections_holding=len(self._by_peer), **log_fields)
