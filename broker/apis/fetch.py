"""Fetch (1), v0-v18: sessionless and incremental (KIP-227) fetches, topic ids from v13, long polling.

v0-v3 (Kafka 3.9; removed in 4.0) answer message sets of format v0 (v0-v1) or v1 (v2-v3),
down-converted from the stored batches (protocol/legacy_records.py); below v10 a zstd batch is
UNSUPPORTED_COMPRESSION_TYPE, as in Kafka. v18 only adds a field followers send.

Bounds (KafkaApis.handleFetchRequest): the request's `max_bytes` is clamped to the broker's
`fetch.max.bytes` (55 MiB by default), and `min_bytes` to that; a partition named more than once is
read once, with the last entry's limits winning at the first entry's place (Kafka's LinkedHashMap
of fetch data), so one response can never repeat a partition's records. A log fenced by a storage
error answers KAFKA_STORAGE_ERROR.

Reading follows Kafka's ReplicaManager.readFromLog: partitions are read in order with a shared
`max_bytes` budget, each one capped at its `partition_max_bytes`; until some partition has returned
data, a read may exceed both limits to return one whole batch (Kafka's minOneMessage), so a batch
bigger than the limits never blocks a consumer. Record bytes go out exactly as stored.

A fetch never returns a record at or past the partition's high watermark: with `--flush always`
that is the durable end, so a consumer cannot process (and commit past) a record a crash would take
back. When fewer than `min_bytes` are available and `max_wait_ms` > 0, the request parks in the fetch
purgatory (purgatory/delayed_fetch.py) watching its partitions; the partition service wakes it when
a partition's high watermark (or last stable offset) moves, not its log end, and the timing wheel
answers it at `max_wait_ms` with whatever is there then. Errors (unknown partition, offset out of
range, not the leader, a fenced leader epoch from v9) answer at once, as in Kafka. Reads are the
partition service's (broker/partitions/service.py).

With isolation_level read_committed a partition is read only up to its last stable offset (batches
from the LSO on are cut off) and the answer lists the aborted transactions that overlap the data
returned, so the client drops their records (broker/partitions/txn_read.py).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Callable, cast

from .fetch_sessions import FetchTarget, PartitionKey, PartitionResult
from ..operations.quotas import CONSUMER_BYTE_RATE, hold_back_for_old_clients
from ..network.router import RequestContext
from ..workers import DOWN_CONVERT, run_in_worker
from ...protocol import legacy_records
from ...protocol.errors import ErrorCode
from ...protocol.messages.fetch_request import FetchRequest
from ...protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse, NodeEndpoint, PartitionData

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 1
VERSIONS = (0, 18)
FIRST_BATCH_VERSION = 4  # before it, message sets of format v0 (v0-v1) or v1 (v2-v3)
ZSTD_FROM = 10
KIP_219_FROM = 8  # from here clients back off on throttle_time_ms themselves
TOPIC_IDS_FROM = 13
SESSIONS_FROM = 7
LEADER_HINTS_FROM = 16  # KIP-951: a partition's new leader in a NOT_LEADER_OR_FOLLOWER answer
FOLLOWER_READS_FROM = 11  # KIP-392: a consumer's fetch carries client metadata; a follower serves it
READ_COMMITTED = 1
NOT_HOSTED = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


def _resolve(broker: BrokerServices, uses_ids: bool) -> dict:
    return broker.catalogue.names_by_id() if uses_ids else {}


def _topic_name(key: PartitionKey, uses_ids: bool, names_by_id: dict) -> str | None:
    # Without topic ids a partition's key starts with its topic's name.
    return names_by_id.get(key[0]) if uses_ids else cast(str, key[0])


def _error_result(code: int) -> PartitionResult:
    return PartitionResult(code, -1, -1)


def read_partitions(broker: BrokerServices, targets: list[tuple[PartitionKey, FetchTarget]], max_bytes: int, uses_ids: bool,
                    names_by_id: dict, isolation: int = 0,
                    replica_reads: bool = False) -> tuple[list[tuple[PartitionKey, PartitionResult]], int, bool]:
    """(results in order, bytes read, whether some partition has an error).

    Runs for every partition of every fetch (1,000 of them for a consumer of 1,000 partitions, most
    with nothing new): what does not depend on the partition is looked up once."""
    results = []
    budget = max(0, max_bytes)
    total = 0
    min_one = True
    has_error = False
    read = (broker.partitions.replica_reader() if replica_reads else broker.partitions).read
    read_committed = isolation == READ_COMMITTED
    for key, target in targets:
        name: str | None = names_by_id.get(key[0]) if uses_ids else cast(str, key[0])
        if name is None:
            results.append((key, _error_result(ErrorCode.UNKNOWN_TOPIC_ID)))
            has_error = True
            continue
        result = read(name, key[1], target.fetch_offset, min(max(0, target.max_bytes), budget), min_one_batch=min_one,
                      read_committed=read_committed, current_leader_epoch=target.current_leader_epoch)
        if result.error_code != ErrorCode.NONE:
            has_error = True
        elif size := len(result.records):
            min_one = False
            budget = max(0, budget - size)
            total += size
        results.append((key, result))
    return results, total, has_error


async def prepare_partitions(broker: BrokerServices, targets: list[tuple[PartitionKey, FetchTarget]], max_bytes: int,
                             uses_ids: bool, names_by_id: dict, replica_reads: bool = False) -> None:
    """What `read_partitions` reads that its engine keeps outside memory (PostgreSQL's old batches) is
    read in first, asynchronously: a reader of old offsets never blocks the loop."""
    partitions = broker.partitions.replica_reader() if replica_reads else broker.partitions
    budget = max(0, max_bytes)
    reads = []
    for key, target in targets:
        name = _topic_name(key, uses_ids, names_by_id)
        if name is not None:
            reads.append((name, key[1], target.fetch_offset, max(1, min(max(0, target.max_bytes), budget))))
    await partitions.prepare_reads(reads)


def _ready_check(broker: BrokerServices, targets: list[tuple[PartitionKey, FetchTarget]], min_bytes: int,
                 uses_ids: bool, names_by_id: dict, isolation: int = 0, replica_reads: bool = False) -> Callable[[], bool]:
    """The delayed fetch's condition: enough new bytes below the high watermark (or the last stable
    offset), or something to report."""
    fetchable = (broker.partitions.replica_reader() if replica_reads else broker.partitions).fetchable
    read_committed = isolation == READ_COMMITTED

    def ready() -> bool:
        accumulated = 0
        for key, target in targets:
            name = _topic_name(key, uses_ids, names_by_id)
            if name is None:
                return True
            available = fetchable(name, key[1], target.fetch_offset, max(1, min(target.max_bytes, min_bytes))
                                  if min_bytes > 1 else 1, read_committed)
            if available < 0:
                return True
            accumulated += available
            if accumulated >= max(min_bytes, 1):
                return True
        return False

    return ready


def failed_response(ctx: RequestContext, request: FetchRequest, error: ErrorCode) -> FetchResponse:
    """v7+ has a top-level error; older versions put it on every partition (FetchRequest.getErrorResponse)."""
    if ctx.api_version >= SESSIONS_FROM:
        return FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[])
    return FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[
        FetchableTopicResponse(topic=t.topic, partitions=[
            PartitionData(partition_index=p.partition, error_code=error, high_watermark=-1, last_stable_offset=-1,
                          log_start_offset=-1, aborted_transactions=[], preferred_read_replica=-1, records=None)
            for p in t.partitions])
        for t in request.topics
    ])


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    version = ctx.api_version
    uses_ids = version >= TOPIC_IDS_FROM
    names_by_id = _resolve(broker, uses_ids)
    wanted: dict[PartitionKey, FetchTarget] = {}
    for topic in request.topics:
        ref = topic.topic_id if uses_ids else topic.topic
        for p in topic.partitions:
            wanted[(ref, p.partition)] = FetchTarget(p.fetch_offset, p.partition_max_bytes, p.log_start_offset,
                                                     p.current_leader_epoch)
    targets: list[tuple[PartitionKey, FetchTarget]] = list(wanted.items())
    request.max_bytes = min(request.max_bytes, broker.config.fetch_max_bytes)
    request.min_bytes = min(request.min_bytes, request.max_bytes)
    forgotten = [
        ((f.topic_id if uses_ids else f.topic), partition)
        for f in request.forgotten_topics_data
        for partition in f.partitions
    ]
    now_ms = broker.clock.now_ms()  # fetch-session idle times: monotonic, injected
    context = broker.fetch_sessions.new_context(
        request.session_id, request.session_epoch, targets, forgotten,
        uses_topic_ids=uses_ids, now_ms=now_ms, sessions_supported=version >= SESSIONS_FROM,
    )
    if context.kind == "error":
        return FetchResponse(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    to_read = context.targets
    isolation = request.isolation_level
    replica_reads = version >= FOLLOWER_READS_FROM and broker.catalogue.clustered and request.replica_id < 0
    # Answers clients have not taken yet are bounded broker-wide (broker/network/unread_answers.py): this one
    # reads what is left of that allowance (its first batch at least), its long poll unchanged.
    unread = broker.unread_answers
    read_bytes = unread.fetch_bytes(request.max_bytes)
    await prepare_partitions(broker, to_read, read_bytes, uses_ids, names_by_id, replica_reads)
    results, total, has_error = read_partitions(broker, to_read, read_bytes, uses_ids, names_by_id, isolation,
                                                replica_reads)
    if request.max_wait_ms > 0 and to_read and total < request.min_bytes and not has_error:
        keys = []
        for key, _ in to_read:
            name = _topic_name(key, uses_ids, names_by_id)
            if name is not None:
                keys.append((name, key[1]))
        ready = _ready_check(broker, to_read, request.min_bytes, uses_ids, names_by_id, isolation, replica_reads)
        # Completed or expired, the answer is what the logs hold now.
        await broker.fetch_purgatory.wait(request.max_wait_ms, ready, keys)
        read_bytes = unread.fetch_bytes(request.max_bytes)
        await prepare_partitions(broker, to_read, read_bytes, uses_ids, names_by_id, replica_reads)
        results, total, has_error = read_partitions(broker, to_read, read_bytes, uses_ids, names_by_id, isolation,
                                                    replica_reads)
    if read_bytes < request.max_bytes and total >= read_bytes:
        unread.shrunk(request.max_bytes, read_bytes, **ctx.log_fields())
    throttle_ms = broker.quotas.record(CONSUMER_BYTE_RATE, ctx.client_id, total)
    if throttle_ms > 0:
        # Kafka's throttled fetch: no data (the bytes are not counted), only the time to back off.
        broker.quotas.record(CONSUMER_BYTE_RATE, ctx.client_id, -total)
        return await hold_back_for_old_clients(
            FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=context.session_id,
                          responses=[]), version, KIP_219_FROM)
    unread.read(ctx.peer, total)  # taken once the connection has written it (broker/network/server.py)
    chosen = context.respond(results)
    responses: list[FetchableTopicResponse] = []
    current_ref: object = object()
    for (topic_ref, partition), result in chosen:
        if topic_ref != current_ref:
            current_ref = topic_ref
            # a partition's key starts with its topic's id, or without ids its name
            if uses_ids:
                responses.append(FetchableTopicResponse(topic_id=cast(uuid.UUID, topic_ref), partitions=[]))
            else:
                responses.append(FetchableTopicResponse(topic=cast(str, topic_ref), partitions=[]))
        ok = result.error_code == ErrorCode.NONE
        records: bytes | memoryview | None = result.records
        if version < ZSTD_FROM and records:
            records = bytes(records)  # the old-format checks and conversions below work on bytes
        if ok and version < ZSTD_FROM and records and legacy_records.has_zstd(bytes(records)):
            # Kafka: a client too old for zstd gets this error rather than bytes it cannot read.
            result = _error_result(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            ok, records = False, None
        if ok and version < FIRST_BATCH_VERSION and records:
            # Inflating, rebuilding and deflating stored batches for an old client, in a worker thread,
            # so the loop serves the other clients meanwhile (on the loop, 1.2 MB of stored gzip batches
            # inflating to 60 MiB each held them all 19 s); the loop still gets the GIL every switch
            # interval while the thread rebuilds records in Python.
            records = await run_in_worker(DOWN_CONVERT, legacy_records.down_convert, bytes(records),
                                          0 if version < 2 else 1)
        responses[-1].partitions.append(PartitionData(
            partition_index=partition,
            error_code=result.error_code,
            high_watermark=result.high_watermark,
            last_stable_offset=result.last_stable_offset if ok else -1,
            log_start_offset=result.log_start_offset,
            # Kafka: a partition it does not host keeps the field's default, an empty list
            # (FetchResponse.partitionResponse); a read that failed (offset out of range) has none: null
            aborted_transactions=result.aborted if ok else ([] if result.error_code in NOT_HOSTED else None),
            preferred_read_replica=-1,
            records=cast(bytes | None, records),  # the encoder writes any buffer: views go out uncopied
        ))
    endpoints: list[NodeEndpoint] = []
    if has_error and version >= LEADER_HINTS_FROM and broker.catalogue.clustered:
        endpoints = _leader_hints(ctx, responses, names_by_id if uses_ids else None)
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=context.session_id,
                         responses=responses, node_endpoints=endpoints)


def _leader_hints(ctx: RequestContext, responses: list[FetchableTopicResponse],
                  names_by_id: dict | None) -> list[NodeEndpoint]:
    from .leader_hints import HINTED_FETCH, hint

    endpoints: dict[int, tuple[str, int]] = {}
    for topic in responses:
        name = names_by_id.get(topic.topic_id) if names_by_id is not None else topic.topic
        for p in topic.partitions:
            if p.error_code in HINTED_FETCH and name is not None:
                hint(ctx.broker, ctx.listener, name, p.partition_index, p.current_leader, endpoints)
    return [NodeEndpoint(node_id=node, host=host, port=port, rack=None) for node, (host, port) in sorted(endpoints.items())]

