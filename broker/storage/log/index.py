"""Sparse per-segment indexes in Kafka's on-disk formats.

* `.index` (OffsetIndex): int32 offset relative to the segment base + int32 file position, one entry
  about every index.interval.bytes. As in Kafka, the offset is the *last* offset of the batch that
  starts at the position, so a lookup may land one batch early; readers scan forward from there.
* `.timeindex` (TimeIndex): int64 timestamp + int32 relative offset, appended only when the segment's
  max timestamp grows, so timestamps are non-decreasing. The offset is the batch holding that max.

Unlike Kafka we do not mmap preallocated files: entries are appended to a plain file and mirrored in
two `array`s that `bisect` searches. Index files are never trusted blindly: `load` sanity-checks them
and returns None when they must be rebuilt from the log.
"""

from __future__ import annotations

import os
import struct
import itertools
import threading
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Callable

from .files import FILES

# New entries are written to the file in runs of this many bytes (or at sync, roll, truncation and
# close) rather than one pwrite each: two syscalls per appended batch were 13% of an append's CPU
# with 16 KiB batches. Entries not yet written are never needed from the file while the broker runs
# (lookups use the arrays), and the active segment's indexes are rebuilt after an unclean stop.
_WRITE_RUN = 4096


# What an idle index holds: shared read-only empties instead of per-index arrays and buffers (an
# idle partition's two indexes were ~600 B of empty arrays, bytearrays and locks), and a lock picked
# from a small shared set: write_pending holds it for one pwrite, and never takes another index's.
_NO_PENDING = b""
_WRITE_LOCKS = tuple(threading.Lock() for _ in range(32))
_next_lock = itertools.cycle(_WRITE_LOCKS).__next__


class _SparseIndex:
    """A file of fixed-size (key, value) entries with keys non-decreasing, mirrored in memory."""

    __slots__ = ("_file", "keys", "values", "closed", "_pending", "_on_file", "_write_lock", "base_offset",
                 "__dict__")  # a dict only once a test patches a method

    ENTRY: struct.Struct
    KEY_TYPECODE: str
    VALUE_TYPECODE = "i"
    # Never appended to: `keys`/`values` are replaced by their own arrays at the first entry.
    _NO_KEYS: array[int]
    _NO_VALUES: array[int] = array("i")

    def __init__(self, path: Path | str) -> None:
        self._file = path if isinstance(path, str) else str(path)  # a str: the FILES cache's key
        self.keys = self._NO_KEYS
        self.values = self._NO_VALUES
        self.closed = False
        self._pending: bytes | bytearray = _NO_PENDING  # entries appended but not yet written (see _WRITE_RUN)
        self._on_file = 0  # entries the file holds
        self._write_lock = _next_lock()  # sync() of an inactive segment runs in a worker thread
        FILES.create(self._file)  # the file exists from now on; a lease opens it when needed

    @property
    def path(self) -> Path:
        return Path(self._file)

    @path.setter
    def path(self, path: Path) -> None:
        self._file = str(path)

    def __len__(self) -> int:
        return len(self.keys)

    def _own_arrays(self) -> None:
        if self.keys is self._NO_KEYS:
            self.keys = array(self.KEY_TYPECODE)
            self.values = array(self.VALUE_TYPECODE)

    def _append(self, key: int, value: int) -> None:
        # To the page cache in runs, no fsync: the active segment's indexes are rebuilt on unclean
        # recovery, and a lost tail of entries in a sparse index only makes lookups scan further.
        if self.keys is self._NO_KEYS:
            self._own_arrays()
        pending = self._pending
        if pending:
            pending += self.ENTRY.pack(key, value)  # a bytearray: extended in place
        else:
            self._pending = pending = bytearray(self.ENTRY.pack(key, value))
        self.keys.append(key)
        self.values.append(value)
        if len(pending) >= _WRITE_RUN:
            self.write_pending()

    def write_pending(self) -> None:
        """Write the entries appended since the last write (one pwrite)."""
        with self._write_lock:
            pending = self._pending
            if not pending or self.closed:
                return
            with FILES.lease(self._file) as fd:
                os.pwrite(fd, pending, self._on_file * self.ENTRY.size)
            self._on_file += len(pending) // self.ENTRY.size
            self._pending = _NO_PENDING

    def sync(self, fsync: Callable[[int], None] = os.fsync) -> None:
        if not self.closed:
            self.write_pending()
            with FILES.lease(self._file) as fd:
                fsync(fd)

    def truncate_entries(self, count: int) -> None:
        """Keep only the first `count` entries."""
        self.write_pending()
        del self.keys[count:]
        del self.values[count:]
        with FILES.lease(self._file) as fd:
            os.ftruncate(fd, count * self.ENTRY.size)
        self._on_file = min(self._on_file, count)

    def reset(self) -> None:
        self.truncate_entries(0)

    def close(self, *, write: bool = True) -> None:
        """`write=False`: drop entries not yet written (the files are about to go, or the log is
        offline after a storage error and must not be written to)."""
        if not self.closed:
            if write:
                self.write_pending()
            self.closed = True
            self._pending = _NO_PENDING
            FILES.forget(self._file)

    def _load_entries(self) -> bool:
        """Read the file into memory; False when its size is not a whole number of entries."""
        with FILES.lease(self._file) as fd:
            size = os.fstat(fd).st_size
            if size % self.ENTRY.size:
                return False
            data = os.pread(fd, size, 0)
        self._own_arrays()
        for key, value in self.ENTRY.iter_unpack(data):
            self.keys.append(key)
            self.values.append(value)
        self._on_file = len(self.keys)
        return True


