"""One log segment: `<base>.log` holding whole record batches, plus its offset and time indexes."""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import structlog

from ....protocol.errors import CorruptRecordError
from ....protocol.record_batch import (
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    compute_crc,
)

from ....purgatory.clock import SystemClock
from . import segment_recovery
from .files import FILES
from .index import OffsetIndex, TimeIndex
from .timestamp_search import BatchToWalk, first_at, first_at_or_after, walk_inline
from .validation import InlineBudget

log = structlog.get_logger(__name__)

_READ_CHUNK = 256 * 1024  # how much a header scan reads per syscall
# A lookup's first read: the index (or a read hint) leaves it within about index.interval.bytes of
# its batch, so the scan's 256 KiB would mostly be bytes copied for nothing.
_FIND_CHUNK = 8 * 1024
_MAX_READ_HINTS = 8  # consumers of one segment at different positions, each with its own hint
_I64 = struct.Struct(">q")
# batchLength, partitionLeaderEpoch, magic, crc: the fields a read checks, from byte 8 of a batch
_FRAMING = struct.Struct(">iibI")
_FRAMING_AT = 8
_I32 = struct.Struct(">i")
_RELATIVE_OFFSET_LIMIT = 2**31 - 1  # index entries hold offsets relative to the base as int32
_SYSTEM_CLOCK = SystemClock()  # for segments made without an owner's clock (compaction output, tests)


# The three files of a segment: its records and its two indexes.
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    reason: str | None


class CorruptBatchError(CorruptRecordError):
    """A stored batch failed its check on read (Kafka's CorruptRecordException from FileLogInputStream).

    `resume_offset` is where a reader that chooses to skip the damage can go on: after the batch when
    its length can be trusted (only its contents are bad), else the segment's end (its framing is lost).
    """

    def __init__(self, segment: LogSegment, position: int, offset: int, resume_offset: int, reason: str) -> None:
        super().__init__(f"corrupt batch in {segment.log_path} at position {position}: {reason}")
        self.file = str(segment.log_path)
        self.position = position
        self.offset = offset
        self.resume_offset = resume_offset
        self.reason = reason
        self.raw: bytes | None = None


# Shared by every segment until its first read hint (never written to: _remember makes its own).
_NO_READ_HINTS: dict[int, int] = {}


