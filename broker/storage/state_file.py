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

Since issue 38 such a file holds one entry per line, each with a checksum of its own (`render_rows`,
`read_rows`): damage costs the entries it touches, which the owner refuses to use and reports, never
the whole file, and never the start. A file written before checksums loads as it always did.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from . import checksummed
from ...protocol.crc import crc32c
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


def _render_and_write(path: Path, render: Callable[[], bytes], mode: int, shared: bool) -> os.stat_result | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not shared:
        write_file_durably(path, render(), mode)
        return None
    with held_for_rewrite(path):  # render may read the file: another process's change is kept
        write_file_durably(path, render(), mode)
        return os.stat(path)


# --- checksummed entries --------------------------------------------------------------------------------
# Version 2 of a state file is still one JSON object (tools that read it as JSON still can), laid out
# one entry per line, each entry with the CRC32C of its own content (broker/storage/checksummed.py):
#
#     {"version": 2, "entries": 2, "acls": [
#     {"acl":[...],"crc32c":"5d1e0f3a"},
#     {"acl":[...],"crc32c":"0b77c2e1"}
#     ]}
#
# so a damaged entry is found and refused alone, a line that no longer parses costs only itself, and
# the header's count says when entries are missing (a file cut short, a line lost).

VERSION = 2


def render_rows(key: str, rows: Iterable[dict[str, Any]]) -> bytes:
    """A version-2 state file of `rows` (each a JSON object without a `crc32c` field) under `key`. Each
    row is its own dumps() calls: a C call holds the GIL throughout, and the loop may take it back only
    between calls (200,000 quota entities in one call held it ~200 ms)."""
    lines = [checksummed.dumps(row).decode() for row in rows]
    header = json.dumps({"version": VERSION, "entries": len(lines)})[:-1] + f", {json.dumps(key)}: ["
    return (header + "\n" + ",\n".join(lines) + ("\n" if lines else "") + "]}\n").encode()


@dataclass(slots=True)
class Damaged:
    """One damaged place of a state file: its line (1-based; 0: the file as a whole), what is wrong,
    and what the entry says as far as it still parses (untrusted: for the report only)."""

    line: int
    reason: str
    body: dict[str, Any] | None = None


@dataclass(slots=True)
class RowsRead:
    rows: list[dict[str, Any]] = field(default_factory=list)  # the entries that verify (or, legacy, parse)
    damage: list[Damaged] = field(default_factory=list)
    legacy: bool = False  # written before checksums: read as it always was, trusted as it reads

    def reasons(self) -> list[str]:
        return [f"line {d.line}: {d.reason}" if d.line else d.reason for d in self.damage]


def read_rows(raw: bytes, key: str, legacy: Callable[[Any], list[dict[str, Any]]]) -> RowsRead:
    """The entries of a state file. A version-2 file is read line by line, each entry checked; any
    other is a file from before checksums, parsed whole and turned into entries by `legacy`, or, if it
    no longer parses, one damage and no entries (nothing in it can be told good from bad)."""
    text = raw.decode("utf-8", "replace")
    lines = text.split("\n")
    header = _header(lines[0], key)
    out = RowsRead()
    is_v2 = header is not None and header.get("version") == VERSION
    if not is_v2 and f'"{checksummed.FIELD}":"' not in text:  # no entry with a checksum: from before them
        return _legacy(text, legacy)
    if not is_v2:
        out.damage.append(Damaged(1, "the header is damaged: how many entries the file held is unknown"))
        header = None
    ended = False
    for number, line in enumerate(lines[1:], start=2):
        if not line:  # taken as written: a byte turned into white space is damage too
            continue
        if line == "]}":
            ended = True
            continue
        try:
            loaded = checksummed.loads(line.removesuffix(","))
        except checksummed.ChecksumMismatch as exc:
            out.damage.append(Damaged(number, str(exc), exc.body))
            continue
        except ValueError as exc:
            out.damage.append(Damaged(number, f"the entry does not parse ({exc})"))
            continue
        if loaded.legacy:
            out.damage.append(Damaged(number, "the entry has no checksum", loaded.body))
            continue
        out.rows.append(loaded.body)
    if not ended:
        out.damage.append(Damaged(0, "the file ends early: entries after its last line may be lost"))
    expected = header.get("entries") if header is not None else None
    found = len(out.rows) + sum(1 for d in out.damage if d.line > 1)
    if isinstance(expected, int) and found < expected:
        out.damage.append(Damaged(0, f"the header counts {expected} entries and {found} are there"))
    return out


def _header(line: str, key: str) -> dict[str, Any] | None:
    suffix = f", {json.dumps(key)}: ["
    if not line.endswith(suffix):
        return None
    try:
        header = json.loads(line[:-len(suffix)] + "}")
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def _legacy(text: str, legacy: Callable[[Any], list[dict[str, Any]]]) -> RowsRead:
    try:
        return RowsRead(rows=legacy(json.loads(text)), legacy=True)
    except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes the parse raise
        return RowsRead(damage=[Damaged(1, f"the file (written before checksums) does not parse: {exc!r}")],
                        legacy=True)


# --- sealed text files ----------------------------------------------------------------------------------
# A line-oriented text file that people write too (the PLAIN users file, meta.properties) keeps its
# format: the checksum is a comment line of its own, last, over every line above it, so readers that
# skip `#` lines read it as before, and a file without it (written by hand, or before checksums) is
# read as it is.

_SEAL = re.compile(r"^# kbroker crc32c=([0-9a-f]{8})\b.*$", re.MULTILINE)


def seal_text(body: str, note: str) -> bytes:
    """`body` (whole lines) followed by its checksum line, which says `note` after the checksum."""
    return (body + f"# kbroker crc32c={crc32c(body.encode()):08x} {note}\n").encode()


def is_sealed(text: str) -> bool:
    """Whether the file has a checksum line (whether it matches is unseal_text's to say)."""
    return _SEAL.search(text) is not None


def unseal_text(text: str) -> tuple[str, str | None]:
    """The file's lines without its checksum line, and why they cannot be trusted (None: they can, or
    the file has no checksum line)."""
    seal = _SEAL.search(text)
    if seal is None:
        return text, None
    body, rest = text[:seal.start()], text[seal.end():]
    if rest.strip():
        return body + rest, "lines follow its checksum line"
    computed = f"{crc32c(body.encode()):08x}"
    if computed != seal.group(1):
        return body, f"checksum mismatch: the file says {seal.group(1)}, its lines give {computed}"
    return body, None

