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


def test_the_inflated_bound_holds_for_the_whole_message_set(monkeypatch) -> None:
    """Each gzip wrapper inflates to 40 kB, under a 64 kB bound; three of them pass it together and
    are refused before more is held (each wrapper was once bounded alone: a few kB of wrappers held GBs)."""
    from kbroker.protocol import compression
    from kbroker.protocol.errors import ErrorCode, KafkaError

    monkeypatch.setattr(compression, "_bound", 64 * 1024)
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=2**20)  # gzip
    builder.append(0, timestamp=1, key=None, value=bytes(40 * 1024))
    wrapper = bytes(builder.build())
    assert len(legacy_records.to_batch(wrapper)) > 0  # one wrapper: within the bound
    with pytest.raises(KafkaError) as refused:
        legacy_records.to_batch(wrapper * 3)
    assert refused.value.code is ErrorCode.MESSAGE_TOO_LARGE
