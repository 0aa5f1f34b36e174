"""Produce (0): validate, run the idempotence checks, append, wake long polls, then answer per acks.

Versions: v0-v13, the union of Kafka 3.9 and 4.x (v13 names topics by id: an unknown id is
UNKNOWN_TOPIC_ID). v0-v2 carry message format v0/v1 message sets, converted to one record batch
before validation (protocol/legacy_records.py), as Kafka 3.9 stores only magic 2.

Memory per request is bounded: a compressed batch is inflated as a stream of bounded chunks to
measure it, and refused with MESSAGE_TOO_LARGE past `max.inflated.batch.bytes` (a 46 KiB zstd
batch can inflate to 1 GiB); undecodable compression is CORRUPT_MESSAGE. A write the disk refuses
(ENOSPC, EIO) is KAFKA_STORAGE_ERROR for that partition, whose log is fenced until restart (see
PartitionLog.append); the connection and every other partition keep working.

A transactional batch goes only into a partition of its producer's ongoing transaction (KIP-890's
verification); from v12 (transactions v2) the broker adds the partition to the transaction itself.

acks=0 gets no response; if any partition failed, the connection is closed instead (Kafka's way of
telling a fire-and-forget producer to refresh its metadata). acks=1 and acks=-1 answer once the
appended records are durable under the broker's flush policy.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import structlog

from ..operations.quotas import PRODUCER_BYTE_RATE, hold_back_for_old_clients
from ..network.router import Deferred, RequestContext
from ..network.server import CloseConnection
from ..partitions.service import AppendResult, CheckedBatch, InlineBudget
from ..workers import PRODUCE_CHECK, run_in_worker
from ...protocol import legacy_records
from ...protocol import record_batch as rb
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.produce_request import ProduceRequest
from ...protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

if TYPE_CHECKING:
    from ..partitions.catalogue import LogConfig
    from ..services import BrokerServices
    from ..partitions.service import PartitionStore

API_KEY = 0
VERSIONS = (0, 13)
TOPIC_IDS_FROM = 13
FIRST_BATCH_VERSION = 3  # before it, message sets of format v0/v1
ZSTD_FROM = 7
KIP_219_FROM = 6  # from here clients back off on throttle_time_ms themselves
LEADER_HINTS_FROM = 10  # KIP-951: a partition's new leader in a NOT_LEADER_OR_FOLLOWER answer
TRANSACTIONS_V2_FROM = 12  # KIP-890 part 2: the broker adds a transactional batch's partition itself

log = structlog.get_logger("kbroker.produce")


def _error(index: int, code: int, message: str | None = None,
           record_errors: list[BatchIndexAndErrorMessage] | None = None, log_start_offset: int = -1
           ) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=log_start_offset,
        record_errors=record_errors or [], error_message=message,
    )


# Kafka's ReplicaManager answers these with no log start offset (UNKNOWN_LOG_APPEND_INFO); any other failure
# of a partition it hosts carries the partition's log start offset.
_NO_LOG_START = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
                           ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


def _failed(store: PartitionStore, index: int, code: int, message: str | None = None,
            record_errors: list[BatchIndexAndErrorMessage] | None = None) -> PartitionProduceResponse:
    """_error for a batch refused by a partition that exists."""
    return _error(index, code, message, record_errors, -1 if code in _NO_LOG_START else store.log_start_offset)


def failed_response(_ctx: RequestContext, request: ProduceRequest, error: ErrorCode) -> ProduceResponse | None:
    """Every partition of the request answers `error` (Kafka's ProduceRequest.getErrorResponse)."""
    if request.acks == 0:
        return None  # Kafka closes an acks=0 connection instead; the server does the same for None
    return ProduceResponse(throttle_time_ms=0, responses=[
        TopicProduceResponse(name=t.name, topic_id=t.topic_id,
                             partition_responses=[_error(p.index, error) for p in t.partition_data])
        for t in request.topic_data
    ])


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | Deferred | None:
    version = ctx.api_version
    acks = request.acks
    now_ms = ctx.broker.clock.wall_ms()  # LogAppendTime and producer-state times: wall clock, injected
    throttle_ms = ctx.broker.quotas.record(PRODUCER_BYTE_RATE, ctx.client_id, sum(
        len(p.records or b"") for t in request.topic_data for p in t.partition_data))
    responses: list[TopicProduceResponse] = []
    durable_waits: list[AppendResult] = []
    any_error = False
    # Kafka refuses the whole request when any batch is transactional; malformed batches are left
    # to the per-partition validation below.
    transactional_records = any(
        rb.read_header(part.records).is_transactional
        for topic in request.topic_data for part in topic.partition_data
        if part.records and len(part.records) >= rb.HEADER_SIZE and part.records[rb.MAGIC_OFFSET] == 2
    )

    budget = InlineBudget()  # what checking this request's batches may spend on the loop
    names_by_id = ctx.broker.catalogue.names_by_id() if version >= TOPIC_IDS_FROM else {}
    not_added: dict[tuple[str, int], PartitionProduceResponse] = {}
    if transactional_records and version >= TRANSACTIONS_V2_FROM and request.transactional_id is not None:
        not_added = await _add_to_transaction(ctx, request, names_by_id)
    for topic in request.topic_data:
        name = topic.name if version < TOPIC_IDS_FROM else names_by_id.get(topic.topic_id)
        out = TopicProduceResponse(name=name or "", topic_id=topic.topic_id, partition_responses=[])
        responses.append(out)
        if name is None:  # v13+: an id this broker does not know
            out.partition_responses.extend(_error(p.index, ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partition_data)
            any_error = True
            continue
        for part in topic.partition_data:
            refused = not_added.get((name, part.index))
            result = refused if refused is not None else _produce_partition(
                ctx, request, name, part.index, part.records, now_ms, transactional_records, durable_waits, budget)
            while isinstance(result, _CheckInWorker):
                # Past the request's inline budget: checked on the worker thread, then everything
                # before the check is asked again (the topic, its config or the transaction may have
                # moved on; a verdict for another log or config is not used).
                result.verdict = await run_in_worker(
                    PRODUCE_CHECK, ctx.broker.partitions.check_batch, part.records, result.config, now_ms,
                    allow_zstd=version >= ZSTD_FROM, budget=None)
                now_ms = ctx.broker.clock.wall_ms()
                if version >= TOPIC_IDS_FROM and _topic_id(ctx, name) != topic.topic_id:
                    result = _error(part.index, ErrorCode.UNKNOWN_TOPIC_ID)
                    break
                result = _produce_partition(ctx, request, name, part.index, part.records, now_ms,
                                            transactional_records, durable_waits, budget, checked=result)
            assert isinstance(result, PartitionProduceResponse)
            if result.error_code != ErrorCode.NONE:
                any_error = True
            out.partition_responses.append(result)

    if acks == 0:
        if any_error:
            raise CloseConnection("acks=0 produce failed on at least one partition")
        return None
    endpoints: list[NodeEndpoint] = []
    if any_error and version >= LEADER_HINTS_FROM and ctx.broker.catalogue.clustered:
        endpoints = _leader_hints(ctx, responses)
    if not durable_waits:
        return await hold_back_for_old_clients(
            ProduceResponse(responses=responses, throttle_time_ms=throttle_ms, node_endpoints=endpoints),
            ctx.api_version, KIP_219_FROM)
    # The batches are appended; only their fsync remains. Deferring lets this connection's next
    # Produce append meanwhile, so pipelined requests share one fsync (group commit).
    return Deferred(_after_durable(ctx, responses, durable_waits, throttle_ms, acks, endpoints))


async def _after_durable(ctx: RequestContext, responses: list[TopicProduceResponse],
                         durable_waits: list[AppendResult], throttle_ms: int = 0, acks: int = 1,
                         endpoints: list[NodeEndpoint] | None = None) -> ProduceResponse:
    # Plain futures, not a task per partition: a request naming 1,000 partitions waits on 1,000 logs.
    failed: list[BaseException] = []
    # A partition whose leadership ended before its records were durable (an engine that fences a
    # deposed leader's writes, as the PostgreSQL one does): nothing was written, NOT_LEADER_OR_FOLLOWER.
    deposed: set[tuple[str, int]] = set()
    waiting: list[asyncio.Future[None]] = []
    waited: list[tuple[str, int]] = []
    for appended in durable_waits:
        key = (appended.store.topic, appended.store.partition)
        try:
            future = appended.durable()
        except Exception as e:  # noqa: BLE001 - a fenced or closed log: reported below like a failed fsync
            if _not_leader(e):
                deposed.add(key)
            else:
                failed.append(e)
            continue
        if future is not None:
            waiting.append(future)
            waited.append(key)
    if waiting:
        results = await asyncio.gather(*waiting, return_exceptions=True)
        for key, result in zip(waited, results):
            if isinstance(result, BaseException) and _not_leader(result):
                deposed.add(key)
            elif isinstance(result, BaseException):
                failed.append(result)
    if deposed:
        for out in responses:
            for i, p in enumerate(out.partition_responses):
                if p.error_code == ErrorCode.NONE and (out.name, p.index) in deposed:
                    out.partition_responses[i] = _error(p.index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if acks == -1 and not failed and ctx.broker.catalogue.clustered:
        _isr_after_append(ctx, responses, durable_waits)
    if failed:
        # The records are in the log but not known to be on disk: report a storage error everywhere
        # rather than a success we cannot stand behind.
        log.error("produce_flush_failed", error=repr(failed[0]), **ctx.log_fields())
        for out in responses:
            for i, p in enumerate(out.partition_responses):
                if p.error_code == ErrorCode.NONE:
                    out.partition_responses[i] = _error(p.index, ErrorCode.KAFKA_STORAGE_ERROR, str(failed[0]))
    return await hold_back_for_old_clients(
        ProduceResponse(responses=responses, throttle_time_ms=throttle_ms, node_endpoints=endpoints or []),
        ctx.api_version, KIP_219_FROM)


def _not_leader(error: BaseException) -> bool:
    return isinstance(error, KafkaError) and error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def _leader_hints(ctx: RequestContext, responses: list[TopicProduceResponse]) -> list[NodeEndpoint]:
    from .leader_hints import HINTED_PRODUCE, hint

    endpoints: dict[int, tuple[str, int]] = {}
    for out in responses:
        for p in out.partition_responses:
            if p.error_code in HINTED_PRODUCE:
                hint(ctx.broker, ctx.listener, out.name, p.index, p.current_leader, endpoints)
    return [NodeEndpoint(node_id=node, host=host, port=port, rack=None) for node, (host, port) in sorted(endpoints.items())]


def _isr_after_append(ctx: RequestContext, responses: list[TopicProduceResponse],
                      durable_waits: list[AppendResult]) -> None:
    """acks=all, several nodes: a partition whose ISR fell below min.insync.replicas while its
    records became durable answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's DelayedProduce)."""
    broker = ctx.broker
    short: set[tuple[str, int]] = set()
    for appended in durable_waits:
        store = appended.store
        info = broker.catalogue.topic(store.topic)
        if info is None:
            continue
        try:
            broker.partitions.check_min_isr(info, store.partition, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        except KafkaError:
            short.add((store.topic, store.partition))
    if short:
        for out in responses:
            for i, p in enumerate(out.partition_responses):
                if p.error_code == ErrorCode.NONE and (out.name, p.index) in short:
                    out.partition_responses[i] = _error(p.index, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


# Kafka's verification errors a producer would not retry as it should, answered as one it does
# (ReplicaManager's postVerificationCallback); CONCURRENT_TRANSACTIONS stays as it is for v2.
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                           ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


async def _add_to_transaction(ctx: RequestContext, request: ProduceRequest, names_by_id: dict[uuid.UUID, str]
                              ) -> dict[tuple[str, int], PartitionProduceResponse]:
    """Transactions v2 (Produce v12+, KIP-890 part 2): the partitions of the request's transactional
    batches are added to their producer's transaction by the broker (Kafka's AddPartitionsToTxnManager
    with ADD_PARTITION); the client sends no AddPartitionsToTxn. Returns the refusals of partitions
    that could not be added (a stale epoch is INVALID_PRODUCER_EPOCH); the rest go on to be appended."""
    catalogue = ctx.broker.catalogue
    wanted: list[tuple[str, int]] = []
    producer: tuple[int, int] | None = None
    for topic in request.topic_data:
        name = topic.name if ctx.api_version < TOPIC_IDS_FROM else names_by_id.get(topic.topic_id)
        for part in topic.partition_data:
            records = part.records
            if (name is None or not records or len(records) < rb.HEADER_SIZE or records[rb.MAGIC_OFFSET] != 2
                    or not catalogue.has_partition(name, part.index)):
                continue  # answered by the partition's own checks
            header = rb.read_header(records)
            if header.is_transactional:
                producer = producer or (header.producer_id, header.producer_epoch)
                wanted.append((name, part.index))
    if producer is None:
        return {}
    assert request.transactional_id is not None
    error = await ctx.broker.transactions.add_implicitly(request.transactional_id, producer[0], producer[1], wanted)
    if error == ErrorCode.NONE:
        return {}
    message = (f"Unable to add the partition to the transaction of producer {producer[0]} epoch {producer[1]}: "
               f"{error.name}")
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        error = ErrorCode.NOT_ENOUGH_REPLICAS
    return {tp: _error(tp[1], error, message) for tp in wanted}


def _verify_transactional(broker: BrokerServices, transactional_id: str, topic: str, index: int,
                          records: bytes | memoryview | None, version: int) -> PartitionProduceResponse | None:
    """KIP-890's defence: a transactional batch goes only into a partition of its producer's ongoing
    transaction (a late batch of an aborted or timed-out transaction would otherwise hang the LSO).
    Not in it: TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before (Kafka's DEFAULT_ERROR clients)."""
    if not records or len(records) < rb.HEADER_SIZE or records[rb.MAGIC_OFFSET] != 2:
        return None  # malformed: the batch validation below answers it
    header = rb.read_header(records)
    if not header.is_transactional:
        return None
    error = broker.transactions.verify_produce(transactional_id, header.producer_id, header.producer_epoch, (topic, index))
    if error == ErrorCode.TRANSACTION_ABORTABLE and version <= 10:
        error = ErrorCode.INVALID_TXN_STATE
    if error != ErrorCode.NONE:
        return _error(index, error, f"{topic}-{index} is not in an ongoing transaction of producer "
                                    f"{header.producer_id} epoch {header.producer_epoch}")
    return None


class _CheckInWorker:
    """_produce_partition's answer when checking the batch would pass the request's inline budget:
    the log and config to check it for, and the worker's `verdict` once it has one."""

    __slots__ = ("store", "config", "verdict")

    def __init__(self, store: PartitionStore, config: LogConfig) -> None:
        self.store = store
        self.config = config
        self.verdict: CheckedBatch | None = None


def _topic_id(ctx: RequestContext, name: str) -> uuid.UUID | None:
    info = ctx.broker.catalogue.topic(name)
    return info.topic_id if info is not None else None


def _produce_partition(
    ctx: RequestContext,
    request: ProduceRequest,
    topic: str,
    index: int,
    records: bytes | memoryview | None,  # a view of the request frame when big (wire.FrameIO)
    now_ms: int,
    transactional_records: bool,
    durable_waits: list[AppendResult],
    budget: InlineBudget,
    checked: _CheckInWorker | None = None,
) -> PartitionProduceResponse | _CheckInWorker:
    """Validate and append one partition's batch (plain code: no await, so 1,000 partitions cost no
    coroutine each); `_CheckInWorker` when the batch's check is for the worker (`checked`: that, with
    its verdict). An unknown topic is UNKNOWN_TOPIC_OR_PARTITION: as in Kafka, Produce never creates
    one (a client's Metadata request does, under auto.create.topics.enable)."""
    broker = ctx.broker
    if request.acks not in (-1, 0, 1):
        return _error(index, ErrorCode.INVALID_REQUIRED_ACKS)
    if transactional_records:
        if request.transactional_id is None:
            # KafkaApis: transactional records without a transactional id fail authorization.
            return _error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        refused = _verify_transactional(broker, request.transactional_id, topic, index, records, ctx.api_version)
        if refused is not None:
            return refused
    store, error = broker.partitions.for_produce(topic, index)
    if error == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return _error(index, error, f"Cannot append to internal topic {topic}")
    if store is None:
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return _error(index, error, f"This server does not host this topic-partition: {topic}-{index}")
        return _error(index, error)
    if not records:
        return _error(index, ErrorCode.INVALID_RECORD, "produce request carries no record batch")
    if ctx.api_version < FIRST_BATCH_VERSION:
        try:
            records = legacy_records.to_batch(bytes(records))  # bounded as a whole (legacy_records)
        except KafkaError as e:
            return _error(index, e.code, str(e))
    config = store.config
    if checked is not None and checked.store is store and checked.config is config:
        verdict = checked.verdict
    else:
        verdict = broker.partitions.check_batch(records, config, now_ms, allow_zstd=ctx.api_version >= ZSTD_FROM,
                                                budget=budget if ctx.api_version >= FIRST_BATCH_VERSION else None)
    if verdict is None:
        return _CheckInWorker(store, config)
    if verdict.error is not None:
        log.warning("produce_batch_refused", topic=topic, partition=index, error=str(verdict.error),
                    **ctx.log_fields())
        return _failed(store, index, verdict.error.code, str(verdict.error))
    headers = verdict.headers
    assert headers is not None
    keyless = verdict.keyless
    if keyless:
        return _failed(store, index, ErrorCode.INVALID_RECORD, "One or more records have been rejected due to "
                       "missing keys", [BatchIndexAndErrorMessage(i, "Compacted topic cannot accept message without key")
                                        for i in keyless])
    try:
        # The idempotence check, the append and the producer state's update are one step of the store.
        appended = broker.partitions.append_client(store, records, headers, now_ms, request.acks)
    except KafkaError as e:
        return _failed(store, index, e.code, str(e))
    if request.acks != 0:
        durable_waits.append(appended)
    return PartitionProduceResponse(
        index=index, error_code=ErrorCode.NONE, base_offset=appended.base_offset,
        log_append_time_ms=appended.log_append_time_ms, log_start_offset=appended.log_start_offset,
    )
