"""CreatePartitions (37), v0-v3: grow a topic's partition count (never shrink it).

Internal topics are refused with POLICY_VIOLATION (broker/partitions/internal_topics.py): a group's
coordinator partition is its id's hash modulo the partition count, so growing `__consumer_offsets`
would orphan every committed offset at the next restart. Kafka 4.4 accepts it (KAFKA-14418 was not
merged); its count is `offsets.topic.num.partitions`, fixed at creation.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..partitions import internal_topics
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from ...protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 37
VERSIONS = (0, 3)


def _check(broker: BrokerServices, topic: CreatePartitionsTopic) -> None:
    info = broker.catalogue.topics().get(topic.name)
    if info is None:
        raise KafkaError(f"Topic '{topic.name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    internal_topics.check_new_partitions(topic.name)
    current = info.num_partitions
    if topic.count == current:
        raise KafkaError(f"Topic already has {current} partition(s).", ErrorCode.INVALID_PARTITIONS)
    if topic.count < current:
        raise KafkaError(f"The topic {topic.name} currently has {current} partition(s); {topic.count} would not "
                         f"be an increase.", ErrorCode.INVALID_PARTITIONS)
    if topic.assignments is not None:
        added = topic.count - current
        if len(topic.assignments) != added:
            raise KafkaError(f"Attempted to add {added} additional partition(s), but only "
                             f"{len(topic.assignments)} assignment(s) were specified.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        for a in topic.assignments:
            stray = [b for b in a.broker_ids if b != broker.node_id]
            if stray:
                raise KafkaError(f"The manual partition assignment includes broker {stray[0]}, but no such broker is "
                                 f"registered.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            if len(a.broker_ids) != 1:
                raise KafkaError("The manual partition assignment includes a partition with 1 replica(s) expected, "
                                 f"but {len(a.broker_ids)} given.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)


def failed_response(_ctx: RequestContext, request: CreatePartitionsRequest, error: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        CreatePartitionsTopicResult(name=t.name, error_code=error, error_message=None) for t in request.topics])


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)  # one pass: a request may name 100,000
    results = []
    done: set[str] = set()
    for topic in request.topics:
        if topic.name in done:
            continue
        done.add(topic.name)
        result = CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        if counts[topic.name] > 1:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            continue
        try:
            with internal_topics.reported(ctx, topic.name, "create_partitions", count=topic.count,
                                          validate_only=request.validate_only):
                _check(broker, topic)
                await broker.catalogue.add_partitions_async(topic.name, topic.count,
                                                            validate_only=request.validate_only)
        except KafkaError as e:
            result.error_code, result.error_message = e.code, str(e)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
