"""What Kafka's LogValidator checks of a client's batches: their framing
(`record_batch.validate_produced_batches`), sizes against the topic's limits, records framed as the
header says, the timestamp type, CreateTime timestamps against the topic's bounds, and keys on a
compacted topic.

Produce checks each batch's records before it appends (`check_produced_batch`). That is the costly
part: a 90 KiB gzip batch can hold nine million records and a request can carry a hundred batches,
so a request may spend only an `InlineBudget` of records walked and bytes inflated on the event loop;
a batch past it is checked again from the start in a worker thread while the loop serves others.

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
from ...protocol.record_framing import check_record_framing, first_timestamp_below, keyless_records, record_heads
from .config import INT64_MAX, LogConfig

# One request's share of the loop for checking batches: about 20 ms of walking records and 10 ms of
# inflating on this project's reference host. Uncompressed batches of a few thousand records, what
# clients send, stay far inside it and never pay the hand-over to the worker.
INLINE_RECORDS = 64 * 1024
INLINE_INFLATED_BYTES = 4 * 1024 * 1024


class InlineBudget:
    """What is left of one request's allowance for checking batches on the event loop."""

    __slots__ = ("records", "inflated_bytes")

    def __init__(self, records: int = INLINE_RECORDS, inflated_bytes: int = INLINE_INFLATED_BYTES) -> None:
        self.records = records
        self.inflated_bytes = inflated_bytes


class CheckedBatch:
    """A produced batch's verdict: its headers when it may be appended, else Kafka's error; `keyless`
    lists (the first 1000 of) its records without a key when the topic is compacted."""

    __slots__ = ("headers", "error", "keyless")

    def __init__(self, headers: list[rb.BatchHeader] | None = None, error: KafkaError | None = None,
                 keyless: list[int] | None = None) -> None:
        self.headers = headers
        self.error = error
        self.keyless = keyless or []


def check_produced_batch(records: bytes | bytearray | memoryview, config: LogConfig, now_ms: int, *,
                         allow_zstd: bool, max_inflated: int, budget: InlineBudget | None) -> CheckedBatch | None:
    """The batch's verdict, or None when checking it would pass `budget` (then nothing of the budget
    is spent that the worker would not spend again; a compressed batch's bounded trial inflate is).
    No budget: check whatever it costs, as the worker does. Pure: the worker thread runs it."""
    try:
        headers = rb.validate_produced_batches(records, single_batch=True, allow_zstd=allow_zstd)
        header = headers[0]
        check_batch_size(header, config)  # first, as in Kafka: an oversized batch is never inflated
        reads_timestamps = _reads_timestamps(config)
        walked = header.records_count * (2 if config.compact or reads_timestamps else 1)
        if budget is not None and walked > budget.records:
            return None
        data: bytes | bytearray | memoryview = records
        start, stop = rb.HEADER_SIZE, header.size
        if header.compression != rb.COMPRESSION_NONE:  # inflated within the bound, once for both walks
            if budget is not None and budget.inflated_bytes <= 0:
                return None
            bound = max_inflated if budget is None else min(max_inflated, budget.inflated_bytes)
            try:
                data = rb.decompress(header.compression, bytes(records[start:stop]), bound)
            except rb.InflatedTooLarge:
                if budget is None or bound == max_inflated:
                    raise
                budget.inflated_bytes = 0
                return None
            if budget is not None:
                budget.inflated_bytes -= len(data)
            start, stop = 0, len(data)
        if budget is not None:
            budget.records -= walked
        # The records are framed as the header says (Kafka reads every one): garbage is never acknowledged.
        check_record_framing(data, start, stop, header.records_count)
        keyless: list[int] = []
        if config.compact or reads_timestamps:
            low = now_ms - config.message_timestamp_before_max_ms if reads_timestamps else None
            keyless, older = _read_keys_and_timestamps(data, start, stop, header, config.compact, low)
            if older is not None:
                _out_of_range(older, low or 0, now_ms + config.message_timestamp_after_max_ms)
    except KafkaError as e:
        return CheckedBatch(error=e)
    return CheckedBatch(headers, keyless=keyless)


def _read_keys_and_timestamps(data: bytes | bytearray | memoryview, start: int, stop: int, header: rb.BatchHeader,
                              compact: bool, low: int | None) -> tuple[list[int], int | None]:
    """(the first 1000 keyless records' indexes on a compacted topic, the first timestamp below `low`)
    in one walk. As in Kafka's LogValidator a keyless record is that record's error, its timestamp
    unread, and an old timestamp anywhere makes the batch's answer INVALID_TIMESTAMP (Kafka lists
    every keyless record; the first 1000 are enough for any client's message)."""
    keyless: list[int] = []
    older = None
    for index, delta, key_length in record_heads(data, start, stop, header.records_count):
        if compact and key_length < 0:
            if len(keyless) < 1000:
                keyless.append(index)
        elif low is not None and older is None:
            timestamp = header.base_timestamp + delta
            if timestamp < low and timestamp != rb.NO_TIMESTAMP:
                older = timestamp
    return keyless, older


def check_appended_batches(records: bytes | bytearray | memoryview, headers: list[rb.BatchHeader],
                           config: LogConfig, now_ms: int, *, records_checked: bool) -> None:
    """Raise Kafka's error for the first rule the batches break; `records_checked`: the caller
    (Produce, through `check_produced_batch`) has already run the rules that read each record."""
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
        _check_timestamps(records, headers, config, now_ms, read_records=not records_checked)
    if config.compact and not records_checked:
        for pos, _ in rb.iter_batches(records):
            if keyless_records(records, pos, max_listed=0)[0]:
                raise KafkaError("compacted topics only accept records with a key", ErrorCode.INVALID_RECORD)


def check_batch_size(header: rb.BatchHeader, config: LogConfig) -> None:
    """Kafka's first check of a batch, before anything reads its records (Produce runs it before it
    inflates and walks them)."""
    if header.size > config.max_message_bytes:
        raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                         ErrorCode.MESSAGE_TOO_LARGE)


def _reads_timestamps(config: LogConfig) -> bool:
    """Only a lower bound needs each record's timestamp (see the module's docstring)."""
    return not config.log_append_time and config.message_timestamp_before_max_ms != INT64_MAX


def _check_timestamps(records: bytes | bytearray | memoryview, headers: list[rb.BatchHeader], config: LogConfig,
                      now_ms: int, *, read_records: bool) -> None:
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    for header in headers:
        if header.max_timestamp > high:
            _out_of_range(header.max_timestamp, low, high)
        if header.base_timestamp != rb.NO_TIMESTAMP and header.base_timestamp < low:
            _out_of_range(header.base_timestamp, low, high)
    if not read_records or not _reads_timestamps(config):
        return
    for pos, header in rb.iter_batches(records):  # an internal writer's: no more than the log holds
        data = rb.decompress(header.compression, bytes(memoryview(records)[pos + rb.HEADER_SIZE : pos + header.size]))
        older = first_timestamp_below(data, 0, len(data), header.records_count, header.base_timestamp, low)
        if older is not None:
            _out_of_range(older, low, high)


def _out_of_range(timestamp: int, low: int, high: int) -> None:
    raise KafkaError(f"Timestamp {timestamp} of a record is out of range. The timestamp should be within "
                     f"[{low}, {high}]", ErrorCode.INVALID_TIMESTAMP)
