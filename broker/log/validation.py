"""What Kafka's LogValidator checks of a client's batches once their framing is sound
(`record_batch.validate_produced_batches`): sizes against the topic's limits, the timestamp type,
CreateTime timestamps against the topic's bounds, and keys on a compacted topic.

Timestamps: Kafka checks every record against [now - message.timestamp.before.max.ms, now +
message.timestamp.after.max.ms] (Kafka 4's defaults: any age, at most an hour ahead). A batch's
header carries its first and largest timestamps, which settle the upper bound and, with the default
lower bound, everything, without reading a record. Only a topic that sets a lower bound has its
records read, since a later record may be older than the first. The largest timestamp is taken as
the producer wrote it (Kafka recomputes it from the records): a header that understates it passes.
"""

from __future__ import annotations

from ...protocol import record_batch as rb
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.record_framing import keyless_records
from .config import INT64_MAX, LogConfig



def check_appended_batches(records: bytes | bytearray | memoryview, headers: list[rb.BatchHeader],
                           config: LogConfig, now_ms: int, *, keys_checked: bool) -> None:
    """Raise Kafka's error for the first rule the batches break; `keys_checked`: the caller (Produce)
    has already run the compacted topic's key check, with its per-record answer."""
    for header in headers:
        check_batch_size(header, config)
        if header.timestamp_type == rb.TIMESTAMP_LOG_APPEND_TIME and config.log_append_time:
            # Kafka's validateTimestamp: on a LogAppendTime topic the broker sets that time, not the
            # producer (on a CreateTime topic the attribute is cleared as the batch is stored).
            raise KafkaError("Producer should not set timestamp type to LogAppendTime.", ErrorCode.INVALID_TIMESTAMP)
    total = len(records)
    if total > config.segment_bytes:
        raise KafkaError(f"{total} bytes of records exceed segment.bytes {config.segment_bytes}",
                         ErrorCode.RECORD_LIST_TOO_LARGE)
    if not config.log_append_time:  # LogAppendTime replaces the clients' timestamps: nothing to bound
        _check_timestamps(records, headers, config, now_ms)
    if config.compact and not keys_checked:
        for pos, _ in rb.iter_batches(records):
            if keyless_records(records, pos, max_listed=0)[0]:
                raise KafkaError("compacted topics only accept records with a key", ErrorCode.INVALID_RECORD)


def check_batch_size(header: rb.BatchHeader, config: LogConfig) -> None:
    """Kafka's first check of a batch, before anything reads its records (Produce runs it before it
    inflates and walks them)."""
    if header.size > config.max_message_bytes:
        raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                         ErrorCode.MESSAGE_TOO_LARGE)


def _check_timestamps(records: bytes | bytearray | memoryview, headers: list[rb.BatchHeader], config: LogConfig,
                      now_ms: int) -> None:
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    for header in headers:
        if header.max_timestamp > high:
            _out_of_range(header.max_timestamp, low, high)
        if header.base_timestamp != rb.NO_TIMESTAMP and header.base_timestamp < low:
            _out_of_range(header.base_timestamp, low, high)
    if config.message_timestamp_before_max_ms == INT64_MAX:  # any age: the default
        return
    for _, batch in rb.decode_batches(records):
        for record in batch:
            if record.timestamp != rb.NO_TIMESTAMP and record.timestamp < low:
                _out_of_range(record.timestamp, low, high)


def _out_of_range(timestamp: int, low: int, high: int) -> None:
    raise KafkaError(f"Timestamp {timestamp} of a record is out of range. The timestamp should be within "
                     f"[{low}, {high}]", ErrorCode.INVALID_TIMESTAMP)
