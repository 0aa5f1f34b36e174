"""Kafka's control records: the commit and abort markers that end a transaction in a partition.

A marker is a batch of one record with the transactional (0x10) and control (0x20) attribute bits,
the producer's id and epoch, and base sequence -1. Its key is ControlRecordType: version int16 (0)
and type int16 (0 ABORT, 1 COMMIT); its value is EndTransactionMarker: version int16 (0) and the
coordinator epoch int32. Clients skip control batches, using them only to drop aborted records.
"""

from __future__ import annotations

import struct

from . import record_batch as rb

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


def encode_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                  timestamp_ms: int) -> bytes:
    record = rb.Record(
        offset=0, timestamp=timestamp_ms,
        key=_KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT),
        value=_VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch),
    )
    return rb.encode_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=rb.NO_SEQUENCE, is_transactional=True, is_control=True)


def control_type(key: bytes | None) -> int | None:
    """The ControlRecordType of a control record's key, or None when it is not one we know."""
    if key is None or len(key) < _KEY.size:
        return None
    version, kind = _KEY.unpack_from(key)
    return kind if version >= 0 else None


def marker_of(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of the control batch at `pos`, or None if it holds no marker."""
    header, records = rb.decode_batch(buf, pos)
    if not header.is_control or not records:
        return None
    kind = control_type(records[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    value = records[0].value or b""
    epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return kind, epoch
