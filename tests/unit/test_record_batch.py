"""Record batch v2: the NOTES.md test vector, codec round trips, kafka-python interop, Produce checks."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    assign_offsets,
    check_batch,
    decode_batch,
    encode_batch,
    iter_batches,
    read_header,
    set_log_append_time,
    validate_produced_batches,
)

VECTOR = bytes.fromhex(
    "00000000000000000000003affffffff02e99b8dd80000000000000000018bcfe568000000018bcfe56800"
    "ffffffffffffffffffffffffffff0000000110000000026b027600"
)
ALL_CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


def _codes(exc_info: pytest.ExceptionInfo[KafkaError]) -> ErrorCode:
    return exc_info.value.code


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_notes_vector_encodes_byte_for_byte() -> None:
    encoded = encode_batch([Record(0, 1700000000000, b"k", b"v")])
    assert len(encoded) == 70
    assert encoded == VECTOR


def test_notes_vector_decodes() -> None:
    header, records = decode_batch(VECTOR)
    assert header.crc == 0xE99B8DD8
    assert (header.base_offset, header.magic, header.records_count, header.size) == (0, 2, 1, 70)
    assert header.producer_id == -1 and header.partition_leader_epoch == -1
    assert header.compression == COMPRESSION_NONE and not header.is_control and not header.is_transactional
    assert (header.last_offset, header.next_offset) == (0, 1)
    assert records == [Record(0, 1700000000000, b"k", b"v", [])]


def test_assign_offsets_keeps_crc_valid_but_max_timestamp_breaks_it() -> None:
    buf = bytearray(VECTOR)
    assign_offsets(buf, 0, 12345, 7)
    header = read_header(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (12345, 7)
    check_batch(buf, 0, header)
    _, records = decode_batch(buf)
    assert records[0].offset == 12345

    struct.pack_into(">q", buf, 35, 1700000000001)  # maxTimestamp is under the CRC
    with pytest.raises(KafkaError) as exc_info:
        check_batch(buf, 0, read_header(buf))
    assert _codes(exc_info) == ErrorCode.CORRUPT_MESSAGE


def test_set_log_append_time_resigns_and_overrides_record_timestamps() -> None:
    buf = bytearray(encode_batch([Record(0, 10, b"a", b"1"), Record(1, 20, b"b", b"2")]))
    set_log_append_time(buf, 0, 99_000)
    header, records = decode_batch(buf)  # CRC still checks
    assert header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    assert header.max_timestamp == 99_000
    assert [r.timestamp for r in records] == [99_000, 99_000]


# --- round trips --------------------------------------------------------------------------------------

_blob = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=40))), max_size=3)


@st.composite
def _record_lists(draw: st.DrawFn) -> tuple[int, list[Record]]:
    base_offset = draw(st.integers(min_value=0, max_value=2**40))
    base_ts = draw(st.integers(min_value=0, max_value=2**42))
    gaps = draw(st.lists(st.integers(min_value=1, max_value=70_000), min_size=1, max_size=40))
    records = []
    offset = base_offset
    for i, gap in enumerate(gaps):
        if i:
            offset += gap
        ts = base_ts + draw(st.integers(min_value=-(2**33), max_value=2**33))
        records.append(Record(offset, ts, draw(_blob), draw(_blob), draw(_headers)))
    return base_offset, records


@pytest.mark.parametrize("codec", ALL_CODECS)
@settings(max_examples=40, deadline=None)
@given(data=_record_lists())
def test_round_trip_every_codec(codec: int, data: tuple[int, list[Record]]) -> None:
    base_offset, records = data
    encoded = encode_batch(records, base_offset=base_offset, compression=codec, producer_id=5, base_sequence=3)
    header, decoded = decode_batch(encoded)
    assert decoded == records
    assert header.compression == codec
    assert header.base_offset == base_offset
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert header.last_offset == records[-1].offset
    assert (header.producer_id, header.base_sequence) == (5, 3)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_large_batch_spans_several_compression_blocks(codec: int) -> None:
    # > 64 KiB of values crosses snappy-java's 32 KiB and LZ4's 64 KiB block boundaries
    records = [Record(i, 1_000 + i, str(i).encode(), bytes([i % 251]) * 700) for i in range(300)]
    _, decoded = decode_batch(encode_batch(records, compression=codec))
    assert decoded == records


def test_snappy_is_xerial_framed_and_raw_snappy_is_accepted() -> None:
    import cramjam

    records = [Record(0, 5, b"k", b"value" * 10)]
    encoded = encode_batch(records, compression=COMPRESSION_SNAPPY)
    assert encoded[HEADER_SIZE : HEADER_SIZE + 8] == b"\x82SNAPPY\x00"

    # librdkafka-style raw snappy payload: re-wrap the same records body
    plain = encode_batch(records)
    raw_payload = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    rebuilt = bytearray(plain[:HEADER_SIZE] + raw_payload)
    struct.pack_into(">i", rebuilt, 8, len(rebuilt) - 12)
    struct.pack_into(">h", rebuilt, 21, COMPRESSION_SNAPPY)
    struct.pack_into(">I", rebuilt, 17, crc32c(bytes(rebuilt[21:])))
    _, decoded = decode_batch(rebuilt)
    assert decoded == records


# --- kafka-python interop -----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])  # codecs kafka-python has here
def test_kafka_python_builder_output_decodes_with_ours(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    expected = []
    for i in range(50):
        key = None if i % 7 == 0 else b"key%d" % i
        value = None if i % 11 == 0 else b"value-%d" % i * (i + 1)
        headers = [("h%d" % i, b"x" * i)] if i % 3 == 0 else []
        builder.append(i, 1_700_000_000_000 + i * 1000, key, value, headers)
        expected.append(Record(i, 1_700_000_000_000 + i * 1000, key, value, headers))
    buf = bytes(builder.build())
    headers = validate_produced_batches(buf)
    assert headers[0].records_count == 50
    _, decoded = decode_batch(buf)
    assert decoded == expected


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])
def test_our_batches_decode_with_kafka_python(codec: int) -> None:
    records = [
        Record(100 + i, 1_700_000_000_000 + i, b"k%d" % i, None if i == 3 else b"v" * i, [("a", b"b"), ("n", None)])
        for i in range(20)
    ]
    encoded = encode_batch(records, base_offset=100, compression=codec)
    theirs = DefaultRecordBatch(encoded)
    assert theirs.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    assert got == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


# --- Produce validation -------------------------------------------------------------------------------


def _expect(buf: bytes | bytearray, code: ErrorCode, **kwargs: bool) -> None:
    with pytest.raises(KafkaError) as exc_info:
        validate_produced_batches(buf, **kwargs)
    assert _codes(exc_info) == code


def test_valid_batch_passes_validation() -> None:
    [header] = validate_produced_batches(VECTOR)
    assert header.records_count == 1


def test_corrupt_crc_is_corrupt_message() -> None:
    buf = bytearray(VECTOR)
    buf[-1] ^= 0xFF
    _expect(buf, ErrorCode.CORRUPT_MESSAGE)


def test_truncated_or_short_batch_is_corrupt_message() -> None:
    _expect(VECTOR[:-5], ErrorCode.CORRUPT_MESSAGE)
    _expect(VECTOR[:40], ErrorCode.CORRUPT_MESSAGE)
    bad_length = bytearray(VECTOR)
    struct.pack_into(">i", bad_length, 8, 10)
    _expect(bad_length, ErrorCode.CORRUPT_MESSAGE)


def _resigned(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def test_bad_record_count_is_invalid_record() -> None:
    buf = bytearray(VECTOR)
    struct.pack_into(">i", buf, 57, 2)  # recordsCount 2 but lastOffsetDelta 0
    _expect(_resigned(buf), ErrorCode.INVALID_RECORD)
    buf = bytearray(VECTOR)
    struct.pack_into(">i", buf, 57, 0)
    struct.pack_into(">i", buf, 23, -1)
    _expect(_resigned(buf), ErrorCode.INVALID_RECORD)


def test_magic_1_message_set_is_invalid_record() -> None:
    # A v1 message: offset, size, crc, magic=1, attributes, timestamp, key, value
    body = struct.pack(">bbqi", 1, 0, 1_700_000_000_000, -1) + struct.pack(">i", 1) + b"v"
    message = struct.pack(">qiI", 0, len(body) + 4, 0) + body
    _expect(message, ErrorCode.INVALID_RECORD)


def test_control_batch_and_missing_sequence_are_invalid_record() -> None:
    _expect(encode_batch([Record(0, 1, b"k", b"v")], is_control=True), ErrorCode.INVALID_RECORD)
    _expect(encode_batch([Record(0, 1, b"k", b"v")], producer_id=9, base_sequence=-1), ErrorCode.INVALID_RECORD)
    validate_produced_batches(encode_batch([Record(0, 1, b"k", b"v")], producer_id=9, producer_epoch=0, base_sequence=0))


def test_two_batches_rejected_for_produce_but_allowed_internally() -> None:
    two = VECTOR + encode_batch([Record(1, 2, None, b"x")], base_offset=1)
    _expect(two, ErrorCode.INVALID_RECORD)
    assert len(validate_produced_batches(two, single_batch=False)) == 2


def test_zstd_below_produce_v7_is_unsupported_compression() -> None:
    batch = encode_batch([Record(0, 1, b"k", b"v")], compression=COMPRESSION_ZSTD)
    _expect(batch, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, allow_zstd=False)
    validate_produced_batches(batch)


def test_empty_records_is_invalid_record() -> None:
    _expect(b"", ErrorCode.INVALID_RECORD)


def test_record_length_mismatch_is_detected_on_decode() -> None:
    buf = bytearray(VECTOR)
    buf[61] = 0x12  # record length 9 instead of 8 (zigzag)
    with pytest.raises(KafkaError) as exc_info:
        decode_batch(_resigned(buf))
    assert _codes(exc_info) in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)


# --- iteration ----------------------------------------------------------------------------------------


def test_iter_batches_stops_at_partial_trailing_batch() -> None:
    first = encode_batch([Record(0, 1, b"a", b"1")])
    second = encode_batch([Record(1, 2, b"b", b"2"), Record(2, 3, b"c", b"3")], base_offset=1)
    stream = first + second
    assert [(pos, h.base_offset) for pos, h in iter_batches(stream)] == [(0, 0), (len(first), 1)]
    for cut in (1, 11, 12, 30, len(second) - 1):
        partial = stream[: len(first) + cut]
        assert [pos for pos, _ in iter_batches(partial)] == [0]
    assert list(iter_batches(first[:11])) == []


def test_iter_batches_raises_on_impossible_length() -> None:
    buf = bytearray(VECTOR * 2)
    struct.pack_into(">i", buf, 70 + 8, 3)
    with pytest.raises(KafkaError) as exc_info:
        list(iter_batches(buf))
    assert _codes(exc_info) == ErrorCode.CORRUPT_MESSAGE


def test_encode_rejects_non_increasing_offsets() -> None:
    with pytest.raises(ValueError):
        encode_batch([Record(5, 1, None, b"a"), Record(5, 1, None, b"b")], base_offset=5)
    with pytest.raises(ValueError):
        encode_batch([])