class LogSegment:
    """Appends are synchronous (page cache); `sync` is safe to call from a worker thread."""

    # Slots, lazily made sets and dicts, str file names: an idle partition's segment is small.
    __slots__ = ("directory", "base_offset", "index_interval_bytes", "suffix", "_log_file", "size",
                 "next_offset", "max_timestamp", "offset_of_max_timestamp", "first_batch_timestamp",
                 "created_ms", "_offset_index", "_time_index", "_bytes_since_index", "synced_size",
                 "verified_size", "indexes_synced", "closed", "_reported", "_read_hints",
                 "__dict__")  # a dict only once a test patches a method on one segment

    def __init__(self, directory: Path | str, base_offset: int, index_interval_bytes: int, *, suffix: str = "",
                 created_ms: int | None = None, known_empty: bool = False) -> None:
        """A new segment, its three files created (empty) if missing. `known_empty`: the files exist and
        the log is empty, as the owner found them when it last loaded them (a dormant partition,
        dormant.py): no file is opened."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.suffix = suffix  # ".cleaned" while compaction builds a replacement
        # Descriptors live in the shared cache (files.py); a segment holds only file names (str: a
        # Path per file cost ~300 B; `log_path` makes one on demand).
        self._log_file = os.path.join(directory, segment_file_name(base_offset, ".log" + suffix))
        self.size = 0 if known_empty else FILES.create(self._log_file)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the batch holding max_timestamp
        self.first_batch_timestamp = -1  # drives time-based rolls, like Kafka's rollingBasedTimestamp
        # Drives time-based rolls of an empty-timestamped segment: the owner's clock (PartitionLog.clock).
        self.created_ms = created_ms if created_ms is not None else _SYSTEM_CLOCK.wall_ms()
        # The index files exist from now on (as Kafka's do); their objects are made with their first
        # use (`offset_index`, `time_index`): an empty segment, every idle partition's, needs neither.
        # Until made, an index's file is empty (created so, or emptied by a recovery of an empty log).
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        if not known_empty:
            FILES.create(self._index_file(".index"))
            FILES.create(self._index_file(".timeindex"))
        self._bytes_since_index = 0
        self.synced_size = self.size  # bytes known to be on disk; the flusher raises it
        # Bytes [0, verified_size) passed a CRC check (recovery, a read) or were appended by us; reads
        # check the CRC of whatever they serve beyond it.
        self.verified_size = 0
        self.indexes_synced = False  # set once an inactive segment's indexes have been fsynced
        self.closed = False
        self._reported: set[int] | None = None  # positions of damage already logged
        # base offset -> position of a batch where a read ended (see _remember); only batches behind
        # it may change it, and they change only by truncation or recovery, which clear it.
        self._read_hints = _NO_READ_HINTS

    @staticmethod
    def create_files(directory: str, base_offset: int) -> None:
        """The files of a new empty segment, without a segment object (a new dormant partition)."""
        for suffix in SEGMENT_FILE_SUFFIXES:
            FILES.create(os.path.join(directory, segment_file_name(base_offset, suffix)))

    @property
    def log_path(self) -> Path:
        return Path(self._log_file)

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._log_file = str(path)

    def _index_file(self, name: str) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, name + self.suffix))

    @property
    def offset_index(self) -> OffsetIndex:
        index = self._offset_index
        if index is None:
            index = self._offset_index = OffsetIndex(self._index_file(".index"), self.base_offset)
        return index

    @offset_index.setter
    def offset_index(self, index: OffsetIndex) -> None:
        self._offset_index = index

    @property
    def time_index(self) -> TimeIndex:
        index = self._time_index
        if index is None:
            index = self._time_index = TimeIndex(self._index_file(".timeindex"), self.base_offset)
        return index

    @time_index.setter
    def time_index(self, index: TimeIndex) -> None:
        self._time_index = index

    @property
    def untouched(self) -> bool:
        """Nothing made or remembered since load: no index object, read hint, damage report or close."""
        return (self._offset_index is None and self._time_index is None and self._reported is None
                and self._read_hints is _NO_READ_HINTS and not self.closed and not self.suffix)

    def _made_indexes(self) -> tuple[OffsetIndex | TimeIndex, ...]:
        return tuple(i for i in (self._offset_index, self._time_index) if i is not None)

    # --- opening --------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path | str, base_offset: int, index_interval_bytes: int, *, recover: bool,
             created_ms: int | None = None) -> tuple[
        LogSegment, RecoveryResult | None
    ]:
        """Open an existing (or new) segment.

        `recover=True` scans every batch, checks CRCs, truncates a torn or corrupt tail and rebuilds both
        indexes. Otherwise the indexes are sanity-checked and only the batches after the last index entry
        are read to find the segment's end; an index that fails (missing, malformed, pointing past the
        end or at something that is not its batch) or a tail that does not parse means `recover` after all.
        """
        if recover:  # every partition's active segment at every start: no Path objects on this path
            segment = cls(directory, base_offset, index_interval_bytes, created_ms=created_ms)
            return segment, segment.recover()
        index_path = Path(directory, segment_file_name(base_offset, ".index"))
        time_path = Path(directory, segment_file_name(base_offset, ".timeindex"))
        log_path = Path(directory, segment_file_name(base_offset, ".log"))
        size = log_path.stat().st_size if log_path.exists() else 0
        offset_index = OffsetIndex.load(index_path, base_offset, size)
        segment = cls(directory, base_offset, index_interval_bytes, created_ms=created_ms)
        if offset_index is None:
            # Kafka's LogLoader: an index that fails its sanity check means the segment cannot be
            # trusted either (a cut log leaves an index pointing past its end): validate and truncate.
            log.warning("index_invalid_recovering_segment", file=str(index_path))
            return segment, segment.recover()
        segment.offset_index = offset_index
        if not segment._last_index_entry_matches():
            log.warning("index_invalid_recovering_segment", file=str(index_path), reason="last_entry_mismatch")
            return segment, segment.recover()
        if not segment._scan_tail():
            log.warning("segment_tail_inconsistent", file=str(segment.log_path))
            return segment, segment.recover()
        time_index = TimeIndex.load(time_path, base_offset, segment.next_offset)
        if time_index is None:
            log.warning("index_invalid_recovering_segment", file=str(time_path))
            return segment, segment.recover()
        segment.time_index = time_index
        last = time_index.last_entry()
        if last is not None and last[0] > segment.max_timestamp:
            segment.max_timestamp, segment.offset_of_max_timestamp = last
        segment._load_first_batch_timestamp()
        return segment, None

    def _last_index_entry_matches(self) -> bool:
        """Kafka's sanity check, made sharper: the last entry must point at a batch that is there, with
        the offset the entry names (an index that belongs to another version of the log fails)."""
        if not len(self.offset_index):
            return True
        position = self.offset_index.values[-1]
        raw = self.read_at(position, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            return False
        header = BatchHeader(*HEADER_STRUCT.unpack_from(raw))
        key = self.base_offset + self.offset_index.keys[-1]  # a batch's last offset, or its first after damage
        return header.magic == 2 and key in (header.last_offset, header.base_offset)

    def _load_first_batch_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = BatchHeader(*HEADER_STRUCT.unpack_from(self.read_at(0, HEADER_SIZE))).max_timestamp

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

    def append(self, data: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview],
               batches: list[tuple[int, BatchHeader]]) -> None:
        """Write already-validated batches (positions relative to `data`, which may come in parts
        written together) at the end of the file."""
        start = self.size
        parts = data if isinstance(data, list) else [data]
        total = sum(len(p) for p in parts)
        with FILES.lease(self._log_file) as fd:
            written = os.pwritev(fd, parts, start) if len(parts) > 1 else os.pwrite(fd, parts[0], start)
            if written < total:  # a write to a regular file is normally complete; finish it if not
                view = memoryview(b"".join(parts))
                while written < total:
                    written += os.pwrite(fd, view[written:], start + written)
        if start == 0:
            self.first_batch_timestamp = batches[0][1].max_timestamp
        for rel, header in batches:
            self._observe(header)
            self._index_batch(start + rel, header)
        self.size = start + total
        if self.verified_size == start:
            self.verified_size = self.size  # produce validated these batches' CRCs

    def mark_inactive(self) -> None:
        """On roll: make the time index's last entry the segment's max, as Kafka does, so a later load
        (and retention) learns the largest timestamp without reading the log."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # --- reading --------------------------------------------------------------------------------------

    def read_at(self, position: int, size: int) -> bytes:
        with FILES.lease(self._log_file) as fd:
            return os.pread(fd, size, position)

    def iter_headers(self, start: int = 0, *, strict: bool = False,
                     chunk_size: int = _READ_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the whole batches from `start`; reads in chunks, never trusts a length past EOF.

        A header that cannot be right (length out of bounds, unknown magic) ends the walk quietly, or
        with `strict` (the read path) raises CorruptBatchError: below the segment's end, where every
        byte was once a whole batch, it is damage, and serving past it would be serving garbage.
        """
        pos = start
        chunk = b""
        chunk_start = pos
        end = self.size
        while end - pos >= HEADER_SIZE:
            rel = pos - chunk_start
            if rel + HEADER_SIZE > len(chunk):
                chunk = self.read_at(pos, chunk_size)
                chunk_size = _READ_CHUNK  # a walk that goes on is a long one
                chunk_start = pos
                rel = 0
                if len(chunk) < HEADER_SIZE:
                    break
            header = BatchHeader(*HEADER_STRUCT.unpack_from(chunk, rel))
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end or header.magic != 2:
                if strict:
                    raise self._corrupt(pos, header, "bad_length" if header.magic == 2 else "bad_magic")
                return
            yield pos, header
            pos += header.size
        if strict and pos < end:
            raise self._corrupt(pos, None, "torn_header")

    def _corrupt(self, position: int, header: BatchHeader | None, reason: str) -> CorruptBatchError:
        framed = reason == "bad_crc" and header is not None
        offset = header.base_offset if header is not None and framed else -1
        if framed and header is not None:
            resume = header.next_offset
        else:
            # The length cannot be trusted, so the next batch is not found by walking; the index
            # knows batch starts further on (its entries were written when the bytes were whole).
            positions = self.offset_index.values
            i = bisect_right(positions, position)
            resume = self.base_offset + self.offset_index.keys[i] if i < len(positions) else self.next_offset
        error = CorruptBatchError(self, position, offset, resume, reason)
        if framed and header is not None:
            error.raw = self.read_at(position, header.size)  # lets a reader say what was lost
        if self._reported is None:
            self._reported = set()
        if position not in self._reported:  # once per damaged batch, not once per retried fetch
            self._reported.add(position)
            log.error("corrupt_batch_on_read", file=error.file, position=position, reason=reason,
                      base_offset=offset, resume_offset=resume)
        return error

    def find_batch(self, offset: int, *, strict: bool = False) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset` (the one holding it, or the next one)."""
        start = self._read_hints.get(offset)
        if start is None:
            start = self.offset_index.lookup(offset)
        for pos, header in self.iter_headers(start, strict=strict, chunk_size=_FIND_CHUNK):
            if header.last_offset >= offset:
                return pos, header
        return None

    def _remember(self, offset: int, data: bytes, end: int, position: int) -> None:
        """Where the batch after a read of `offset` starts, keyed by its base offset: a consumer's next
        fetch asks for exactly that offset and finds its batch without an index walk."""
        if len(data) - end >= 8:
            following = _I64.unpack_from(data, end)[0]
            if offset < following < self.next_offset:  # the base offset is outside the CRC: check it
                hints = self._read_hints
                if hints is _NO_READ_HINTS:
                    hints = self._read_hints = {}
                hints[following] = position
                if len(hints) > _MAX_READ_HINTS:
                    hints.pop(next(iter(hints)), None)

    def read(self, offset: int, max_bytes: int, min_one_batch: bool) -> bytes | memoryview:
        """Whole batches starting with the one holding `offset`, up to max_bytes (or one whole batch):
        a view of the bytes read from the file, never a copy of them.

        Every batch served is checked first (length, magic, and the CRC of bytes not verified
        before): CorruptBatchError rather than damaged bytes with error 0."""
        found = self.find_batch(offset, strict=True)
        if found is None:
            return b""
        start, first = found
        if first.size > max_bytes:
            if not min_one_batch:
                return b""
            data = self.read_at(start, first.size)
            self._verify(data, start, [(0, first)])
            return data
        limit = min(start + max_bytes, self.size)
        data = self.read_at(start, limit - start)
        if limit <= self.verified_size:
            end = self._whole_batches_end(data, start, first.size, limit) - start
        else:
            end = self._checked_end(data, start, limit - start)
        self._remember(offset, data, end, start + end)
        return data if end == len(data) else memoryview(data)[:end]

    def _checked_end(self, data: bytes, start: int, window: int) -> int:
        """End (relative to `start`) of the whole batches at the start of `data` that pass their checks."""
        rel = 0
        verified = self.verified_size
        while window - rel >= HEADER_SIZE:
            # Only length, magic and CRC fields: this walk runs over every batch of every fetch.
            length, _, magic, crc = _FRAMING.unpack_from(data, rel + _FRAMING_AT)
            size = length + LOG_OVERHEAD
            damage = None
            if length < MIN_BATCH_LENGTH or magic != 2:
                damage = "bad_length" if magic == 2 else "bad_magic"
            elif rel + size > window:
                if start + rel + size <= self.size:
                    break  # a whole batch that just does not fit the window
                damage = "bad_length"
            elif start + rel + size > verified and compute_crc(data, rel, size) != crc:
                damage = "bad_crc"
            if damage is not None:
                if rel == 0:
                    raise self._corrupt(start, BatchHeader(*HEADER_STRUCT.unpack_from(data, 0)), damage)
                break  # serve the good batches before it; the next read starts at the damage and fails
            if start + rel <= verified < start + rel + size:
                verified = start + rel + size  # contiguous with what was checked before: remember it
            rel += size
        if verified > self.verified_size:
            self.verified_size = verified
        return rel

    def _whole_batches_end(self, data: bytes, start: int, first_size: int, limit: int) -> int:
        """End of the last whole batch in a window of bytes checked before (their framing is known good):
        jump to the last indexed batch start inside the window, then walk lengths from there."""
        boundary = start + first_size
        positions = self.offset_index.values
        i = bisect_right(positions, limit) - 1
        if i >= 0 and positions[i] > boundary:
            boundary = positions[i]
        while limit - boundary >= LOG_OVERHEAD:
            size = _I32.unpack_from(data, boundary - start + 8)[0] + LOG_OVERHEAD
            if boundary + size > limit:
                break
            boundary += size
        return boundary

    def _verify(self, data: bytes, start: int, batches: list[tuple[int, BatchHeader]]) -> None:
        """CRC-check the batches of a read that lie beyond verified_size."""
        for rel, header in batches:
            end = start + rel + header.size
            if end > self.verified_size and compute_crc(data, rel, header.size) != header.crc:
                raise self._corrupt(start + rel, header, "bad_crc")
            if start + rel <= self.verified_size < end:
                self.verified_size = end

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int, budget: InlineBudget | None = None
                                 ) -> tuple[int, int] | BatchToWalk | None:
        """(offset, timestamp) of the first record at or after `timestamp` with offset >= start_offset.
        With a `budget`, a batch past what is left of it comes back as a BatchToWalk instead."""
        if self.max_timestamp < timestamp:
            return None
        from_offset = max(self.time_index.lookup_before(timestamp), start_offset)
        for pos, header in self.iter_headers(self.offset_index.lookup(from_offset)):
            if header.last_offset < start_offset or header.max_timestamp < timestamp:
                continue
            batch = self.read_at(pos, header.size)
            if not walk_inline(header, budget):
                return BatchToWalk(bytes(batch), timestamp, start_offset, resume_offset=header.last_offset + 1)
            found = first_at_or_after(batch, timestamp, start_offset)
            if found is not None:
                return found
        return None

    def record_with_max_timestamp(self, budget: InlineBudget | None = None) -> tuple[int, int] | BatchToWalk | None:
        """(offset, timestamp) of the first record carrying the segment's max timestamp."""
        if self.max_timestamp < 0:
            return None
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is None:
            return None
        pos, header = found
        batch = self.read_at(pos, header.size)
        otherwise = (header.last_offset, self.max_timestamp)
        if not walk_inline(header, budget):
            return BatchToWalk(bytes(batch), self.max_timestamp, 0, otherwise=otherwise, exact=True)
        return first_at(batch, self.max_timestamp) or otherwise

    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self._log_file).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # --- recovery and truncation ----------------------------------------------------------------------

    def _reset_state(self) -> None:
        self._read_hints = _NO_READ_HINTS
        for name, made in ((".index", self._offset_index), (".timeindex", self._time_index)):
            if made is not None:
                made.reset()
                continue
            try:  # an unmade index's file may hold what a recovery must not trust: empty it as reset() would
                os.truncate(self._index_file(name), 0)
            except FileNotFoundError:
                pass
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1
        self._bytes_since_index = 0

    def recover(self) -> RecoveryResult:
        """Validate every batch (length, magic, CRC, offsets moving forward); indexes are rebuilt on the way.

        A batch that only fails its CRC is cut when nothing valid follows it (a torn tail), but kept when
        valid batches follow: that is rot in the middle, and cutting there would destroy every
        acknowledged record behind it. A batch whose framing is bad (length, magic, past EOF, offsets going
        back) cannot be walked past, but the old index (read before it is rebuilt) knows where later
        batches start: the first one there that validates resumes the walk, and the bytes in between are
        kept as damage. Only when nothing valid can be found after the damage is the file cut there.
        Reads of kept damage answer CORRUPT_MESSAGE (verified_size stops before it).
        """
        file_size = os.stat(self._log_file).st_size
        if file_size == 0 and self._offset_index is None and self._time_index is None:
            # An empty log (a new or idle partition's active segment at start-up): nothing to walk, and
            # its indexes stay unmade (their files emptied, as a rebuild would leave them).
            self._reset_state()
            self.size = self.synced_size = self.verified_size = 0
            return RecoveryResult(0, 0, None)
        hints = segment_recovery.index_positions(self)
        cut_at, reason, first_damage, resynced = segment_recovery.recover_pass(self, file_size, hints)
        truncated = file_size - cut_at
        if truncated:
            lost_from = self.next_offset
            self._ftruncate(cut_at)
            if reason == "bad_crc":  # the walk went past the cut (a trailing run of rot): walk what is left
                _, _, first_damage, resynced = segment_recovery.recover_pass(self, cut_at, hints)
                lost_from = self.next_offset
            # Data-destroying: the bytes and the first offset lost (how many offsets the cut bytes
            # held is unknowable once their header is bad).
            log.warning("log_truncated_on_recovery", file=str(self.log_path), position=cut_at, bytes=truncated,
                        reason=reason, next_offset=self.next_offset, first_offset_lost=lost_from)
        # The rebuilt indexes go to their files now, not in runs: an old segment's index is trusted
        # as found at the next start.
        self.offset_index.write_pending()
        self.time_index.write_pending()
        if resynced:
            self.offset_index.sync()  # the entries that skip the damage must outlive the next crash
        self.size = cut_at
        self.synced_size = min(self.synced_size, cut_at)
        self.verified_size = cut_at if first_damage is None or first_damage >= cut_at else first_damage
        return RecoveryResult(cut_at, truncated, reason)

    def _ftruncate(self, position: int) -> None:
        with FILES.lease(self._log_file) as fd:
            os.ftruncate(fd, position)

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding `offset` and everything after it; returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        self._ftruncate(position)
        self.size = position
        self.synced_size = min(self.synced_size, position)
        self.verified_size = min(self.verified_size, position)
        # Re-derive offsets and indexes by validating what is left (a plain header walk would stop at
        # damage kept in the middle and forget everything behind it).
        synced = self.synced_size
        self.recover()
        self.synced_size = min(synced, self.size)
        return removed

    # --- durability and lifecycle ---------------------------------------------------------------------

    def sync(self, fsync: Callable[[int], None] = os.fsync, *, with_indexes: bool = False) -> None:
        """fsync the log (and optionally the indexes). Runs in a worker thread: the fd may have been
        closed meanwhile by retention or compaction, which only means there is nothing left to sync."""
        size = self.size
        if self.closed:
            return
        try:
            with FILES.lease(self._log_file) as fd:
                fsync(fd)
            if with_indexes:
                for index in self._made_indexes():  # an unmade index's file is empty: nothing to sync
                    index.sync(fsync)
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

    def _close_files(self, *, write_indexes: bool = True) -> None:
        """`write_indexes=False`: index entries not yet written are dropped (see index.py)."""
        self.closed = True
        FILES.forget(self._log_file)
        for index in self._made_indexes():
            index.close(write=write_indexes)

    def delete_indexes_and_close(self) -> None:
        """First step of a compaction swap: the log file stays, its soon-stale indexes go."""
        self._close_files(write_indexes=False)
        for path in (self._index_file(".index"), self._index_file(".timeindex")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def delete(self) -> None:
        self._close_files(write_indexes=False)
        for path in (self._log_file, self._index_file(".index"), self._index_file(".timeindex")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def promote_log(self) -> None:
        """Compaction's swap, step one: rename this finished `.cleaned` log over the live name."""
        final = Path(self.directory, segment_file_name(self.base_offset, ".log"))
        FILES.forget(self._log_file)
        FILES.forget(final)
        os.replace(self._log_file, final)
        self._log_file = str(final)

    def promote_indexes(self) -> None:
        """Step two, after the directory fsync: an index rename a crash loses is recovered at load."""
        cleaned = {name: self._index_file(name) for name in (".index", ".timeindex")}
        self.suffix = ""
        for name, index in ((".index", self._offset_index), (".timeindex", self._time_index)):
            final = self._index_file(name)
            FILES.forget(cleaned[name])
            FILES.forget(final)
            os.replace(cleaned[name], final)
            if index is not None:
                index.path = Path(final)
