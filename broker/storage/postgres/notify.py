"""Metadata changes pushed to the nodes (issue 44): every write that changes what a node's image holds
(a topic created, a leader elected, a broker registered or gone, a new controller) sends a NOTIFY on
CHANNEL in its transaction, which PostgreSQL delivers at COMMIT (and not at all on a rollback); each
node LISTENs on a connection of its own and reads the database at once when told (`MetadataListener`).

A notification is lost while a node is not listening (its connection dropped, the database
restarting), so the node still reads the database every `--cluster-poll-ms` as well, and reads it once
each time it starts listening again.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import structlog

log = structlog.get_logger("kbroker.storage.postgres")

CHANNEL = "kbroker_metadata"
RELISTEN_AFTER_S = 1.0


async def notify(conn: Any, what: str) -> None:
    """Tell the nodes the metadata changed (`what`, for their debug log): inside a transaction, at its COMMIT."""
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, what)


class MetadataListener:
    """LISTEN on CHANNEL on a connection of its own; `changed()` on each notification, and each time it
    starts listening (what was sent while it was not is unknown). Connects again after a loss."""

    def __init__(self, connect: Callable[[], Awaitable[Any]], changed: Callable[[], None]) -> None:
        self._connect = connect
        self._changed = changed
        self.conn: Any = None
        self.notifications = 0

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.notifications += 1
        log.debug("metadata_notified", what=payload)
        self._changed()

    async def run(self) -> None:
        while True:
            lost = asyncio.Event()
            try:
                self.conn = await self._connect()
                self.conn.add_termination_listener(lambda _conn: lost.set())
                await self.conn.add_listener(CHANNEL, self._on_notify)
                self._changed()
                await lost.wait()
                log.warning("metadata_listener_lost", detail="polling alone until it listens again")
            except asyncio.CancelledError:
                await self.close()
                raise
            except Exception as exc:  # noqa: BLE001 - the database away: the poll goes on, listen again later
                log.warning("metadata_listener_failed", error=repr(exc))
            await asyncio.sleep(RELISTEN_AFTER_S)

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not conn.is_closed():
            try:
                await asyncio.wait_for(conn.close(), 2)
            except Exception:  # noqa: BLE001 - closing a connection already broken
                conn.terminate()
