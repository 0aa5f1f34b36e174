"""`__transaction_state` record formats: Kafka's TransactionLogKey and TransactionLogValue.

Written here from the formats' facts (not generated from vendored JSON; Kafka keeps these schemas in
its transaction-coordinator module, which this repository does not vendor):

* key: version int16 (0), then TransactionalId as a string (int16 length + UTF-8).
* value v0: version int16, ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
  TransactionStatus int8, TransactionPartitions nullable array (int32 count, -1 for null) of
  {Topic string, PartitionIds array of int32}, TransactionLastUpdateTimestampMs int64,
  TransactionStartTimestampMs int64.
* value v1 is the flexible form of the same fields (compact strings and arrays, unsigned-varint
  lengths + 1, a tagged-field section per struct) with tagged PreviousProducerId (tag 0),
  NextProducerId (tag 1), ClientTransactionVersion (tag 2) and NextProducerEpoch (tag 3, read and
  ignored). Kafka writes v1 once transaction.version 1 or more is finalized (TransactionVersion's
  transactionLogValueVersion), v0 before; so does kbroker (`TxnLogValue.version`), and reads both.
* a tombstone (null value) removes the transactional id.

Status bytes are Kafka's TransactionState ids (Empty 0 ... PrepareEpochFence 7).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..wire import encode_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

KEY_VERSION = 0
VALUE_VERSION = 0


class TxnLogFormatError(ValueError):
    pass


@dataclass(slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]] | None = field(default_factory=dict)  # None encodes a null array
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1  # v1 tagged fields, kept when read
    next_producer_id: int = -1
    client_transaction_version: int = 0
    version: int = VALUE_VERSION  # the version to write (and the one read)


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """One `__transaction_state` record: a transactional id's metadata, or None (a tombstone)."""

    transactional_id: str
    value: TxnLogValue | None


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(raw: bytes) -> str:
    r = _Reader(raw)
    version = r.i16()
    if version != KEY_VERSION:
        raise TxnLogFormatError(f"unknown TransactionLogKey version {version}")
    return r.string()


def encode_value(value: TxnLogValue) -> bytes:
    if value.version == 1:
        return _encode_v1(value)
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I64.pack(value.producer_id) + _I16.pack(value.producer_epoch) + _I32.pack(value.timeout_ms)
    out += _I8.pack(value.status)
    if value.partitions is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(value.partitions))
        for topic, ids in sorted(value.partitions.items()):
            out += _string(topic) + _I32.pack(len(ids))
            for p in sorted(ids):
                out += _I32.pack(p)
    out += _I64.pack(value.last_update_ms) + _I64.pack(value.start_ms)
    return bytes(out)


def _compact_string(text: str) -> bytes:
    raw = text.encode()
    return encode_uvarint(len(raw) + 1) + raw


def _encode_v1(value: TxnLogValue) -> bytes:
    """The flexible form; tagged fields only when not their default, as Kafka's generated writer."""
    out = bytearray(_I16.pack(1))
    out += _I64.pack(value.producer_id) + _I16.pack(value.producer_epoch) + _I32.pack(value.timeout_ms)
    out += _I8.pack(value.status)
    if value.partitions is None:
        out += encode_uvarint(0)
    else:
        out += encode_uvarint(len(value.partitions) + 1)
        for topic, ids in sorted(value.partitions.items()):
            out += _compact_string(topic) + encode_uvarint(len(ids) + 1)
            for p in sorted(ids):
                out += _I32.pack(p)
            out += encode_uvarint(0)  # the partition entry's (empty) tagged fields
    out += _I64.pack(value.last_update_ms) + _I64.pack(value.start_ms)
    tags = []
    if value.previous_producer_id != -1:
        tags.append((0, _I64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tags.append((1, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((2, _I16.pack(value.client_transaction_version)))
    out += encode_uvarint(len(tags))
    for tag, data in tags:
        out += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return bytes(out)


def decode_value(raw: bytes | None) -> TxnLogValue | None:
    if raw is None:
        return None
    r = _Reader(raw)
    version = r.i16()
    if version == 0:
        return _decode_v0(r)
    if version == 1:
        return _decode_v1(r)
    raise TxnLogFormatError(f"unknown TransactionLogValue version {version}")


def _decode_v0(r: _Reader) -> TxnLogValue:
    pid, epoch, timeout, status = r.i64(), r.i16(), r.i32(), r.i8()
    count = r.i32()
    partitions: dict[str, list[int]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = r.string()
            partitions[topic] = [r.i32() for _ in range(r.i32())]
    return TxnLogValue(pid, epoch, timeout, status, partitions, r.i64(), r.i64())


def _decode_v1(r: _Reader) -> TxnLogValue:
    pid, epoch, timeout, status = r.i64(), r.i16(), r.i32(), r.i8()
    count = r.uvarint() - 1
    partitions: dict[str, list[int]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = r.compact_string()
            partitions[topic] = [r.i32() for _ in range(r.uvarint() - 1)]
            r.skip_tags()
    value = TxnLogValue(pid, epoch, timeout, status, partitions, r.i64(), r.i64(), version=1)
    for tag, data in r.tags():
        if tag == 0 and len(data) == 8:
            value.previous_producer_id = _I64.unpack(data)[0]
        elif tag == 1 and len(data) == 8:
            value.next_producer_id = _I64.unpack(data)[0]
        elif tag == 2 and len(data) == 2:
            value.client_transaction_version = _I16.unpack(data)[0]
    return value


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = bytes(buf)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise TxnLogFormatError("truncated transaction log record")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise TxnLogFormatError("null string in a transaction log record")
        return self._take(n).decode()

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise TxnLogFormatError("varint too long")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise TxnLogFormatError("null string in a transaction log record")
        return self._take(n).decode()

    def tags(self) -> list[tuple[int, bytes]]:
        return [(self.uvarint(), self._take(self.uvarint())) for _ in range(self.uvarint())]

    def skip_tags(self) -> None:
        self.tags()
