"""Produce (0): validate, run the idempotence checks, append, wake long polls, then answer per acks.

Versions: v3-v11 are served. Like Kafka 4.x (KAFKA-18659) we advertise min version 0, because
librdkafka will not produce to a broker whose Produce range starts above 0, yet v0-2 requests are
refused by closing the connection, which is what Kafka does with a version it does not accept.

acks=0 gets no response; if any partition failed, the connection is closed instead (Kafka's way of
telling a fire-and-forget producer to refresh its metadata). acks=1 and acks=-1 answer once the
appended records are durable under the broker's flush policy.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from kbroker.broker.log.manager import is_internal_topic
from kbroker.broker.router import Deferred, RequestContext
from kbroker.broker.server import CloseConnection
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.messages.produce_request import ProduceRequest
from kbroker.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

API_KEY = 0
VERSIONS = (0, 11)
MIN_ACCEPTED_VERSION = 3
LEADER_EPOCH = 0

log = structlog.get_logger("kbroker.produce")


def _error(index: int, code: int, message: str | None = None,
           record_errors: list[BatchIndexAndErrorMessage] | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
        record_errors=record_errors or [], error_message=message,
    )


def _null_key_errors(records: bytes) -> list[BatchIndexAndErrorMessage]:
    """Kafka lists each keyless record of a batch sent to a compacted topic (LogValidator)."""
    out = []
    for _, decoded in rb.decode_batches(records):
        base = decoded[0].offset if decoded else 0
        for record in decoded:
            if record.key is None:
                out.append(BatchIndexAndErrorMessage(record.offset - base, "Compacted topic cannot accept message without key"))
    return out


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | Deferred | None:
    version = ctx.api_version
    if version < MIN_ACCEPTED_VERSION:
        raise CloseConnection(f"Produce v{version} is not supported (v{MIN_ACCEPTED_VERSION}+ only)")
    acks = request.acks
    now_ms = int(time.time() * 1000)
    responses: list[TopicProduceResponse] = []
    durable_waits: list[tuple[object, int]] = []
    any_error = False
    # Kafka refuses the whole request when any batch is transactional; malformed batches are left
    # to the per-partition validation below.
    transactional_records = any(
        rb.read_header(part.records).is_transactional
        for topic in request.topic_data for part in topic.partition_data
        if part.records and len(part.records) >= rb.HEADER_SIZE and part.records[rb.MAGIC_OFFSET] == 2
    )

    for topic in request.topic_data:
        name = topic.name
        out = TopicProduceResponse(name=name, topic_id=topic.topic_id, partition_responses=[])
        responses.append(out)
        for part in topic.partition_data:
            result = await _produce_partition(ctx, request, name, part.index, part.records, now_ms,
                                              transactional_records, durable_waits)
            if result.error_code != ErrorCode.NONE:
                any_error = True
            out.partition_responses.append(result)

    if acks == 0:
        if any_error:
            raise CloseConnection("acks=0 produce failed on at least one partition")
        return None
    if not durable_waits:
        return ProduceResponse(responses=responses, throttle_time_ms=0)
    # The batches are appended; only their fsync remains. Deferring lets this connection's next
    # Produce append meanwhile, so pipelined requests share one fsync (group commit).
    return Deferred(_after_durable(ctx, responses, durable_waits))


async def _after_durable(ctx: RequestContext, responses: list[TopicProduceResponse],
                         durable_waits: list[tuple[object, int]]) -> ProduceResponse:
    results = await asyncio.gather(*(plog.wait_durable(offset) for plog, offset in durable_waits),
                                   return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        # The records are in the log but not known to be on disk: report a storage error everywhere
        # rather than a success we cannot stand behind.
        log.error("produce_flush_failed", error=repr(failed[0]), **ctx.log_fields())
        for out in responses:
            for i, p in enumerate(out.partition_responses):
                if p.error_code == ErrorCode.NONE:
                    out.partition_responses[i] = _error(p.index, ErrorCode.KAFKA_STORAGE_ERROR, str(failed[0]))
    return ProduceResponse(responses=responses, throttle_time_ms=0)


async def _produce_partition(
    ctx: RequestContext,
    request: ProduceRequest,
    topic: str,
    index: int,
    records: bytes | None,
    now_ms: int,
    transactional_records: bool,
    durable_waits: list,
) -> PartitionProduceResponse:
    broker = ctx.broker
    if request.acks not in (-1, 0, 1):
        return _error(index, ErrorCode.INVALID_REQUIRED_ACKS)
    if transactional_records:
        if request.transactional_id is None:
            # KafkaApis: transactional records without a transactional id fail authorization.
            return _error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        # There is no transaction coordinator: the partition cannot have been added to a transaction.
        return _error(index, ErrorCode.INVALID_TXN_STATE, "transactions are not supported by this broker")
    if is_internal_topic(topic):
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
    info = broker.logs.topics().get(topic)
    if info is None and broker.config.auto_create_topics_enable:
        try:
            info = await broker.auto_create_topic(topic)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                return _error(index, e.code, str(e))
            info = broker.logs.topics().get(topic)
    plog = broker.logs.get_log(topic, index) if info is not None else None
    if plog is None:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      f"This server does not host this topic-partition: {topic}-{index}")
    if not records:
        return _error(index, ErrorCode.INVALID_RECORD, "produce request carries no record batch")
    try:
        headers = rb.validate_produced_batches(records, single_batch=True, allow_zstd=ctx.api_version >= 7)
    except KafkaError as e:
        return _error(index, e.code, str(e))
    header = headers[0]
    if plog.config.compact:
        try:
            missing = _null_key_errors(records)
        except KafkaError as e:
            return _error(index, e.code, str(e))
        if missing:
            return _error(index, ErrorCode.INVALID_RECORD,
                          "One or more records have been rejected due to missing keys", missing)
    state = None
    if header.producer_id >= 0:
        state = broker.producer_states.for_log(plog)
        try:
            duplicate = state.check(header)
        except KafkaError as e:
            return _error(index, e.code, str(e))
        if duplicate is not None:
            # A retry of a batch already in the log: answer with where it went, append nothing.
            durable_waits.append((plog, duplicate.last_offset))
            return PartitionProduceResponse(index=index, error_code=ErrorCode.NONE,
                                            base_offset=duplicate.first_offset, log_append_time_ms=-1,
                                            log_start_offset=plog.log_start_offset)
    if (faults := getattr(broker, "partition_faults", None)) and (injected := faults.take("Produce", topic, index)):
        return _error(index, injected, "injected by a test control")
    try:
        appended = plog.append(records, leader_epoch=LEADER_EPOCH, now_ms=now_ms, single_batch=True)
    except KafkaError as e:
        return _error(index, e.code, str(e))
    if state is not None:
        state.update(header, appended.base_offset, appended.last_offset, now_ms)
    observations = getattr(broker, "observations", None)
    if observations is not None:
        observations.bytes_in[topic] += len(records)
    purgatory = getattr(broker, "fetch_purgatory", None)
    if purgatory is not None:
        purgatory.notify(topic, index)
    if request.acks != 0:
        durable_waits.append((plog, appended.last_offset))
    return PartitionProduceResponse(
        index=index, error_code=ErrorCode.NONE, base_offset=appended.base_offset,
        log_append_time_ms=appended.log_append_time_ms, log_start_offset=appended.log_start_offset,
    )
