"""A batch's records walked without building them: framed as its header says, and their heads read.

A produced batch whose header and CRC are sound may still carry records that are not records: random
bytes, or fewer records than the header counts. Kafka's LogValidator reads every record and refuses
such a batch with INVALID_RECORD; a broker that stored it would acknowledge data no consumer can
read, and every later read of the partition would stumble on it. This walks the chain of record
lengths (each record starts with its own length as a zigzag varint): the header's record count must
end exactly at the end of the records, each record long enough to be one. It does not look inside a
record (its key, value and header lengths), so it costs a few hundred nanoseconds per record where
building each one costs microseconds: a crafted record whose inner lengths disagree with its own
still passes, and its readers meet it as CORRUPT_MESSAGE.

The checks that read a field of each record walk the same way (`record_heads`, used by
broker/storage/log/validation.py): a compacted topic's key check and a topic's lower timestamp bound. A batch
within the inflated bound may still hold millions of tiny records, and those checks must not make an
object per record either. That walk also refuses a key running past its record.

Pure, like record_batch.py: no asyncio, no broker imports.
"""

from __future__ import annotations

from typing import Iterator

from .errors import CorruptRecordError, InvalidRecordError
from .record_batch import TIMESTAMP_LOG_APPEND_TIME, _read_zigzag, batch_records, read_checked_header


# A record's smallest body: attributes, timestamp delta, offset delta, key length, value length and
# header count, one byte each.
MIN_RECORD_BODY = 6


