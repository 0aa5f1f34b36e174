"""The log cleaner's checkpoint: where each compacted log's dirty part starts (its first dirty offset,
`PartitionLog.cleaned_to`), kept across restarts in Kafka's `cleaner-offset-checkpoint` file in the
log directory, in Kafka's format (OffsetCheckpointFile, version 0):

    0
    <number of entries>
    <topic> <partition> <offset>
    ...

Read once at start (the cleaner's first use), so a restart does not count every compacted log as all
dirty and clean it again; rewritten whole (write, fsync, rename) after each cleaning and when a topic
is deleted. A damaged file (a version other than 0, a count that does not match, a line that is not
`topic partition offset`) is reported in one structured error line and treated as absent, as Kafka's
LogCleanerManager does: each compacted log is then cleaned once from its start, which loses nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from .files import write_file_durably

log = structlog.get_logger(__name__)

FILE = "cleaner-offset-checkpoint"
VERSION = 0

Offsets = dict[tuple[str, int], int]


class CheckpointDamaged(ValueError):
    pass


def parse(text: str) -> Offsets:
    """The entries of a checkpoint file's text; CheckpointDamaged says what is wrong, as Kafka's
    CheckpointFile reader does (version, then count, then the entries, then nothing more)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return {}  # Kafka creates the file empty at start and reads it so: no entries
    if lines[0].strip() != str(VERSION):
        raise CheckpointDamaged(f"unrecognised version {lines[0][:40]!r}")
    if len(lines) < 2 or not lines[1].strip().isdigit():
        raise CheckpointDamaged("malformed or missing count line")
    expected = int(lines[1].strip())
    entries: Offsets = {}
    for number, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointDamaged(f"malformed line {number}: {line[:80]!r}")
        topic, partition, offset = parts
        try:
            entries[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CheckpointDamaged(f"malformed line {number}: {line[:80]!r}") from None
    if len(lines) - 2 != expected:
        raise CheckpointDamaged(f"expected {expected} entries but found {len(lines) - 2}")
    return entries


def render(offsets: Offsets) -> bytes:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


class CleanerCheckpoint:
    """The checkpoint file of one log directory."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / FILE
        self._lock = threading.Lock()  # writes come from the loop and from worker threads
        self._generation = 0  # of the last snapshot taken; an older one is never written over a newer
        self._written = 0

    def read(self) -> Offsets:
        """The file's entries; none when it is absent, or damaged (reported)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            log.error("cleaner_checkpoint_damaged", path=str(self.path), error=repr(exc),
                      action="read as absent: each compacted log is cleaned once from its start")
            return {}
        try:
            offsets = parse(text)
        except CheckpointDamaged as exc:
            log.error("cleaner_checkpoint_damaged", path=str(self.path), error=str(exc),
                      action="read as absent: each compacted log is cleaned once from its start")
            return {}
        log.info("cleaner_checkpoint_read", path=str(self.path), entries=len(offsets))
        return offsets

    def snapshot(self, offsets: Offsets) -> tuple[int, bytes]:
        """The file's new content, taken on the loop; write() it there or in a thread."""
        self._generation += 1
        return self._generation, render(offsets)

    def write(self, snapshot: tuple[int, bytes]) -> None:
        generation, content = snapshot
        with self._lock:
            if generation < self._written:
                return  # a newer snapshot is on disk already
            write_file_durably(self.path, content)
            self._written = generation
