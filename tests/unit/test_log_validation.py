"""broker/storage/log/validation.py: Kafka's LogValidator rules for a client's batches, on real encoded
batches (CreateTime bounds, the LogAppendTime attribute, sizes, compacted keys)."""

from __future__ import annotations

import pytest

from kbroker.bench.hostile_produce import raw_batch, tiny_records
from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.log.validation import (
    INLINE_RECORDS,
    CheckedBatch,
    InlineBudget,
    check_appended_batches,
    check_produced_batch,
)
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode, KafkaError

NOW = 1_800_000_000_000
HOUR = 3_600_000


def check(timestamps: list[int], configs: dict[str, str] | None = None, *, compression: int = rb.COMPRESSION_NONE,
          keys: bool = True) -> ErrorCode:
    batch = rb.encode_batch([rb.Record(i, ts, b"k" if keys else None, b"v") for i, ts in enumerate(timestamps)],
                            compression=compression)
    config = LogConfig.from_topic_configs(configs or {})
    headers = rb.validate_produced_batches(batch)
    try:
        check_appended_batches(batch, headers, config, NOW, records_checked=False)
    except KafkaError as e:
        return e.code
    return ErrorCode.NONE


def test_kafka_4_defaults_refuse_only_records_more_than_an_hour_ahead() -> None:
    assert check([NOW - 10 * 365 * 24 * HOUR, NOW + HOUR]) is ErrorCode.NONE
    assert check([NOW, NOW + HOUR + 1]) is ErrorCode.INVALID_TIMESTAMP  # the batch's maxTimestamp settles it
    assert check([-1, -1]) is ErrorCode.NONE  # no timestamp: never out of range


@pytest.mark.parametrize("compression", [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP])
def test_a_lower_bound_reads_every_record(compression: int) -> None:
    bounded = {"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"}
    assert check([NOW - 60_000, NOW + 60_000], bounded, compression=compression) is ErrorCode.NONE
    # a later record older than the first: only reading the records finds it
    assert check([NOW, NOW - 60_001], bounded, compression=compression) is ErrorCode.INVALID_TIMESTAMP
    assert check([NOW - 60_001, NOW], bounded, compression=compression) is ErrorCode.INVALID_TIMESTAMP
    assert check([NOW, NOW + 60_001], bounded, compression=compression) is ErrorCode.INVALID_TIMESTAMP


def test_log_append_time_topics_take_any_timestamp_and_other_rules_hold() -> None:
    assert check([NOW + 100 * HOUR], {"message.timestamp.type": "LogAppendTime"}) is ErrorCode.NONE
    assert check([NOW], {"max.message.bytes": "10"}) is ErrorCode.MESSAGE_TOO_LARGE
    assert check([NOW], {"cleanup.policy": "compact"}, keys=False) is ErrorCode.INVALID_RECORD
    assert check([NOW], {"cleanup.policy": "compact"}) is ErrorCode.NONE
    # Kafka's validateTimestamp: the LogAppendTime attribute is the broker's to set on a LogAppendTime
    # topic; on a CreateTime topic it is taken (and cleared as the batch is stored: test_log_partition)
    appended = rb.encode_batch([rb.Record(0, NOW, b"k", b"v")], timestamp_type=rb.TIMESTAMP_LOG_APPEND_TIME)
    headers = rb.validate_produced_batches(appended)
    check_appended_batches(appended, headers, LogConfig(), NOW, records_checked=False)
    with pytest.raises(KafkaError) as refused:
        check_appended_batches(appended, headers, LogConfig.from_topic_configs({"message.timestamp.type": "LogAppendTime"}),
                             NOW, records_checked=False)
    assert refused.value.code is ErrorCode.INVALID_TIMESTAMP


def _batch_of(records: bytes, count: int, compression: int) -> bytes:
    return raw_batch(records, count, compression, timestamp=NOW)


