"""A batch's records framed as its header says, checked without building them.

A produced batch whose header and CRC are sound may still carry records that are not records: random
bytes, or fewer records than the header counts. Kafka's LogValidator reads every record and refuses
such a batch; a broker that stored it would acknowledge data no consumer can read, and every later
read of the partition would stumble on it. This walks the chain of record lengths (each record
starts with its own length as a zigzag varint): the header's record count must end exactly at the
end of the records. It does not look inside a record, so it costs a few hundred nanoseconds per
record where building each one would cost microseconds.

Pure, like record_batch.py: no asyncio, no broker imports.
"""

from __future__ import annotations

from .errors import CorruptRecordError, InvalidRecordError
from .record_batch import _read_zigzag


def check_record_framing(data: bytes | bytearray | memoryview, start: int, stop: int, count: int) -> None:
    """CorruptRecordError unless `count` records, each of a positive length, fill data[start:stop]
    exactly (InvalidRecordError when bytes remain after them).

    Lengths are zigzag varints, positive exactly when the raw value is even and not zero; one and two
    bytes (records under 8 KiB) are read inline. Only positive lengths are taken, so the position only
    grows: once past `stop` it stays past, and the one comparison at the end finds it."""
    at = start
    try:
        for _ in range(count):
            b = data[at]
            if b < 0x80:
                if b & 1 or not b:
                    raise CorruptRecordError(f"record length {(b >> 1) ^ -(b & 1)} is not positive")
                at += 1 + (b >> 1)
                continue
            c = data[at + 1]
            if c < 0x80:
                z = (b & 0x7F) | (c << 7)
                if z & 1 or not z:
                    raise CorruptRecordError(f"record length {(z >> 1) ^ -(z & 1)} is not positive")
                at += 2 + (z >> 1)
                continue
            length, at = _read_zigzag(data, at)
            if length <= 0:
                raise CorruptRecordError(f"record length {length} is not positive")
            at += length
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    if at > stop:
        raise CorruptRecordError(f"the batch's {count} records run {at - stop} bytes past its end")
    if at < stop:
        raise InvalidRecordError(f"{stop - at} bytes remain after the batch's declared {count} records")
