"""A segment's recovery walk (`LogSegment.recover`): every batch validated, indexes rebuilt, and damage
walked past where the old offset index knows a later batch start. Kept apart from segment.py so each
reads in one sitting; the functions work on the segment's own state."""

from __future__ import annotations

import os
from bisect import bisect_right
from typing import TYPE_CHECKING

import structlog

from ....protocol.record_batch import HEADER_SIZE, HEADER_STRUCT, MIN_BATCH_LENGTH, BatchHeader, compute_crc
from .files import FILES

if TYPE_CHECKING:
    from .segment import LogSegment

log = structlog.get_logger("kbroker.broker.storage.log.segment")

_READ_CHUNK = 256 * 1024  # how much the walk reads per syscall


def index_positions(seg: LogSegment) -> list[int]:
    """Batch starts the existing offset index names (hints for walking past damage; verified before use)."""
    seg.offset_index.write_pending()
    try:
        with FILES.lease(seg.offset_index.path) as fd:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
    except FileNotFoundError:
        return []
    entry = seg.offset_index.ENTRY
    whole = len(data) - len(data) % entry.size
    return sorted({position for _, position in entry.iter_unpack(data[:whole]) if position > 0})

def resync_point(seg: LogSegment, position: int, hints: list[int], file_size: int) -> tuple[int, BatchHeader] | None:
    """The first indexed batch start after `position` holding a whole, CRC-valid batch that continues
    the offsets: where a walk stopped by damage can go on."""
    tried = 0
    for candidate in hints[bisect_right(hints, position):]:
        tried += 1
        if tried > 64:
            return None
        raw = seg.read_at(candidate, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            return None
        header = BatchHeader(*HEADER_STRUCT.unpack_from(raw))
        if (header.magic != 2 or header.batch_length < MIN_BATCH_LENGTH or candidate + header.size > file_size
                or header.base_offset < seg.next_offset or header.last_offset_delta < 0):
            continue
        if compute_crc(seg.read_at(candidate, header.size), 0, header.size) == header.crc:
            return candidate, header
    return None

def recover_pass(seg: LogSegment, file_size: int, hints: list[int]) -> tuple[int, str | None, int | None, bool]:
    """One validating walk over [0, file_size): (where the valid data ends, why it ends there, the first
    damaged position kept, whether the walk resynchronised past damage)."""
    seg._reset_state()
    pos = 0
    reason: str | None = None
    chunk = b""
    chunk_start = 0
    rotten_run: int | None = None  # start of the current run of CRC-failing batches
    first_damage: int | None = None
    resynced = False
    forced_entry = False
    while pos < file_size:
        if file_size - pos < HEADER_SIZE:
            reason = "torn_header"
            break
        rel = pos - chunk_start
        if rel < 0 or rel + HEADER_SIZE > len(chunk):
            chunk = seg.read_at(pos, _READ_CHUNK)
            chunk_start, rel = pos, 0
        header = BatchHeader(*HEADER_STRUCT.unpack_from(chunk, rel))
        framing = None
        if header.batch_length < MIN_BATCH_LENGTH or header.magic != 2:
            framing = "bad_header"
        elif pos + header.size > file_size:
            framing = "torn_batch"
        elif header.base_offset < seg.next_offset or header.last_offset_delta < 0:
            framing = "offset_regression"
        if framing is not None:
            found = resync_point(seg, pos, hints, file_size)
            if found is None:
                reason = framing
                break
            target, header = found
            log.error("corrupt_batch_on_recovery", file=str(seg.log_path), position=pos, reason=framing,
                      skipped_bytes=target - pos, resumed_at=target, resumed_offset=header.base_offset)
            if first_damage is None:
                first_damage = pos
            rotten_run = None
            resynced = forced_entry = True
            pos = target
            chunk = b""
            continue
        if rel + header.size > len(chunk):
            chunk = seg.read_at(pos, max(_READ_CHUNK, header.size))
            chunk_start, rel = pos, 0
        if compute_crc(chunk, rel, header.size) != header.crc:
            if rotten_run is None:
                rotten_run = pos
            if first_damage is None:
                first_damage = pos
            log.error("corrupt_batch_on_recovery", file=str(seg.log_path), position=pos,
                      base_offset=header.base_offset, last_offset=header.last_offset, reason="bad_crc")
        else:
            rotten_run = None
        if pos == 0:
            seg.first_batch_timestamp = header.max_timestamp
        seg._observe(header)
        if forced_entry:
            # An entry right at the batch after the damage, keyed by its first offset, so a read of
            # any of its offsets starts here instead of walking into the damage.
            seg.offset_index.append(header.base_offset, pos)
            seg._bytes_since_index = header.size
            forced_entry = False
        else:
            seg._index_batch(pos, header)
        pos += header.size
    if rotten_run is not None:
        return rotten_run, "bad_crc", first_damage, resynced  # CRC failures up to the end: a torn tail
    return pos, reason, first_damage, resynced