def _produced(batch: bytes, configs: dict[str, str] | None = None,
              budget: InlineBudget | None = None) -> CheckedBatch | None:
    return check_produced_batch(batch, LogConfig.from_topic_configs(configs or {}), NOW, allow_zstd=True,
                                max_inflated=64 << 20, budget=budget)


@pytest.mark.parametrize("compression", [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP])
def test_a_batch_past_the_inline_budget_is_left_for_the_worker_with_the_budget_unspent(compression: int) -> None:
    budget = InlineBudget(records=1000, inflated_bytes=7000)
    small = _batch_of(tiny_records(400), 400, compression)
    large = _batch_of(tiny_records(2000), 2000, compression)
    assert _produced(large, budget=budget) is None
    assert budget.records == 1000  # nothing spent that the worker will spend again
    verdict = _produced(small, budget=budget)
    assert verdict is not None and verdict.error is None and verdict.headers is not None
    assert budget.records == 600
    # the worker's verdict, without a budget: what the loop's would have been
    verdict = _produced(large)
    assert verdict is not None and verdict.error is None and verdict.headers[0].records_count == 2000
    # a compacted topic's key check is a second walk of the records: it counts twice
    assert _produced(small, {"cleanup.policy": "compact"}, InlineBudget(records=799)) is None
    keyless = _produced(small, {"cleanup.policy": "compact"}, InlineBudget(records=800))
    assert keyless is not None and keyless.error is None and keyless.keyless[:3] == [0, 1, 2]


def test_a_compressed_batch_past_the_inflated_budget_is_left_for_the_worker() -> None:
    batch = _batch_of(tiny_records(2000), 2000, rb.COMPRESSION_GZIP)  # 14,000 bytes inflated
    budget = InlineBudget(records=10_000, inflated_bytes=10_000)
    assert _produced(batch, budget=budget) is None
    assert budget.inflated_bytes == 0  # the trial inflate was spent: the next compressed batch goes too
    assert _produced(_batch_of(tiny_records(10), 10, rb.COMPRESSION_GZIP), budget=budget) is None
    assert _produced(_batch_of(tiny_records(10), 10, rb.COMPRESSION_NONE), budget=budget) is not None
    # past the broker's own bound it is MESSAGE_TOO_LARGE wherever it is checked
    verdict = check_produced_batch(batch, LogConfig(), NOW, allow_zstd=True, max_inflated=10_000, budget=None)
    assert verdict is not None and verdict.error is not None and verdict.error.code is ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("compression", [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP])
def test_a_lower_timestamp_bound_is_checked_by_walking_the_records(compression: int) -> None:
    bounded = {"message.timestamp.before.max.ms": "60000"}
    for delta, code in ((-60_000, None), (-60_001, ErrorCode.INVALID_TIMESTAMP)):
        verdict = _produced(_batch_of(tiny_records(100_000, delta), 100_000, compression), bounded)
        assert verdict is not None
        assert (verdict.error.code if verdict.error else None) is code
    # garbage under the count is INVALID_RECORD before any timestamp is read
    verdict = _produced(_batch_of(tiny_records(10), 11, compression), bounded)
    assert verdict is not None and verdict.error is not None and verdict.error.code is ErrorCode.INVALID_RECORD


def test_on_a_compacted_bounded_topic_a_keyless_record_is_its_own_error_and_an_old_timestamp_wins() -> None:
    """Kafka's LogValidator: a record without a key is that record's error (its timestamp unread);
    any record's old timestamp makes the batch INVALID_TIMESTAMP."""
    both = {"cleanup.policy": "compact", "message.timestamp.before.max.ms": "60000"}
    old = NOW - 60_001
    keyless_and_old = rb.encode_batch([rb.Record(0, NOW, None, b"v"), rb.Record(1, old, b"k", b"v")])
    verdict = _produced(keyless_and_old, both)
    assert verdict is not None and verdict.error is not None and verdict.error.code is ErrorCode.INVALID_TIMESTAMP
    old_but_keyless = rb.encode_batch([rb.Record(0, NOW, b"k", b"v"), rb.Record(1, old, None, b"v")])
    verdict = _produced(old_but_keyless, both)
    assert verdict is not None and verdict.error is None and verdict.keyless == [1]


