"""A small state file rewritten whole on every change (the ACLs, the client quotas), off the event loop.

Such a file is Kafka's metadata log in miniature: a change is answered only once a file holding it
is durable (write a temporary file, fsync, rename, fsync the directory). Rendering the state and the
fsyncs ran on the loop, so every change stalled every client: for an fsync, and for a large state
for seconds (200,000 quota entities: 4.5 s per change). Here the loop only captures the state (a
shallow copy of immutable entries); rendering and writing run on the `state-files` worker.

Changes asked for while a write is under way share the next write: it captures the state then, which
holds all of them, so a burst of N changes costs two writes, not N. A change is visible to other
requests from the moment it is applied in memory, a write's duration before it is durable, as a
change in Kafka's controller is visible to it before its record is committed; the client that made
it is answered only once it is durable.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from .log.files import held_for_rewrite, write_file_durably
from ..workers import STATE_FILES, run_in_worker

# Called on the loop: the state as it is now, as a function the worker renders to the file's bytes.
Capture = Callable[[], Callable[[], bytes]]


class StateFile:
    """With `written`, another process may rewrite the file too (the SCRAM credentials, by `kbroker
    user add`): each write then renders and writes under `held_for_rewrite`, and `written` is called
    on the loop after it, with the file's stat taken under the lock, or None if the write failed."""

    def __init__(self, path: Path, capture: Capture, mode: int = 0o644, *,
                 written: Callable[[os.stat_result | None], None] | None = None) -> None:
        self.path = path
        self.mode = mode
        self._capture = capture
        self._written = written
        self._asked = 0  # changes asked to be saved so far
        self._saved = 0  # of those, how many a durable write holds
        self._writer: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    async def save(self) -> None:
        """Returns once a write holding every change applied before this call is durable; raises
        what the write raised (the change stays applied in memory, as before this module)."""
        self._asked += 1
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_all())
        await self.caught_up()

    async def caught_up(self) -> None:
        """Returns once every change asked to be saved so far is durable: a request that changes
        nothing (its ACL is there already, added by a request whose write is under way) is answered
        no sooner than the change it saw, as Kafka's controller answers an operation that writes no
        record once the records before it are committed."""
        if self._saved >= self._asked:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self._asked, done))
        await done

    async def _write_all(self) -> None:
        while self._saved < self._asked:
            upto = self._asked
            failure: Exception | None = None
            stat: os.stat_result | None = None
            try:
                stat = await run_in_worker(STATE_FILES, _render_and_write, self.path, self._capture(), self.mode,
                                           self._written is not None)
            except Exception as exc:  # noqa: BLE001 - every change it was to hold learns it
                failure = exc
            if self._written is not None:
                try:
                    self._written(stat)
                except Exception as exc:  # noqa: BLE001 - a fault of ours must not leave the waiters hanging
                    failure = failure or exc
            self._saved = upto
            self._settle(upto, failure)

    def _settle(self, upto: int, exc: Exception | None) -> None:
        waiting = []
        for asked, done in self._waiters:
            if asked > upto:
                waiting.append((asked, done))
            elif not done.done():
                if exc is None:
                    done.set_result(None)
                else:
                    done.set_exception(exc)
        self._waiters = waiting


def json_rows(rows: Iterable[Any]) -> str:
    """A JSON array of `rows`, one dumps() call per row: a C call holds the GIL throughout, and the
    loop may take it back only between calls (200,000 quota entities in one call held it ~200 ms)."""
    return "[\n" + ",\n".join(map(json.dumps, rows)) + "\n]"


def _render_and_write(path: Path, render: Callable[[], bytes], mode: int, shared: bool) -> os.stat_result | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not shared:
        write_file_durably(path, render(), mode)
        return None
    with held_for_rewrite(path):  # render may read the file: another process's change is kept
        write_file_durably(path, render(), mode)
        return os.stat(path)
