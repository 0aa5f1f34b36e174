"""DescribeProducers (61) v0: the active producers of partitions (kafka-transactions.sh
describe-producers): epoch, last sequence, last timestamp and the first offset of an open transaction."""

from __future__ import annotations

from .repeats import distinct, in_request_order
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_producers_request import DescribeProducersRequest
from ...protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)

API_KEY = 61
VERSIONS = (0, 0)
E = ErrorCode


def failed_response(_ctx: RequestContext, request: DescribeProducersRequest, error: int) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=[
        TopicResponse(topic.name, [PartitionResponse(i, error, None, []) for i in topic.partition_indexes])
        for topic in request.topics])


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    # A partition named more than once is described once, its entry standing in each place.
    keys = [(topic.name, index) for topic in request.topics for index in topic.partition_indexes]
    answers = {key: _partition(ctx, *key) for key in distinct(keys)}
    ordered = iter(in_request_order(keys, answers))
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResponse(topic.name, [next(ordered) for _ in topic.partition_indexes]) for topic in request.topics])


def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    error, producers = ctx.broker.partitions.producers(topic, index)
    if error != E.NONE:  # Kafka names the reason for a topic it does not know, not for a partition past the last
        unknown = error == E.UNKNOWN_TOPIC_OR_PARTITION and ctx.broker.catalogue.topic(topic) is None
        return PartitionResponse(index, error, "This server does not host this topic-partition." if unknown else None,
                                 [])
    return PartitionResponse(index, E.NONE, None, [
        ProducerState(
            producer_id=entry.producer_id, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp_ms, coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=txn_start,
        )
        for entry, txn_start in producers
    ])
