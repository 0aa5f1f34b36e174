"""What Kafka's LogValidator checks of a client's batches: their framing
(`record_batch.validate_produced_batches`), sizes against the topic's limits, records framed as the
header says, the timestamp type, CreateTime timestamps against the topic's bounds, and keys on a
compacted topic.

Produce checks each batch's records before it appends (`check_produced_batch`). That is the costly
part: a 90 KiB gzip batch can hold nine million records, a megabyte of empty gzip members costs a
second to walk, and a request can carry a hundred batches. So a request may spend only an
`InlineBudget` on the event loop; a batch past it is checked again from the start in a worker
thread while the loop serves others.

Timestamps: Kafka checks every record against [now - message.timestamp.before.max.ms, now +
message.timestamp.after.max.ms] (Kafka 4's defaults: any age, at most an hour ahead). A batch's
header carries its first and largest timestamps, which settle the upper bound and, with the default
lower bound, everything, without reading a record. Only a topic that sets a lower bound has its
records read, since a later record may be older than the first. The largest timestamp is taken as
the producer wrote it (Kafka recomputes it from the records): a header that understates it passes.
"""

from __future__ import annotations

from ....protocol import record_batch as rb
from ....protocol.errors import ErrorCode, KafkaError
from ....protocol.record_framing import check_record_framing, record_heads
from .config import INT64_MAX, LogConfig

# One request's share of the loop for checking batches: about 20 ms of walking records, 10 ms of
# inflating and a few ms of stepping through compressed parts on this project's reference host.
# Clients' batches of a few thousand records, one gzip member or zstd frame, or snappy's 32 KiB
# blocks, stay inside it and never pay the hand-over to the worker.
INLINE_RECORDS = 64 * 1024
INLINE_INFLATED_BYTES = 4 * 1024 * 1024
INLINE_PARTS = 160
MAX_KEYLESS_LISTED = 1000  # Kafka lists every keyless record; this many are enough for any client's message


class InlineBudget:
    """What is left of one request's allowance for checking batches on the event loop."""

    __slots__ = ("records", "inflated_bytes", "parts")

    def __init__(self, records: int = INLINE_RECORDS, inflated_bytes: int = INLINE_INFLATED_BYTES,
                 parts: int = INLINE_PARTS) -> None:
        self.records = records
        self.inflated_bytes = inflated_bytes
        self.parts = rb.PartAllowance(parts)


class CheckedBatch:
    """A produced batch's verdict: its headers when it may be appended, else Kafka's error; `keyless`
    lists (the first MAX_KEYLESS_LISTED of) its records without a key when the topic is compacted."""

    __slots__ = ("headers", "error", "keyless")

    def __init__(self, headers: list[rb.BatchHeader] | None = None, error: KafkaError | None = None,
                 keyless: list[int] | None = None) -> None:
        self.headers = headers
        self.error = error
        self.keyless = keyless or []


def check_produced_batch(records: bytes | bytearray | memoryview, config: LogConfig, now_ms: int, *,
                         allow_zstd: bool, max_inflated: int, budget: InlineBudget | None) -> CheckedBatch | None:
    """The batch's verdict, or None when checking it would pass `budget`; then nothing of the budget
    is spent that the worker will spend again, but for a compressed batch's bounded trial inflate.
    No budget: check whatever it costs, as the worker does. Touches nothing but `budget`, so the
    worker thread runs it."""
    try:
        headers = rb.validate_produced_batches(records, single_batch=True, allow_zstd=allow_zstd)
        header = headers[0]
        check_batch_size(header, config)  # first, as in Kafka: an oversized batch is never inflated
        _check_header_timestamps(header, config, now_ms)
        reads_records = _reads_records(config)
        walked = header.records_count * (2 if reads_records else 1)
        if budget is not None and walked > budget.records:
            return None
        region = _records_within(header, records, max_inflated, budget)  # inflated once for both walks
        if region is None:
            return None
        data, start, stop = region
        if budget is not None:
            budget.records -= walked
        # The records are framed as the header says (Kafka reads every one): garbage is never acknowledged.
        check_record_framing(data, start, stop, header.records_count)
        keyless = _check_records(header, data, start, stop, config, now_ms) if reads_records else []
    except KafkaError as e:
        return CheckedBatch(error=e)
    return CheckedBatch(headers, keyless=keyless)


