"""Record batch v2 (magic 2): parse, validate, rewrite, decode and encode.

The layout is in /work/shared/kafka-messages/NOTES.md section 3. The broker stores batches exactly as
received; the only in-place rewrites are baseOffset and partitionLeaderEpoch (outside the CRC) and,
for LogAppendTime topics, the timestamp-type bit + maxTimestamp (which forces a new CRC).

This module is pure: no asyncio, no broker imports, so the coordinator, tests and benchmarks can use it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from .crc import crc32c

from .compression import (  # noqa: F401  (re-exported: callers name codecs here)
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    InflatedTooLarge,
    PartAllowance,
    TooManyParts,
    compress,
    decompress,
    inflated_bound,
    inflated_size,
)
from .errors import (  # noqa: F401  (re-exported: callers catch them from here)
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionError,
)

# --- layout -------------------------------------------------------------------------------------------

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER_STRUCT.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch that batchLength does not count
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers everything from here to the end of the batch
MAX_TIMESTAMP_OFFSET = 35
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batchLength below this cannot hold a header

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1


# --- header -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_MASK else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))


def batch_size_at(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Size of the batch starting at `pos`, or None when fewer than 12 bytes remain."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch; a partial trailing batch ends the iteration.

    A batchLength too small to hold a header is not "partial" but corrupt, and raises. The magic byte
    and CRC are not checked here (see `check_batch`), so callers that read their own log stay fast.
    """
    pos = 0
    n = len(buf)
    while n - pos >= LOG_OVERHEAD:
        batch_length = _I32.unpack_from(buf, pos + 8)[0]
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch at position {pos} has impossible batchLength {batch_length}")
        size = batch_length + LOG_OVERHEAD
        if pos + size > n:
            return
        yield pos, BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
        pos += size


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def check_batch(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    """The integrity checks every stored or received batch must pass: magic 2 and a matching CRC."""
    if header.magic != 2:
        raise CorruptRecordError(f"batch at position {pos} has magic {header.magic}, expected 2")
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at position {pos} has CRC {header.crc:#010x} but its content hashes to {actual:#010x}"
        )


def read_checked_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`, the batch whole within `buf` and its magic and CRC checked."""
    header = read_header(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(buf):
        raise CorruptRecordError(f"batch at position {pos} is truncated")
    check_batch(buf, pos, header)
    return header


def batch_records(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, max_inflated: int | None = None,
                  parts: PartAllowance | None = None) -> tuple[bytes | bytearray | memoryview, int, int]:
    """The records of the batch at `pos` as (data, start, stop): `buf` itself for an uncompressed
    batch, no copy; else inflated within `max_inflated` (default: the broker's bound), stepping
    through at most `parts` (compression.py)."""
    if header.compression == COMPRESSION_NONE:
        return buf, pos + HEADER_SIZE, pos + header.size
    data = decompress(header.compression, bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size]),
                      max_inflated, parts)
    return data, 0, len(data)


# --- Produce validation -------------------------------------------------------------------------------


def validate_produced_batches(
    buf: bytes | bytearray | memoryview,
    *,
    single_batch: bool = True,
    allow_zstd: bool = True,
    allow_control: bool = False,
) -> list[BatchHeader]:
    """Check a Produce partition's records the way Kafka does before it assigns offsets.

    `single_batch` is Kafka's "exactly one batch per partition" rule for Produce v3+; internal writers
    (the coordinator) may append several. `allow_zstd=False` is for Produce v < 7. `allow_control` is
    for the transaction coordinator's commit/abort markers (control batches carry no sequence).
    """
    n = len(buf)
    if n == 0:
        raise InvalidRecordError("produce request carries no record batch")
    # A v0/v1 message set puts its magic byte at the same position (offset 8 + size 4 + crc 4 = 16).
    # Kafka's ProduceRequest.validateRecords rejects a non-v2 first batch on Produce v3+ with
    # InvalidRecordException, which Errors maps to INVALID_RECORD (87). UNSUPPORTED_FOR_MESSAGE_FORMAT
    # (43) was for down-converting to an old log format version, which 4.x logs no longer have.
    if n > MAGIC_OFFSET and buf[MAGIC_OFFSET] != 2:
        raise InvalidRecordError(
            f"produce requests may only carry record batches with magic 2, got magic {buf[MAGIC_OFFSET]}"
        )
    headers: list[BatchHeader] = []
    pos = 0
    while pos < n:
        if n - pos < HEADER_SIZE:
            raise CorruptRecordError(f"{n - pos} trailing bytes at position {pos} are too short for a batch")
        header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > n:
            raise CorruptRecordError(
                f"batch at position {pos} declares batchLength {header.batch_length} "
                f"but {n - pos - LOG_OVERHEAD} bytes follow"
            )
        if header.magic != 2:
            raise InvalidRecordError(f"batch at position {pos} has magic {header.magic}, expected 2")
        check_batch(buf, pos, header)
        if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
            raise InvalidRecordError(
                f"batch declares {header.records_count} records but lastOffsetDelta {header.last_offset_delta}"
            )
        if header.is_control and not allow_control:
            raise InvalidRecordError("clients may not write control batches")
        if header.producer_id >= 0 and header.base_sequence < 0 and not header.is_control:
            raise InvalidRecordError(
                f"batch with producerId {header.producer_id} has invalid baseSequence {header.base_sequence}"
            )
        codec = header.compression
        if codec > COMPRESSION_ZSTD:
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
        if codec == COMPRESSION_ZSTD and not allow_zstd:
            raise UnsupportedCompressionError("zstd needs Produce v7 or later")
        headers.append(header)
        pos += header.size
        if single_batch and pos < n:
            raise InvalidRecordError("produce requests may carry exactly one record batch per partition")
    return headers


# --- in-place rewrites --------------------------------------------------------------------------------


def assign_offsets(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Stamp the broker-owned fields; neither is under the CRC, so the CRC stays valid."""
    _I64.pack_into(buf, pos, base_offset)
    _I32.pack_into(buf, pos + 12, leader_epoch)


OFFSETS_PREFIX_SIZE = 16  # baseOffset, batchLength, partitionLeaderEpoch
_OFFSETS_PREFIX = struct.Struct(">qii")


def offsets_prefix(buf: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int) -> bytes:
    """The batch's first 16 bytes with the broker-owned fields stamped (as `assign_offsets`), for a
    writer that sends them ahead of the unchanged rest instead of copying the batch to rewrite it."""
    return _OFFSETS_PREFIX.pack(base_offset, _I32.unpack_from(buf, 8)[0], leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, now_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = now, then re-sign it (both are under the CRC)."""
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | _TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    size = _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def set_create_time(buf: bytearray | memoryview, pos: int) -> None:
    """Clear the batch's LogAppendTime attribute, then re-sign it: what Kafka stores of a producer's
    batch marked LogAppendTime on a CreateTime topic (the records keep their own timestamps)."""
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes & ~_TIMESTAMP_TYPE_MASK)
    size = _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


# --- records ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _read_zigzag(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Multi-byte zigzag varint/varlong (the one-byte case is inlined by callers)."""
    shift = 0
    raw = 0
    limit = pos + 10
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if pos >= limit:
            raise CorruptRecordError("varint longer than 10 bytes")


def _read_headers(data: bytes, pos: int, count: int) -> tuple[list[tuple[str, bytes | None]], int]:
    if count < 0:
        raise InvalidRecordError(f"negative header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = _read_zigzag(data, pos)
        if klen < 0:
            raise InvalidRecordError("record header key may not be null")
        key = data[pos : pos + klen].decode("utf-8")
        pos += klen
        vlen, pos = _read_zigzag(data, pos)
        if vlen < 0:
            value = None
        else:
            value = data[pos : pos + vlen]
            pos += vlen
        headers.append((key, value))
    return headers, pos


def _decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, fixed_timestamp: int | None
) -> list[Record]:
    # Hot loop: every varint takes an inlined one-byte fast path; Kafka's small deltas and lengths
    # (< 64 after zigzag) almost always fit in one byte.
    records: list[Record] = []
    append = records.append
    slow = _read_zigzag
    n = len(data)
    pos = 0
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = slow(data, pos)
        end = pos + length
        if length <= 0 or end > n:
            raise CorruptRecordError(f"record length {length} runs past the batch's records")
        pos += 1  # record attributes: unused
        b = data[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:  # two-byte case: deltas past 63 in batches of a few hundred
            b = (b & 0x7F) | (data[pos + 1] << 7)
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = slow(data, pos)
        b = data[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:  # two-byte case: deltas past 63 in batches of a few hundred
            b = (b & 0x7F) | (data[pos + 1] << 7)
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            offset_delta, pos = slow(data, pos)
        b = data[pos]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            klen, pos = slow(data, pos)
        if klen < 0:
            key = None
        else:
            key = data[pos : pos + klen]
            pos += klen
        b = data[pos]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            vlen, pos = slow(data, pos)
        if vlen < 0:
            value = None
        else:
            value = data[pos : pos + vlen]
            pos += vlen
        b = data[pos]
        if b == 0:
            headers: list[tuple[str, bytes | None]] = []
            pos += 1
        else:
            hcount, pos = slow(data, pos)
            headers, pos = _read_headers(data, pos, hcount)
        if pos != end:
            raise InvalidRecordError(f"record declares {length} bytes but its fields end {pos - end} bytes off")
        append(
            Record(
                base_offset + offset_delta,
                base_timestamp + ts_delta if fixed_timestamp is None else fixed_timestamp,
                key,
                value,
                headers,
            )
        )
    if pos != n:
        raise InvalidRecordError(f"{n - pos} bytes remain after the batch's declared {count} records")
    return records


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0, *,
                 max_inflated: int | None = None) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at `pos` (CRC checked) into absolute-offset, absolute-timestamp records.

    In a LogAppendTime batch every record's timestamp is the batch's maxTimestamp, as in Kafka.
    A compressed batch inflating past `max_inflated` bytes (default: the broker's bound, see
    compression.py) raises InflatedTooLarge.
    """
    header = read_checked_header(buf, pos)
    if header.records_count < 0:
        raise InvalidRecordError(f"negative record count {header.records_count}")
    body = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    data = decompress(header.compression, body, max_inflated)
    fixed = header.max_timestamp if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else None
    try:
        records = _decode_records(data, header.records_count, header.base_offset, header.base_timestamp, fixed)
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    except UnicodeDecodeError as exc:
        raise InvalidRecordError("record header key is not UTF-8") from exc
    return header, records


def decode_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode every complete batch of a buffer (a fetched or stored chunk); a partial tail is skipped."""
    for pos, _ in iter_batches(buf):
        yield decode_batch(buf, pos)


# --- encoding -----------------------------------------------------------------------------------------

_ONE_BYTE_ZIGZAG = [bytes(((v << 1) ^ (v >> 63),)) for v in range(0, 64)]
_ONE_BYTE_ZIGZAG_NEG = [bytes((((-v) << 1) ^ ((-v) >> 63),)) for v in range(0, 65)]


def zigzag_varint(value: int) -> bytes:
    if 0 <= value < 64:
        return _ONE_BYTE_ZIGZAG[value]
    if -64 <= value < 0:
        return _ONE_BYTE_ZIGZAG_NEG[-value]
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _encode_record(offset_delta: int, ts_delta: int, record: Record) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += zigzag_varint(ts_delta)
    body += zigzag_varint(offset_delta)
    for blob in (record.key, record.value):
        if blob is None:
            body += b"\x01"  # zigzag(-1)
        else:
            body += zigzag_varint(len(blob))
            body += blob
    body += zigzag_varint(len(record.headers))
    for hkey, hvalue in record.headers:
        encoded = hkey.encode("utf-8")
        body += zigzag_varint(len(encoded))
        body += encoded
        if hvalue is None:
            body += b"\x01"
        else:
            body += zigzag_varint(len(hvalue))
            body += hvalue
    return zigzag_varint(len(body)) + bytes(body)


def encode_keyed_batch(pairs: Sequence[tuple[bytes, bytes | None]], timestamp: int) -> bytes:
    """The batch `encode_batch` builds from records at offsets 0, 1, ... all stamped `timestamp`,
    with these keys and values (None: a tombstone) and no headers, packed in one pass (a test
    compares them): every offset commit a coordinator writes passes here."""
    if not pairs:
        raise ValueError("a record batch needs at least one record")
    parts: list[bytes] = []
    for i, (key, value) in enumerate(pairs):
        # attributes 0, timestamp delta 0, offset delta, key, value (or null), no headers
        body = b"".join((b"\x00\x00", zigzag_varint(i), zigzag_varint(len(key)), key,
                         b"\x01" if value is None else zigzag_varint(len(value)), value or b"", b"\x00"))
        parts.append(zigzag_varint(len(body)))
        parts.append(body)
    payload = b"".join(parts)
    out = bytearray(HEADER_SIZE + len(payload))
    HEADER_STRUCT.pack_into(out, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, 0, 0, len(pairs) - 1,
                            timestamp, timestamp, NO_PRODUCER_ID, -1, NO_SEQUENCE, len(pairs))
    out[HEADER_SIZE:] = payload
    _U32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = COMPRESSION_NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
) -> bytes:
    """Build one batch; each record's offset delta is `record.offset - base_offset`.

    `last_offset_delta` defaults to the last record's delta; the log cleaner passes the original one so a
    compacted batch keeps covering the same offset range (Kafka keeps it for the same reason).
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    max_timestamp = base_timestamp
    parts: list[bytes] = []
    prev_delta = -1
    for record in records:
        delta = record.offset - base_offset
        if delta <= prev_delta:
            raise ValueError(f"record offsets must increase from base_offset; got delta {delta} after {prev_delta}")
        prev_delta = delta
        if record.timestamp > max_timestamp:
            max_timestamp = record.timestamp
        parts.append(_encode_record(delta, record.timestamp - base_timestamp, record))
    if last_offset_delta is None:
        last_offset_delta = prev_delta
    elif last_offset_delta < prev_delta:
        raise ValueError("last_offset_delta is below the last record's delta")
    payload = compress(compression, b"".join(parts))
    attributes = compression & _COMPRESSION_MASK
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    out = bytearray(HEADER_SIZE + len(payload))
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out[HEADER_SIZE:] = payload
    _U32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)