def test_a_compressed_batch_of_many_empty_parts_is_left_for_the_worker() -> None:
    """Each gzip member or zstd frame costs a step in Python whatever it holds: a megabyte of empty
    ones cost a second on the loop while the inflated budget stayed untouched."""
    import gzip
    import zlib

    records = tiny_records(10)
    members = gzip.compress(records) + gzip.compress(b"") * 500  # valid: gzip streams concatenate
    batch = raw_batch(b"", 10, rb.COMPRESSION_NONE, timestamp=NOW)
    batch = _with_payload(batch, members, rb.COMPRESSION_GZIP)
    assert zlib.decompress(members[:len(gzip.compress(records))], 47) == records
    budget = InlineBudget()
    assert _produced(batch, budget=budget) is None
    assert budget.parts.left == 0 and budget.records == INLINE_RECORDS
    verdict = _produced(batch)  # the worker reads it all: a sound batch
    assert verdict is not None and verdict.error is None
    one_member = raw_batch(records, 10, rb.COMPRESSION_GZIP, timestamp=NOW)
    assert _produced(one_member, budget=InlineBudget()) is not None


def _with_payload(batch: bytes, payload: bytes, compression: int) -> bytes:
    out = bytearray(batch[:rb.HEADER_SIZE]) + payload
    fields = list(rb.HEADER_STRUCT.unpack_from(out, 0))
    fields[1], fields[5] = len(out) - rb.LOG_OVERHEAD, compression
    rb.HEADER_STRUCT.pack_into(out, 0, *fields)
    rb._U32.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def test_a_log_append_time_batch_is_bounded_by_its_maximum_timestamp_on_a_create_time_topic() -> None:
    """Kafka gives each record of such a batch the batch's maximum timestamp (DefaultRecordBatch),
    whatever the records' deltas say."""
    bounded = {"message.timestamp.before.max.ms": "60000"}
    deltas_say_old = rb.encode_batch([rb.Record(0, NOW, b"k", b"v"), rb.Record(1, NOW - 120_000, b"k", b"v")],
                                     timestamp_type=rb.TIMESTAMP_LOG_APPEND_TIME)
    verdict = _produced(deltas_say_old, bounded)
    assert verdict is not None and verdict.error is None
    header_says_old = bytearray(rb.encode_batch([rb.Record(0, NOW, b"k", b"v")], timestamp_type=rb.TIMESTAMP_LOG_APPEND_TIME))
    fields = list(rb.HEADER_STRUCT.unpack_from(header_says_old, 0))
    fields[8] = NOW - 120_000  # maxTimestamp
    rb.HEADER_STRUCT.pack_into(header_says_old, 0, *fields)
    rb._U32.pack_into(header_says_old, rb.CRC_OFFSET, rb.compute_crc(header_says_old, 0, len(header_says_old)))
    verdict = _produced(bytes(header_says_old), bounded)
    assert verdict is not None and verdict.error is not None and verdict.error.code is ErrorCode.INVALID_TIMESTAMP


def test_a_key_running_past_its_record_is_refused_where_keys_are_read() -> None:
    batch = rb.encode_batch([rb.Record(0, NOW, b"k", b"")])
    crafted = _with_payload(batch, batch[rb.HEADER_SIZE:].replace(b"\x02k", b"\x0ak", 1), rb.COMPRESSION_NONE)
    verdict = _produced(crafted, {"cleanup.policy": "compact"})
    assert verdict is not None and verdict.error is not None and verdict.error.code is ErrorCode.INVALID_RECORD
