"""broker/log/validation.py: Kafka's LogValidator rules for a client's batches, on real encoded
batches (CreateTime bounds, the LogAppendTime attribute, sizes, compacted keys)."""

from __future__ import annotations

import pytest

from kbroker.broker.log.config import LogConfig
from kbroker.broker.log.validation import CheckedBatch, InlineBudget, check_appended_batches, check_produced_batch
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


def _tiny_records(count: int, last_timestamp_delta: int = 0) -> bytes:
    """`count` records of 7 bytes (no key, no value), the last one `last_timestamp_delta` from the base."""
    last = b"\x00" + rb.zigzag_varint(last_timestamp_delta) + b"\x00\x01\x01\x00"
    return b"\x0c\x00\x00\x00\x01\x01\x00" * (count - 1) + rb.zigzag_varint(len(last)) + last


def _batch_of(records: bytes, count: int, compression: int) -> bytes:
    """A sound batch (header, CRC) around raw `records`."""
    shell = bytearray(rb.encode_batch([rb.Record(0, NOW, None, None)]))
    payload = rb.compress(compression, records)
    out = shell[:rb.HEADER_SIZE] + payload
    fields = list(rb.HEADER_STRUCT.unpack_from(out, 0))
    fields[1], fields[5], fields[6], fields[12] = len(out) - rb.LOG_OVERHEAD, compression, count - 1, count
    rb.HEADER_STRUCT.pack_into(out, 0, *fields)
    rb._U32.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def _produced(batch: bytes, configs: dict[str, str] | None = None,
              budget: InlineBudget | None = None) -> CheckedBatch | None:
    return check_produced_batch(batch, LogConfig.from_topic_configs(configs or {}), NOW, allow_zstd=True,
                                max_inflated=64 << 20, budget=budget)


@pytest.mark.parametrize("compression", [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP])
def test_a_batch_past_the_inline_budget_is_left_for_the_worker_with_the_budget_unspent(compression: int) -> None:
    budget = InlineBudget(records=1000, inflated_bytes=7000)
    small = _batch_of(_tiny_records(400), 400, compression)
    large = _batch_of(_tiny_records(2000), 2000, compression)
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
    batch = _batch_of(_tiny_records(2000), 2000, rb.COMPRESSION_GZIP)  # 14,000 bytes inflated
    budget = InlineBudget(records=10_000, inflated_bytes=10_000)
    assert _produced(batch, budget=budget) is None
    assert budget.inflated_bytes == 0  # the trial inflate was spent: the next compressed batch goes too
    assert _produced(_batch_of(_tiny_records(10), 10, rb.COMPRESSION_GZIP), budget=budget) is None
    assert _produced(_batch_of(_tiny_records(10), 10, rb.COMPRESSION_NONE), budget=budget) is not None
    # past the broker's own bound it is MESSAGE_TOO_LARGE wherever it is checked
    verdict = check_produced_batch(batch, LogConfig(), NOW, allow_zstd=True, max_inflated=10_000, budget=None)
    assert verdict is not None and verdict.error is not None and verdict.error.code is ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("compression", [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP])
def test_a_lower_timestamp_bound_is_checked_by_walking_the_records(compression: int) -> None:
    bounded = {"message.timestamp.before.max.ms": "60000"}
    for delta, code in ((-60_000, None), (-60_001, ErrorCode.INVALID_TIMESTAMP)):
        verdict = _produced(_batch_of(_tiny_records(100_000, delta), 100_000, compression), bounded)
        assert verdict is not None
        assert (verdict.error.code if verdict.error else None) is code
    # garbage under the count is INVALID_RECORD before any timestamp is read
    verdict = _produced(_batch_of(_tiny_records(10), 11, compression), bounded)
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
