"""broker/log/validation.py: Kafka's LogValidator rules for a client's batches, on real encoded
batches (CreateTime bounds, the LogAppendTime attribute, sizes, compacted keys)."""

from __future__ import annotations

import pytest

from kbroker.broker.log.config import LogConfig
from kbroker.broker.log.validation import check_appended_batches
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
        check_appended_batches(batch, headers, config, NOW, keys_checked=False)
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
    check_appended_batches(appended, headers, LogConfig(), NOW, keys_checked=False)
    with pytest.raises(KafkaError) as refused:
        check_appended_batches(appended, headers, LogConfig.from_topic_configs({"message.timestamp.type": "LogAppendTime"}),
                             NOW, keys_checked=False)
    assert refused.value.code is ErrorCode.INVALID_TIMESTAMP