def _records_within(header: rb.BatchHeader, records: bytes | bytearray | memoryview, max_inflated: int,
                    budget: InlineBudget | None) -> tuple[bytes | bytearray | memoryview, int, int] | None:
    """The batch's records (`rb.batch_records`) inflated within `max_inflated`, or, with a budget,
    within what is left of it: None when that is not enough."""
    if budget is None or header.compression == rb.COMPRESSION_NONE:
        return rb.batch_records(records, 0, header, max_inflated)
    bound = min(max_inflated, budget.inflated_bytes)
    try:
        region = rb.batch_records(records, 0, header, bound, budget.parts)
    except rb.TooManyParts:
        return None
    except rb.InflatedTooLarge:
        if bound == max_inflated:
            raise
        budget.inflated_bytes = 0
        return None
    budget.inflated_bytes -= region[2] - region[1]
    return region


def _reads_records(config: LogConfig) -> bool:
    """Whether a rule reads a field of each record: a compacted topic's keys, or a lower timestamp
    bound (a later record may be older than the first; see the module's docstring)."""
    return config.compact or _reads_timestamps(config)


def _reads_timestamps(config: LogConfig) -> bool:
    return not config.log_append_time and config.message_timestamp_before_max_ms != INT64_MAX


def _check_records(header: rb.BatchHeader, data: bytes | bytearray | memoryview, start: int, stop: int,
                   config: LogConfig, now_ms: int) -> list[int]:
    """The rules that read each record of one batch (its records data[start:stop], inflated), in one
    walk: the indexes of (the first MAX_KEYLESS_LISTED) keyless records on a compacted topic, or
    INVALID_TIMESTAMP for a timestamp below the lower bound. As in Kafka's LogValidator a keyless
    record is that record's error, its timestamp unread, and an old timestamp anywhere makes the
    batch's answer INVALID_TIMESTAMP. A batch with the LogAppendTime attribute gives every record its
    maximum timestamp (Kafka's DefaultRecordBatch), which the header check has bounded already."""
    compact = config.compact
    low = now_ms - config.message_timestamp_before_max_ms
    read_timestamps = _reads_timestamps(config) and header.timestamp_type != rb.TIMESTAMP_LOG_APPEND_TIME
    base = header.base_timestamp
    keyless: list[int] = []
    for index, delta, _, key_length in record_heads(data, start, stop, header.records_count):
        if compact and key_length < 0:
            if len(keyless) < MAX_KEYLESS_LISTED:
                keyless.append(index)
        elif read_timestamps and base + delta < low and base + delta != rb.NO_TIMESTAMP:
            _out_of_range(base + delta, low, now_ms + config.message_timestamp_after_max_ms)
    return keyless


def check_appended_batches(records: bytes | bytearray | memoryview, headers: list[rb.BatchHeader],
                           config: LogConfig, now_ms: int, *, records_checked: bool) -> None:
    """Raise Kafka's error for the first rule the batches break; `records_checked`: the caller has
    already run the rules of each batch's header timestamps and records (Produce, through
    `check_produced_batch`; the coordinator, whose batches it builds itself)."""
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
    if records_checked:
        return
    for pos, header in rb.iter_batches(records):
        _check_header_timestamps(header, config, now_ms)
        if _reads_records(config):  # an internal writer's batch: within the broker's inflated bound
            data, start, stop = rb.batch_records(records, pos, header)
            if _check_records(header, data, start, stop, config, now_ms):
                raise KafkaError("compacted topics only accept records with a key", ErrorCode.INVALID_RECORD)


def check_batch_size(header: rb.BatchHeader, config: LogConfig) -> None:
    """Kafka's first check of a batch, before anything reads its records (Produce runs it before it
    inflates and walks them)."""
    if header.size > config.max_message_bytes:
        raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                         ErrorCode.MESSAGE_TOO_LARGE)


def _check_header_timestamps(header: rb.BatchHeader, config: LogConfig, now_ms: int) -> None:
    """The bounds a batch's header settles: its largest timestamp against the upper bound and its
    first against the lower (a LogAppendTime-attribute batch: its one timestamp against both)."""
    if config.log_append_time:  # LogAppendTime replaces the clients' timestamps: nothing to bound
        return
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    if header.max_timestamp > high:
        _out_of_range(header.max_timestamp, low, high)
    first = header.max_timestamp if header.timestamp_type == rb.TIMESTAMP_LOG_APPEND_TIME else header.base_timestamp
    if first != rb.NO_TIMESTAMP and first < low:
        _out_of_range(first, low, high)


def _out_of_range(timestamp: int, low: int, high: int) -> None:
    raise KafkaError(f"Timestamp {timestamp} of a record is out of range. The timestamp should be within "
                     f"[{low}, {high}]", ErrorCode.INVALID_TIMESTAMP)
