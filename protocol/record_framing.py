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
    exactly (InvalidRecordError when bytes remain after them)."""
    at = start
    try:
        for _ in range(count):
            b = data[at]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                at += 1
            elif data[at + 1] < 0x80:  # two bytes: records of 64 to 8191 bytes
                b = (b & 0x7F) | (data[at + 1] << 7)
                length = (b >> 1) ^ -(b & 1)
                at += 2
            else:
                length, at = _read_zigzag(data, at)
            if length <= 0 or at + length > stop:
                raise CorruptRecordError(f"record length {length} runs past the batch's records")
            at += length
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    if at != stop:
        raise InvalidRecordError(f"{stop - at} bytes remain after the batch's declared {count} records")
