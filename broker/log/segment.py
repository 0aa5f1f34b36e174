"""One log segment: `<base>.log` holding whole record batches, plus its offset and time indexes."""

from __future__ import annotations

import os
import struct
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import structlog

from kbroker.protocol.record_batch import (
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    compute_crc,
    decode_batch,
)

from .index import OffsetIndex, TimeIndex

log = structlog.get_logger(__name__)

_I32 = struct.Struct(">i")
_READ_CHUNK = 256 * 1024  # how much a header scan reads per syscall
_RELATIVE_OFFSET_LIMIT = 2**31 - 1  # index entries hold offsets relative to the base as int32


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    reason: str | None


class LogSegment:
    """Appends are synchronous (page cache); `sync` is safe to call from a worker thread."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = directory / segment_file_name(base_offset, ".log")
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the batch holding max_timestamp
        self.first_batch_timestamp = -1  # drives time-based rolls, like Kafka's rollingBasedTimestamp
        self.created_ms = int(time.time() * 1000)
        self.offset_index = OffsetIndex(directory / segment_file_name(base_offset, ".index"), base_offset)
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, ".timeindex"), base_offset)
        self._bytes_since_index = 0
        self.synced_size = self.size  # bytes known to be on disk; the flusher raises it
        self.indexes_synced = False  # set once an inactive segment's indexes have been fsynced
        self.closed = False

    # --- opening --------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval_bytes: int, *, recover: bool) -> tuple[
        LogSegment, RecoveryResult | None
    ]:
        """Open an existing (or new) segment.

        `recover=True` scans every batch, checks CRCs, truncates a torn or corrupt tail and rebuilds both
        indexes. Otherwise the indexes are sanity-checked (rebuilt when missing or inconsistent) and only
        the batches after the last index entry are read to find the segment's end.
        """
        index_path = directory / segment_file_name(base_offset, ".index")
        time_path = directory / segment_file_name(base_offset, ".timeindex")
        if recover:
            segment = cls(directory, base_offset, index_interval_bytes)
            return segment, segment.recover()
        log_path = directory / segment_file_name(base_offset, ".log")
        size = log_path.stat().st_size if log_path.exists() else 0
        offset_index = OffsetIndex.load(index_path, base_offset, size)
        segment = cls(directory, base_offset, index_interval_bytes)
        if offset_index is None:
            log.info("index_rebuilt", file=str(index_path), reason="missing_or_invalid")
            segment.rebuild_indexes()
            return segment, None
        segment.offset_index.close()
        segment.offset_index = offset_index
        if not segment._scan_tail():
            log.warning("segment_tail_inconsistent", file=str(segment.log_path))
            return segment, segment.recover()
        time_index = TimeIndex.load(time_path, base_offset, segment.next_offset)
        if time_index is None:
            log.info("index_rebuilt", file=str(time_path), reason="missing_or_invalid")
            segment.rebuild_indexes()
            return segment, None
        segment.time_index.close()
        segment.time_index = time_index
        last = time_index.last_entry()
        if last is not None and last[0] > segment.max_timestamp:
            segment.max_timestamp, segment.offset_of_max_timestamp = last
        segment._load_first_batch_timestamp()
        return segment, None

    def _load_first_batch_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = BatchHeader(*HEADER_STRUCT.unpack_from(os.pread(self._fd, HEADER_SIZE, 0))).max_timestamp

    def _scan_tail(self) -> bool:
        """Walk the batches after the last index entry to learn next_offset and their max timestamp.

        False when the tail does not parse (a torn write in a segment believed clean).
        """
        start = self.offset_index.last_position()
        end = start
        for pos, header in self.iter_headers(start):
            self._observe(header)
            end = pos + header.size
        if end != self.size and not (self.size == 0 and end == 0):
            return False
        self._bytes_since_index = end - start
        return True

    # --- appending ------------------------------------------------------------------------------------

    def _observe(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size

    def can_hold_offset(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= _RELATIVE_OFFSET_LIMIT

    def append(self, data: bytes | bytearray, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write already-validated batches (positions relative to `data`) at the end of the file."""
        start = self.size
        view = memoryview(data)
        written = 0
        while written < len(data):  # pwrite to a regular file is normally complete; loop to be sure
            written += os.pwrite(self._fd, view[written:], start + written)
        if start == 0:
            self.first_batch_timestamp = batches[0][1].max_timestamp
        for rel, header in batches:
            self._observe(header)
            self._index_batch(start + rel, header)
        self.size = start + len(data)

    def mark_inactive(self) -> None:
        """On roll: make the time index's last entry the segment's max, as Kafka does, so a later load
        (and retention) learns the largest timestamp without reading the log."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # --- reading --------------------------------------------------------------------------------------

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def iter_headers(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the whole batches from `start`; reads in chunks, never trusts a length past EOF."""
        pos = start
        chunk = b""
        chunk_start = pos
        end = self.size
        while end - pos >= HEADER_SIZE:
            rel = pos - chunk_start
            if rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(self._fd, _READ_CHUNK, pos)
                chunk_start = pos
                rel = 0
                if len(chunk) < HEADER_SIZE:
                    return
            header = BatchHeader(*HEADER_STRUCT.unpack_from(chunk, rel))
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
                return
            yield pos, header
            pos += header.size

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset` (the one holding it, or the next one)."""
        for pos, header in self.iter_headers(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, min_one_batch: bool) -> bytes:
        """Whole batches starting with the one holding `offset`, up to max_bytes (or one whole batch)."""
        found = self.find_batch(offset)
        if found is None:
            return b""
        start, first = found
        if first.size > max_bytes:
            return self.read_at(start, first.size) if min_one_batch else b""
        limit = min(start + max_bytes, self.size)
        data = self.read_at(start, limit - start)
        # Jump to the last indexed batch start inside the window, then walk lengths to the last whole batch.
        boundary = start + first.size
        positions = self.offset_index.values
        i = bisect_right(positions, limit) - 1
        if i >= 0 and positions[i] > boundary:
            boundary = positions[i]
        while limit - boundary >= LOG_OVERHEAD:
            size = _I32.unpack_from(data, boundary - start + 8)[0] + LOG_OVERHEAD
            if boundary + size > limit:
                break
            boundary += size
        return data[: boundary - start]

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp` with offset >= start_offset."""
        if self.max_timestamp < timestamp:
            return None
        from_offset = max(self.time_index.lookup_before(timestamp), start_offset)
        for pos, header in self.iter_headers(self.offset_index.lookup(from_offset)):
            if header.last_offset < start_offset or header.max_timestamp < timestamp:
                continue
            _, records = decode_batch(self.read_at(pos, header.size))
            for record in records:
                if record.offset >= start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def record_with_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the segment's max timestamp."""
        if self.max_timestamp < 0:
            return None
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is None:
            return None
        pos, header = found
        _, records = decode_batch(self.read_at(pos, header.size))
        for record in records:
            if record.timestamp == self.max_timestamp:
                return record.offset, record.timestamp
        return header.last_offset, self.max_timestamp

    def last_modified_ms(self) -> int:
        return int(os.fstat(self._fd).st_mtime * 1000)

    # --- recovery and truncation ----------------------------------------------------------------------

    def _reset_state(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1
        self._bytes_since_index = 0

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from the batch headers (the log itself is trusted)."""
        self._reset_state()
        for pos, header in self.iter_headers(0):
            if pos == 0:
                self.first_batch_timestamp = header.max_timestamp
            self._observe(header)
            self._index_batch(pos, header)

    def recover(self) -> RecoveryResult:
        """Validate every batch (length, magic, CRC, offsets moving forward) and cut the file at the first
        bad one; indexes are rebuilt on the way."""
        self._reset_state()
        file_size = os.fstat(self._fd).st_size
        pos = 0
        reason: str | None = None
        chunk = b""
        chunk_start = 0
        while pos < file_size:
            if file_size - pos < HEADER_SIZE:
                reason = "torn_header"
                break
            rel = pos - chunk_start
            if rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(self._fd, _READ_CHUNK, pos)
                chunk_start, rel = pos, 0
            header = BatchHeader(*HEADER_STRUCT.unpack_from(chunk, rel))
            if header.batch_length < MIN_BATCH_LENGTH or header.magic != 2:
                reason = "bad_header"
                break
            if pos + header.size > file_size:
                reason = "torn_batch"
                break
            if rel + header.size > len(chunk):
                chunk = os.pread(self._fd, max(_READ_CHUNK, header.size), pos)
                chunk_start, rel = pos, 0
            if compute_crc(chunk, rel, header.size) != header.crc:
                reason = "bad_crc"
                break
            if header.base_offset < self.next_offset or header.last_offset_delta < 0:
                reason = "offset_regression"
                break
            if pos == 0:
                self.first_batch_timestamp = header.max_timestamp
            self._observe(header)
            self._index_batch(pos, header)
            pos += header.size
        truncated = file_size - pos
        if truncated:
            os.ftruncate(self._fd, pos)
            log.warning(
                "log_truncated_on_recovery",
                file=str(self.log_path),
                position=pos,
                bytes=truncated,
                reason=reason,
                next_offset=self.next_offset,
            )
        self.size = pos
        self.synced_size = min(self.synced_size, pos)
        return RecoveryResult(pos, truncated, reason)

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding `offset` and everything after it; returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        self.synced_size = min(self.synced_size, position)
        self.rebuild_indexes()
        return removed

    # --- durability and lifecycle ---------------------------------------------------------------------

    def sync(self, fsync: Callable[[int], None] = os.fsync, *, with_indexes: bool = False) -> None:
        """fsync the log (and optionally the indexes). Runs in a worker thread: the fd may have been
        closed meanwhile by retention or compaction, which only means there is nothing left to sync."""
        size = self.size
        if self.closed:
            return
        try:
            fsync(self._fd)
            if with_indexes:
                self.offset_index.sync(fsync)
                self.time_index.sync(fsync)
                self.indexes_synced = True
        except OSError:
            if not self.closed:
                raise
            return
        if size > self.synced_size:
            self.synced_size = size

    @property
    def dirty(self) -> bool:
        return self.size > self.synced_size

    def close(self) -> None:
        if self.closed:
            return
        self.mark_inactive()
        self._close_files()

    def _close_files(self) -> None:
        self.closed = True
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
        self.offset_index.close()
        self.time_index.close()

    def delete_indexes_and_close(self) -> None:
        """First step of a compaction swap: the log file stays, its soon-stale indexes go."""
        self._close_files()
        for suffix in (".index", ".timeindex"):
            try:
                os.unlink(self.directory / segment_file_name(self.base_offset, suffix))
            except FileNotFoundError:
                pass

    def delete(self) -> None:
        self._close_files()
        for suffix in (".log", ".index", ".timeindex"):
            try:
                os.unlink(self.directory / segment_file_name(self.base_offset, suffix))
            except FileNotFoundError:
                pass
