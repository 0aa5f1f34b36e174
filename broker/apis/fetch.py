"""Fetch (1), v4-v17: sessionless and incremental (KIP-227) fetches, topic ids from v13, long polling.

Reading follows Kafka's ReplicaManager.readFromLog: partitions are read in order with a shared
`max_bytes` budget, each one capped at its `partition_max_bytes`; until some partition has returned
data, a read may exceed both limits to return one whole batch (Kafka's minOneMessage), so a batch
bigger than the limits never blocks a consumer. Record bytes go out exactly as stored.

When fewer than `min_bytes` are available and `max_wait_ms` > 0, the request parks in the fetch
purgatory (purgatory/delayed_fetch.py) watching its partitions; Produce wakes it after each append,
and the timing wheel answers it at `max_wait_ms` with whatever is there then. Errors (unknown
partition, offset out of range) answer at once, as in Kafka.
"""

from __future__ import annotations

import time

from kbroker.broker.fetch_sessions import FetchTarget, PartitionKey, PartitionResult
from kbroker.broker.log.partition_log import OffsetOutOfRangeError
from kbroker.broker.router import RequestContext
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.messages.fetch_request import FetchRequest
from kbroker.protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData

API_KEY = 1
VERSIONS = (4, 17)
TOPIC_IDS_FROM = 13
SESSIONS_FROM = 7
READ_COMMITTED = 1


def _resolve(broker, uses_ids: bool) -> dict:
    if not uses_ids:
        return {}
    return {info.topic_id: name for name, info in broker.logs.topics().items()}


def _topic_name(key: PartitionKey, uses_ids: bool, names_by_id: dict) -> str | None:
    return names_by_id.get(key[0]) if uses_ids else key[0]


def _error_result(code: int) -> PartitionResult:
    return PartitionResult(code, -1, -1)


def read_partitions(broker, targets: list[tuple[PartitionKey, FetchTarget]], max_bytes: int, uses_ids: bool,
                    names_by_id: dict) -> tuple[list[tuple[PartitionKey, PartitionResult]], int, bool]:
    """(results in order, bytes read, whether some partition has an error)."""
    results = []
    budget = max(0, max_bytes)
    total = 0
    min_one = True
    has_error = False
    for key, target in targets:
        name = _topic_name(key, uses_ids, names_by_id)
        if name is None:
            results.append((key, _error_result(ErrorCode.UNKNOWN_TOPIC_ID)))
            has_error = True
            continue
        plog = broker.logs.get_log(name, key[1])
        if plog is None:
            results.append((key, _error_result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            has_error = True
            continue
        if (faults := getattr(broker, "partition_faults", None)) and (injected := faults.take("Fetch", name, key[1])):
            results.append((key, _error_result(injected)))
            has_error = True
            continue
        try:
            read = plog.read(target.fetch_offset, min(max(0, target.max_bytes), budget), min_one_batch=min_one)
        except OffsetOutOfRangeError:
            results.append((key, _error_result(ErrorCode.OFFSET_OUT_OF_RANGE)))
            has_error = True
            continue
        except KafkaError as e:
            results.append((key, _error_result(e.code)))
            has_error = True
            continue
        size = len(read.records)
        if size:
            if (observations := getattr(broker, "observations", None)) is not None:
                observations.bytes_out[name] += size
            min_one = False
            budget = max(0, budget - size)
            total += size
        results.append((key, PartitionResult(ErrorCode.NONE, read.high_watermark, read.log_start_offset,
                                             read.records, read.last_stable_offset)))
    return results, total, has_error


def _ready_check(broker, targets, min_bytes: int, uses_ids: bool, names_by_id: dict):
    """The delayed fetch's condition: enough new bytes, or something to report."""

    def ready() -> bool:
        accumulated = 0
        for key, target in targets:
            name = _topic_name(key, uses_ids, names_by_id)
            plog = broker.logs.get_log(name, key[1]) if name is not None else None
            if plog is None:
                return True
            end = plog.log_end_offset
            offset = target.fetch_offset
            if offset > end or offset < plog.log_start_offset:
                return True
            if end > offset:
                if min_bytes <= 1:
                    return True
                try:
                    accumulated += len(plog.read(offset, max(1, target.max_bytes), min_one_batch=True).records)
                except KafkaError:
                    return True
                if accumulated >= min_bytes:
                    return True
        return False

    return ready


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    version = ctx.api_version
    uses_ids = version >= TOPIC_IDS_FROM
    names_by_id = _resolve(broker, uses_ids)
    targets: list[tuple[PartitionKey, FetchTarget]] = []
    for topic in request.topics:
        ref = topic.topic_id if uses_ids else topic.topic
        for p in topic.partitions:
            targets.append(((ref, p.partition), FetchTarget(p.fetch_offset, p.partition_max_bytes, p.log_start_offset)))
    forgotten = [
        ((f.topic_id if uses_ids else f.topic), partition)
        for f in request.forgotten_topics_data
        for partition in f.partitions
    ]
    now_ms = int(time.monotonic() * 1000)
    context = broker.fetch_sessions.new_context(
        request.session_id, request.session_epoch, targets, forgotten,
        uses_topic_ids=uses_ids, now_ms=now_ms, sessions_supported=version >= SESSIONS_FROM,
    )
    if context.kind == "error":
        return FetchResponse(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    to_read = context.targets
    results, total, has_error = read_partitions(broker, to_read, request.max_bytes, uses_ids, names_by_id)
    if request.max_wait_ms > 0 and to_read and total < request.min_bytes and not has_error:
        keys = []
        for key, _ in to_read:
            name = _topic_name(key, uses_ids, names_by_id)
            if name is not None:
                keys.append((name, key[1]))
        ready = _ready_check(broker, to_read, request.min_bytes, uses_ids, names_by_id)
        # Completed or expired, the answer is what the logs hold now.
        await broker.fetch_purgatory.wait(request.max_wait_ms, ready, keys)
        results, total, has_error = read_partitions(broker, to_read, request.max_bytes, uses_ids, names_by_id)
    chosen = context.respond(results)
    aborted = [] if request.isolation_level == READ_COMMITTED else None
    responses: list[FetchableTopicResponse] = []
    current_ref = object()
    for (ref, partition), result in chosen:
        if ref != current_ref:
            current_ref = ref
            if uses_ids:
                responses.append(FetchableTopicResponse(topic_id=ref, partitions=[]))
            else:
                responses.append(FetchableTopicResponse(topic=ref, partitions=[]))
        ok = result.error_code == ErrorCode.NONE
        responses[-1].partitions.append(PartitionData(
            partition_index=partition,
            error_code=result.error_code,
            high_watermark=result.high_watermark,
            last_stable_offset=result.extra if ok else -1,
            log_start_offset=result.log_start_offset,
            aborted_transactions=aborted,
            preferred_read_replica=-1,
            records=result.records,
        ))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=context.session_id,
                         responses=responses)

