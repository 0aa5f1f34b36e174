"""Message formats v0/v1 against kafka-python's own implementation of them (kafka.record): what we
down-convert it reads, and what it builds we convert to record batches."""

from __future__ import annotations

import pytest

from kbroker.protocol import legacy_records
from kbroker.protocol import record_batch as rb
from kbroker.protocol.compression import COMPRESSION_GZIP, COMPRESSION_NONE

pytest.importorskip("kafka")
from kafka.record import MemoryRecords  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402

RECORDS = [rb.Record(10 + i, 1700000000000 + i, b"k%d" % i, b"v%d" % i * 50) for i in range(5)]


def _read_with_kafka_python(data: bytes):
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])
@pytest.mark.parametrize("magic", [0, 1])
def test_down_converted_batches_read_back_with_kafka_python(codec, magic):
    later = [rb.Record(r.offset + 5, r.timestamp, r.key, r.value) for r in RECORDS]
    batches = rb.encode_batch(RECORDS, base_offset=10, compression=codec) + rb.encode_batch(
        later, base_offset=15, compression=codec)
    converted = legacy_records.down_convert(batches, magic)
    got = _read_with_kafka_python(converted)
    assert got == [(r.offset, r.timestamp if magic == 1 else None, r.key, r.value) for r in RECORDS + later]
    messages = legacy_records.read_message_set(converted)
    assert {m.magic for m in messages} == {magic}
    assert {m.codec for m in messages} == {codec}  # a compressed batch stays compressed, one wrapper each


def test_control_batches_are_dropped():
    control = rb.encode_batch([rb.Record(0, 1, b"\x00\x00\x00\x00", b"")], is_control=True, producer_id=1,
                              producer_epoch=0, is_transactional=True)
    data = rb.encode_batch(RECORDS[:1], base_offset=10)
    assert _read_with_kafka_python(legacy_records.down_convert(control + data, 1)) == [
        (10, RECORDS[0].timestamp, b"k0", RECORDS[0].value)]


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_message_sets_become_one_batch(codec, magic):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, r in enumerate(RECORDS):
        builder.append(i, timestamp=r.timestamp if magic else None, key=r.key, value=r.value)
    batch = legacy_records.to_batch(bytes(builder.build()))
    ((header, records),) = list(rb.decode_batches(batch))
    assert header.magic == 2 and header.attributes & 0x07 == codec
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (i, r.timestamp if magic else rb.NO_TIMESTAMP, r.key, r.value) for i, r in enumerate(RECORDS)]
