"""Control records' exact bytes, and what a read may return (cut at the high watermark or the LSO)."""

from __future__ import annotations

import struct

from kbroker.broker.storage.log.partition_log import cut_before_offset
from kbroker.protocol import record_batch as rb
from kbroker.protocol.control_records import ABORT, COMMIT, encode_marker, marker_of


def test_marker_is_a_control_batch_in_kafkas_format():
    raw = encode_marker(producer_id=9, producer_epoch=3, commit=True, coordinator_epoch=7, timestamp_ms=1234)
    header, [record] = rb.decode_batch(raw)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 3, -1)
    assert header.attributes & 0x30 == 0x30
    assert record.key == struct.pack(">hh", 0, 1)  # ControlRecordType v0, COMMIT
    assert record.value == struct.pack(">hi", 0, 7)  # EndTransactionMarker v0, coordinator epoch
    assert marker_of(raw) == (COMMIT, 7)
    assert marker_of(encode_marker(9, 3, False, 0, 1))[0] == ABORT
    rb.check_batch(raw, 0, header)  # the CRC is right


def test_cut_before_offset_keeps_whole_batches_below_the_limit():
    batches = []
    offset = 0
    for n in (3, 2, 4):
        b = bytearray(rb.encode_batch([rb.Record(i, 1, None, b"v") for i in range(n)]))
        rb.assign_offsets(b, 0, offset, 0)
        batches.append(bytes(b))
        offset += n
    data = b"".join(batches)
    assert cut_before_offset(data, 9) == data
    assert cut_before_offset(data, 5) == batches[0] + batches[1]
    assert cut_before_offset(data, 3) == batches[0]
    assert cut_before_offset(data, 0) == b""
