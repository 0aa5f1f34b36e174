"""The last record per key of a compacted topic's batches, read without an object per record.

A replay of a compacted topic (`__consumer_offsets` at start-up) reads every record, most of them
superseded by a later one with the same key. Folding them into key -> last (offset, value) keeps only
what compaction would keep, so replaying the result rebuilds the same state, and decoding and
replaying happen once per live key instead of once per record.

Pure, like record_batch.py: no asyncio, no broker imports.
"""

from __future__ import annotations

from typing import cast

from .errors import CorruptRecordError, InvalidRecordError
from .record_batch import BatchHeader, _read_headers, _read_zigzag, batch_records


def latest_per_key(buf: bytes, pos: int, header: BatchHeader,
                   into: dict[bytes, tuple[int, bytes | None]], keyless: list[int], min_offset: int = 0) -> int:
    """Fold the records of the batch at `pos` into `into`: key -> (offset, value) of its LAST record,
    in the order of those last records (what compaction keeps, so replaying `into` rebuilds the same
    state as replaying every record). Returns how many records (at or past `min_offset`) were read;
    the offsets of keyless ones go to `keyless`.

    Replay of a compacted topic reads every record of it, most of them superseded: this walks them
    without making an object per record (no Record, no headers list; only the key and value slices).
    The batch's integrity (CRC, magic) is the caller's to have checked (the log's read does)."""
    region, at, stop = batch_records(buf, pos, header)
    data = cast(bytes, region)  # `buf` itself (bytes) or the inflated bytes
    base = header.base_offset
    slow = _read_zigzag
    forget = into.pop
    read = 0
    try:
        for _ in range(header.records_count):
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
            b = data[at]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                at += 1
            else:
                klen, at = slow(data, at)
            key = None
            if klen >= 0:
                key = data[at : at + klen]
                at += klen
            b = data[at]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                at += 1
            else:
                vlen, at = slow(data, at)
            value = None
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
            offset = base + delta
            if offset < min_offset:
                continue
            read += 1
            if key is None:
                keyless.append(offset)
            else:
                forget(key, None)  # re-inserted below: the order is that of the last writes
                into[key] = (offset, value)
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    except UnicodeDecodeError as exc:
        raise InvalidRecordError("record header key is not UTF-8") from exc
    if at != stop:
        raise InvalidRecordError(f"{stop - at} bytes remain after the batch's declared {header.records_count} records")
    return read
