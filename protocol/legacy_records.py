"""Message formats v0 and v1 (KIP-31/32's MessageSets), which Produce v0-v2 and Fetch v0-v3 carry.

Kafka 3.9 stores only record batches (magic 2) and converts at its edges, and so do we:

* `to_batch`: a Produce v0-v2 message set becomes one record batch, as Kafka's LogValidator
  converts it: records keep their keys, values and (v1) timestamps, v0 messages get no timestamp
  (-1), offsets are assigned by the log, and the batch uses the messages' codec (Kafka's
  compression.type=producer). A message whose CRC does not match is CORRUPT_MESSAGE.
* `down_convert`: batches read for Fetch v0-v3 become messages of magic 0 (Fetch v0-v1) or 1 (Fetch
  v2-v3), as Kafka's RecordsUtil.downConvert: control batches are dropped, a compressed batch
  becomes one compressed wrapper message with the same codec (v1 wrappers carry the last inner
  offset and relative inner offsets; v0 wrappers absolute ones), headers are dropped. Fetch below
  v10 cannot carry zstd: such batches are refused with UNSUPPORTED_COMPRESSION_TYPE by the caller.

Wire layout of one entry: offset int64, size int32, then the message: crc uint32 (CRC-32 of the
rest), magic int8, attributes int8 (bits 0-2 codec, bit 3 log-append-time in v1), timestamp int64
(v1 only), key and value as int32-length bytes (-1 for null).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from . import record_batch as rb
from .compression import COMPRESSION_NONE, COMPRESSION_ZSTD, compress, decompress, inflated_bound
from .errors import CorruptRecordError, InvalidRecordError

_ENTRY_HEAD = struct.Struct(">qi")
_MSG_HEAD = struct.Struct(">Ibb")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CODEC_MASK = 0x07
_LOG_APPEND_TIME_BIT = 0x08


@dataclass(slots=True)
class Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & _CODEC_MASK


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError("message field runs past the message")
    return bytes(buf[pos:pos + n]), pos + n


def read_message_set(buf: bytes) -> list[Message]:
    """The entries of a message set, a trailing partial entry ignored (as Kafka does); wrappers
    are not expanded."""
    out: list[Message] = []
    pos, n = 0, len(buf)
    while pos + _ENTRY_HEAD.size <= n:
        offset, size = _ENTRY_HEAD.unpack_from(buf, pos)
        start = pos + _ENTRY_HEAD.size
        if size < _MSG_HEAD.size + 8 or start + size > n:
            break
        body = buf[start:start + size]
        crc, magic, attributes = _MSG_HEAD.unpack_from(body, 0)
        if magic not in (0, 1):
            raise InvalidRecordError(f"message format v{magic} inside a v0/v1 message set")
        if zlib.crc32(body[4:]) != crc:
            raise CorruptRecordError("message CRC mismatch")
        p = _MSG_HEAD.size
        timestamp = rb.NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _I64.unpack_from(body, p)
            p += 8
        key, p = _read_bytes(body, p)
        value, p = _read_bytes(body, p)
        out.append(Message(offset, magic, attributes, timestamp, key, value))
        pos = start + size
    return out


def _expand(messages: list[Message]) -> list[Message]:
    """Compressed wrappers replaced by their inner messages (relative offsets made absolute for v1).
    The broker's inflated bound holds for the whole message set, not wrapper by wrapper: each wrapper
    may inflate only to what the ones before it left (a few kB of wrappers held GBs)."""
    out: list[Message] = []
    left = inflated_bound()
    for m in messages:
        if m.codec == COMPRESSION_NONE:
            out.append(m)
            continue
        inflated = decompress(m.codec, m.value or b"", left)
        left -= len(inflated)
        inner = read_message_set(inflated)
        if m.magic == 1 and inner:
            first = m.offset - inner[-1].offset  # v1: the wrapper holds the last inner offset
            for i in inner:
                i.offset += first
                if m.attributes & _LOG_APPEND_TIME_BIT:
                    i.timestamp = m.timestamp
        out.extend(inner)
    return out


def to_batch(buf: bytes) -> bytes:
    """One record batch (magic 2, base offset 0) from a Produce v0-v2 message set."""
    wrappers = read_message_set(buf)
    if not wrappers:
        raise InvalidRecordError("produce request carries no complete message")
    codec = next((m.codec for m in wrappers if m.codec != COMPRESSION_NONE), COMPRESSION_NONE)
    messages = _expand(wrappers)
    records = [rb.Record(i, m.timestamp if m.magic >= 1 else rb.NO_TIMESTAMP, m.key, m.value)
               for i, m in enumerate(messages)]
    return rb.encode_batch(records, compression=codec)


def _encode_message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_I64.pack(timestamp))
    for field in (key, value):
        parts.append(_I32.pack(-1) if field is None else _I32.pack(len(field)) + field)
    rest = b"".join(parts)
    return struct.pack(">I", zlib.crc32(rest)) + rest


def _entry(offset: int, message: bytes) -> bytes:
    return _ENTRY_HEAD.pack(offset, len(message)) + message


def has_zstd(data: bytes) -> bool:
    return any(header.attributes & _CODEC_MASK == COMPRESSION_ZSTD for _, header in rb.iter_batches(data))


def down_convert(data: bytes, magic: int) -> bytes:
    """Record batches as read from the log, converted to a message set of `magic` (0 or 1)."""
    out: list[bytes] = []
    for header, records in rb.decode_batches(data):
        if header.is_control or not records:
            continue
        log_append = bool(header.attributes & _LOG_APPEND_TIME_BIT)
        ts_bit = _LOG_APPEND_TIME_BIT if magic == 1 and log_append else 0

        def ts(record) -> int:
            return header.max_timestamp if log_append else record.timestamp

        codec = header.attributes & _CODEC_MASK
        if codec == COMPRESSION_NONE:
            for r in records:
                out.append(_entry(r.offset, _encode_message(magic, ts_bit, ts(r), r.key, r.value)))
            continue
        last = records[-1].offset
        inner = b"".join(
            _entry(r.offset - records[0].offset if magic == 1 else r.offset,
                   _encode_message(magic, ts_bit, ts(r), r.key, r.value))
            for r in records
        )
        wrapper_ts = header.max_timestamp
        out.append(_entry(last, _encode_message(magic, codec | ts_bit, wrapper_ts, None, compress(codec, inner))))
    return b"".join(out)