class OffsetIndex(_SparseIndex):
    __slots__ = ()
    ENTRY = struct.Struct(">ii")
    KEY_TYPECODE = "i"
    _NO_KEYS = array("i")

    def __init__(self, path: Path | str, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset

    def append(self, offset: int, position: int) -> None:
        self._append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch whose last offset is <= `offset`, else 0.

        That batch ends at or before `offset`, so a forward scan from it reaches the batch holding `offset`.
        """
        i = bisect_right(self.keys, offset - self.base_offset) - 1
        return self.values[i] if i >= 0 else 0

    def last_position(self) -> int:
        return self.values[-1] if self.values else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries that point at or past `position` (the log was cut there)."""
        self.truncate_entries(bisect_left(self.values, position))

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex | None:
        """Open an existing index; None when missing or inconsistent with the log (then rebuild)."""
        if not path.exists():
            return None
        index = cls(path, base_offset)
        ok = index._load_entries()
        if ok:
            keys, values = index.keys, index.values
            for i in range(len(keys)):
                if keys[i] < 0 or values[i] < 0 or values[i] >= log_size:
                    ok = False
                    break
                if i and (keys[i] <= keys[i - 1] or values[i] <= values[i - 1]):
                    ok = False
                    break
        if not ok:
            index.close()
            return None
        return index


class TimeIndex(_SparseIndex):
    __slots__ = ()
    ENTRY = struct.Struct(">qi")
    KEY_TYPECODE = "q"
    _NO_KEYS = array("q")

    def __init__(self, path: Path | str, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self.keys and timestamp <= self.keys[-1]:
            return
        self._append(timestamp, offset - self.base_offset)

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the last entry with a timestamp strictly below `timestamp`, else the segment base.

        Every record up to that offset has a smaller timestamp, so a search for the first record at or
        after `timestamp` can safely start at that offset's batch.
        """
        i = bisect_left(self.keys, timestamp) - 1
        return self.base_offset + self.values[i] if i >= 0 else self.base_offset

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the newest entry."""
        if not self.keys:
            return None
        return self.keys[-1], self.base_offset + self.values[-1]

    def truncate_to_offset(self, next_offset: int) -> None:
        """Drop entries that point at offsets >= next_offset."""
        rel = next_offset - self.base_offset
        keep = len(self.values)
        while keep and self.values[keep - 1] >= rel:
            keep -= 1
        self.truncate_entries(keep)

    @classmethod
    def load(cls, path: Path, base_offset: int, next_offset: int) -> TimeIndex | None:
        if not path.exists():
            return None
        index = cls(path, base_offset)
        ok = index._load_entries()
        if ok:
            keys, values = index.keys, index.values
            limit = next_offset - base_offset
            for i in range(len(keys)):
                if values[i] < 0 or values[i] >= limit:
                    ok = False
                    break
                if i and (keys[i] <= keys[i - 1] or values[i] < values[i - 1]):
                    ok = False
                    break
        if not ok:
            index.close()
            return None
        return index