def check_record_framing(data: bytes | bytearray | memoryview, start: int, stop: int, count: int) -> None:
    """InvalidRecordError (Kafka's InvalidRecordException: INVALID_RECORD) unless `count` records,
    each at least MIN_RECORD_BODY long, fill data[start:stop] exactly.

    Lengths are zigzag varints: the raw value is twice the length for a positive one, so a length
    of at least 6 is an even raw value of at least 12. One and two bytes (records under 8 KiB) are read
    inline. Lengths are positive, so the position only grows: once past `stop` it stays past, and one
    comparison at the end finds it.

    A producer's records are mostly of one size (fixed-size values, deltas of one varint width): the
    records after one of n bytes that start with the same length bytes are n bytes too, and a strided
    slice finds how many do in one C pass (`_same_size_after`). A look reads at most _LOOK records
    ahead, and as many again as it found, so a short run costs a short look: records whose sizes
    change every other record cost a bounded look each, never a pass over the rest of the batch.
    A look that finds fewer than _WORTH_A_LOOK doubles the wait before the next, so records of
    ever-changing sizes cost the walk little more."""
    at = start
    left = count
    wait = look = 0  # records to walk one by one before the next look for a run; that wait after a vain look
    try:
        while left > 0:
            step = min(left, wait + 1)
            left -= step
            for _ in range(step):
                last = at
                b = data[at]
                if b < 0x80:
                    if b & 1 or b < 2 * MIN_RECORD_BODY:
                        raise InvalidRecordError(f"record length {(b >> 1) ^ -(b & 1)} is too short for a record")
                    at += 1 + (b >> 1)
                    continue
                c = data[at + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    if z & 1 or z < 2 * MIN_RECORD_BODY:
                        raise InvalidRecordError(f"record length {(z >> 1) ^ -(z & 1)} is too short for a record")
                    at += 2 + (z >> 1)
                    continue
                length, at = _read_zigzag(data, at)
                if length < MIN_RECORD_BODY:
                    raise InvalidRecordError(f"record length {length} is too short for a record")
                at += length
            if left <= 0:
                break
            # The record just walked, data[last:at]: do the ones after it share its length bytes?
            size, width = at - last, 1 if data[last] < 0x80 else 2 if data[last + 1] < 0x80 else 0
            found = 0
            window = _LOOK
            while width and left:
                most = min(left, window)
                run = _same_size_after(data, at, stop, size, width, most)
                at += run * size
                left -= run
                found += run
                if run < most:
                    break
                window *= 2
            look = 0 if found >= _WORTH_A_LOOK else min(2 * look + 1, 64)
            wait = look
    except (IndexError, CorruptRecordError) as exc:  # past the buffer; a length varint over 10 bytes
        raise InvalidRecordError(f"the batch's records are not records: {exc}") from exc
    if at != stop:
        raise InvalidRecordError(f"the batch's {count} records end {at - stop:+d} bytes from its end")


# Records a look for a run reads ahead at first; each look that finds them all reads twice as far.
_LOOK = 64
# A look that finds fewer records than this did not pay for itself: the next waits longer.
_WORTH_A_LOOK = 8


def _same_size_after(data: bytes | bytearray | memoryview, at: int, stop: int, size: int, width: int,
                     most: int) -> int:
    """How many of the (at most `most`) records from `at` on begin with the same `width` length
    bytes as the record of `size` bytes just before `at`, each `size` bytes after the last: the
    records of the run are that size. One that would run past `stop` ends the walk past it."""
    end = min(stop, at + size * most)
    if end <= at:
        return 0
    run = most
    for i in range(width):
        column = bytes(data[at + i:end:size])
        run = min(run, len(column) - len(column.lstrip(bytes((data[at - size + i],)))))
        if not run:
            break
    return run


def record_heads(data: bytes | bytearray | memoryview, start: int, stop: int,
                 count: int) -> Iterator[tuple[int, int, int, int]]:
    """(index, timestamp delta, offset delta, key length) of each of the `count` records in
    data[start:stop], read without building a record; CorruptRecordError or InvalidRecordError when
    they do not fill it exactly or a key runs past its record. Each varint takes an inlined one-byte
    path first (small deltas and lengths), as record_batch's decoder does."""
    slow = _read_zigzag
    at = start
    try:
        for index in range(count):
            b = data[at]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                at += 1
            else:
                length, at = slow(data, at)
            end = at + length
            if length <= 0 or end > stop:
                raise CorruptRecordError(f"record length {length} runs past the batch's records")
            at += 1  # attributes
            b = data[at]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                at += 1
            elif data[at + 1] < 0x80:
                b = (b & 0x7F) | (data[at + 1] << 7)
                timestamp_delta = (b >> 1) ^ -(b & 1)
                at += 2
            else:
                timestamp_delta, at = slow(data, at)
            b = data[at]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                at += 1
            elif data[at + 1] < 0x80:  # deltas past 63: batches of a few hundred records and more
                b = (b & 0x7F) | (data[at + 1] << 7)
                offset_delta = (b >> 1) ^ -(b & 1)
                at += 2
            elif data[at + 2] < 0x80:  # past 8191
                b = (b & 0x7F) | ((data[at + 1] & 0x7F) << 7) | (data[at + 2] << 14)
                offset_delta = (b >> 1) ^ -(b & 1)
                at += 3
            else:
                offset_delta, at = slow(data, at)
            b = data[at]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                at += 1
            else:
                key_length, at = slow(data, at)
            if key_length > end - at:
                raise InvalidRecordError(f"record {index}'s key of {key_length} bytes runs past the record")
            yield index, timestamp_delta, offset_delta, key_length
            at = end
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    if at != stop:
        raise InvalidRecordError(f"{stop - at} bytes remain after the batch's declared {count} records")


def record_times(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of the stored batch at the start of `buf` (CRC checked,
    inflated within the broker's bound), without building the records: a timestamp search through a
    batch of a million records decoded every one (4.2 s and 236 MiB on the event loop). In a
    LogAppendTime batch every record carries the batch's maximum timestamp, as in Kafka."""
    header = read_checked_header(buf, 0)
    data, start, stop = batch_records(buf, 0, header)
    fixed = header.max_timestamp if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else None
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    for _, timestamp_delta, offset_delta, _ in record_heads(data, start, stop, header.records_count):
        yield base_offset + offset_delta, fixed if fixed is not None else base_timestamp + timestamp_delta
