"""The last record per key of a compacted topic's batches, read without an object per record.

A replay of a compacted topic (`__consumer_offsets` at start-up) reads every record, most of them
superseded by a later one with the same key. Folding them into key -> last (offset, value) keeps only
what compaction would keep, so replaying the result rebuilds the same state, and decoding and
replaying happen once per live key instead of once per record.

Pure, like record_batch.py: no asyncio, no broker imports.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from itertools import repeat
from typing import cast

from .errors import CorruptRecordError, InvalidRecordError
from .record_batch import BatchHeader, _read_headers, _read_zigzag, batch_records


def latest_per_key(buf: bytes, pos: int, header: BatchHeader,
                   into: dict[bytes, tuple[int, bytes | None]], keyless: list[int], min_offset: int = 0) -> int:
    """Fold the records of the batch at `pos` into `into`: key -> (offset, value) of its LAST record.
    A key keeps the place of its first record in `into`; `in_write_order` gives the order of the last
    writes (what compaction keeps, so replaying that rebuilds the same state as replaying every
    record). Returns how many records (at or past `min_offset`) were read; the offsets of keyless
    ones go to `keyless`.

    Replay of a compacted topic reads every record of it, most of them superseded: this walks them
    without making an object per record (no Record, no headers list; only the key and value slices),
    and takes runs of records shaped like the one before them in a few C-level passes (`_run_after`).
    The batch's integrity (CRC, magic) is the caller's to have checked (the log's read does)."""
    region, at, stop = batch_records(buf, pos, header)
    data = cast(bytes, region)  # `buf` itself (bytes) or the inflated bytes
    base = header.base_offset
    slow = _read_zigzag
    count = header.records_count
    read = 0
    done = 0
    probe_from = 1  # the first record after which a run of the same shape is looked for
    backoff = _PROBE_BACKOFF  # doubled by every look that finds no run worth taking
    try:
        while done < count:
            start = at
            b = data[at]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                at += 1
            elif data[at + 1] < 0x80:  # two bytes: records of 64 to 8191 bytes
                b = (b & 0x7F) | (data[at + 1] << 7)
                length = (b >> 1) ^ -(b & 1)
                at += 2
            else:
                length, at = slow(data, at)
            end = at + length
            if length <= 0 or end > stop:
                raise CorruptRecordError(f"record length {length} runs past the batch's records")
            at += 1  # attributes: unused
            if data[at] < 0x80:  # timestamp delta: unused
                at += 1
            else:
                _, at = slow(data, at)
            delta_at = at
            b = data[at]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                at += 1
            elif data[at + 1] < 0x80:  # two bytes: deltas past 63 in batches of a few hundred
                b = (b & 0x7F) | (data[at + 1] << 7)
                delta = (b >> 1) ^ -(b & 1)
                at += 2
            else:
                delta, at = slow(data, at)
            delta_end = at
            b = data[at]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                at += 1
            else:
                klen, at = slow(data, at)
            key = None
            key_at = at
            if klen >= 0:
                key = data[at : at + klen]
                at += klen
            key_end = at
            b = data[at]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                at += 1
            else:
                vlen, at = slow(data, at)
            value = None
            value_at = at
            if vlen >= 0:
                value = data[at : at + vlen]
                at += vlen
            if data[at] == 0:
                at += 1
            else:
                hcount, at = slow(data, at)
                _, at = _read_headers(data, at, hcount)
            if at != end:
                raise InvalidRecordError(f"record declares {length} bytes but its fields end {at - end} bytes off")
            done += 1
            offset = base + delta
            if offset >= min_offset:
                read += 1
                if key is None:
                    keyless.append(offset)
                else:
                    into[key] = (offset, value)
            if done < probe_from or done == count or at != value_at + max(vlen, 0) + 1:
                continue  # not probing here, nothing left, or a record with headers (no run)
            size = end - start
            n = _run_after(data, start, size, (delta_at, delta_end, key_at, key_end, value_at),
                           delta, min(count - done, (stop - end) // size))
            if n < _WORTH_A_PROBE:
                probe_from = done + backoff
                backoff *= 2
                if not n:
                    continue
            else:
                backoff = _PROBE_BACKOFF
            first = offset + 1
            skip = min(max(min_offset - first, 0), n)  # a read starting mid-batch: records before it
            first += skip
            taken = n - skip
            read += taken
            at = end + n * size
            done += n
            if not taken:
                continue
            if klen < 0:
                keyless.extend(range(first, first + taken))
                continue
            from_at = start + (1 + skip) * size
            fields = _fields_of(size, key_at - start, klen, value_at - start, vlen).iter_unpack(
                memoryview(data)[from_at : from_at + taken * size])
            if vlen >= 0:
                keys, values = zip(*fields)
                entries = zip(range(first, first + taken), values)
            else:
                keys, = zip(*fields)
                entries = zip(range(first, first + taken), repeat(None))
            into.update(zip(keys, entries))
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    except UnicodeDecodeError as exc:
        raise InvalidRecordError("record header key is not UTF-8") from exc
    if at != stop:
        raise InvalidRecordError(f"{stop - at} bytes remain after the batch's declared {header.records_count} records")
    return read


def in_write_order(latest: dict[bytes, tuple[int, bytes | None]],
                   moved: dict[bytes, int]) -> list[tuple[bytes, tuple[int, bytes | None]]]:
    """`latest`'s entries in the order of their last writes: by the offset of each key's last record,
    or, for a key whose last record came from a transaction (`moved`: key -> the offset of the marker
    that committed it), at that marker, after the records before it and in offset order among the
    transaction's own (a sort that finds them in order, as a fold of records mostly does, is linear)."""
    if not moved:
        return sorted(latest.items(), key=_offset_of)
    at = moved.get

    def written_at(item: tuple[bytes, tuple[int, bytes | None]]) -> tuple[int, int]:
        offset = item[1][0]
        return max(at(item[0], -1), offset), offset

    return sorted(latest.items(), key=written_at)


def _offset_of(item: tuple[bytes, tuple[int, bytes | None]]) -> int:
    return item[1][0]


# A run of records shaped alike (see _run_after) is taken when it is at least this long; after a
# shorter one, the next records are walked one by one before the next look, for twice as many after
# each look in a row that found none (batches of records of many shapes pay for few looks).
_WORTH_A_PROBE = 4
_PROBE_BACKOFF = 16
# Zigzag varints of offset deltas: 0-63 in one byte; 64-8191 in two (low seven bits with the
# continuation bit, then the rest).
_ZIGZAG_ONE = bytes(range(0, 128, 2))
# Built by repetition, not a Python step per delta (which took a millisecond of every start-up):
# the low byte of 2d cycles through the even values every 64 deltas, the high one is d // 64.
_ZIGZAG_LOW = bytes(range(0x80, 0x100, 2)) * 128
_ZIGZAG_HIGH = b"".join(bytes((high,)) * 64 for high in range(128))


def _run_after(data: bytes, start: int, size: int, marks: tuple[int, int, int, int, int], delta: int,
               most: int) -> int:
    """How many of the (at most `most`) records after the one at `start` share its shape: the same
    `size`, every byte equal outside the key, the value and the offset delta (length, attributes,
    timestamp delta, key and value lengths, a header count of 0), and offset deltas that go on
    from `delta` one by one in the same varint width. Such records are valid wherever the first is,
    and their keys and values sit at fixed strides; what the coordinator writes for one request
    (one group, one topic, offsets of the same width, one timestamp) is such a run. Each byte
    position is checked for all the records at once, by C-level slicing with a step."""
    delta_at, delta_end, key_at, key_end, value_at = marks
    width = delta_end - delta_at
    if width == 1 and 0 <= delta < 64:
        limit = 64
    elif width == 2 and 64 <= delta < 8192:
        limit = 8192
    else:
        return 0
    n = min(most, limit - 1 - delta)
    if n <= 0:
        return 0
    first = start + size
    last = first + n * size
    for at in (*range(start, delta_at), *range(delta_end, key_at), *range(key_end, value_at), first - 1):
        column = data[at + size : last : size]  # this byte of each record after the first
        same = len(column) - len(column.lstrip(data[at : at + 1]))
        if same < n:
            if not same:
                return 0
            n = same
            last = first + n * size
    wanted = delta + 1
    if width == 1:
        return _same_prefix(data[delta_at + size : last : size], _ZIGZAG_ONE[wanted : wanted + n])
    n = _same_prefix(data[delta_at + size : last : size], _ZIGZAG_LOW[wanted : wanted + n])
    return _same_prefix(data[delta_at + 1 + size : first + n * size : size], _ZIGZAG_HIGH[wanted : wanted + n])


@lru_cache(maxsize=256)
def _fields_of(size: int, key_at: int, klen: int, value_at: int, vlen: int) -> struct.Struct:
    """A record of a run as a struct: its key and (unless a tombstone) its value, the rest skipped."""
    if vlen < 0:
        return struct.Struct(f"<{key_at}x{klen}s{size - key_at - klen}x")
    return struct.Struct(f"<{key_at}x{klen}s{value_at - key_at - klen}x{vlen}s{size - value_at - vlen}x")


def _same_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes two equally long strings share."""
    if a == b:
        return len(a)
    differ = int.from_bytes(a, "big") ^ int.from_bytes(b, "big")
    return len(a) - (differ.bit_length() + 7) // 8
