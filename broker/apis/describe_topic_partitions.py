"""DescribeTopicPartitions (75) v0: Metadata's topic description, paged by partitions (KIP-966).

As Kafka's DescribeTopicPartitionsRequestHandler: the topics asked for (every topic when the list
is empty) in name order, starting at the cursor's topic and partition; at most
ResponsePartitionLimit partitions (capped by the broker's max.request.partition.size.limit, 2000)
per answer, and NextCursor names the first partition left out. A cursor naming a topic that is not
in a non-empty topic list is an invalid request. Unknown topics are answered with
UNKNOWN_TOPIC_OR_PARTITION and take no room on the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.topic_names import is_internal_topic
from ..partitions.catalogue import NO_LEADER
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_topic_partitions_request import Cursor as RequestCursor
from ...protocol.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from ...protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 75
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, request: DescribeTopicPartitionsRequest,
                    error: int) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(topics=[
        DescribeTopicPartitionsResponseTopic(error_code=error, name=t.name) for t in request.topics])
MAX_PARTITIONS_PER_PAGE = 2000  # Kafka's max.request.partition.size.limit default


class InvalidCursor(Exception):
    pass


def _partition(broker: BrokerServices, topic: str, index: int) -> DescribeTopicPartitionsResponsePartition:
    led = broker.catalogue.leadership(topic, index)
    assert led is not None
    return DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE if led.leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=index, leader_id=led.leader, leader_epoch=led.epoch,
        replica_nodes=led.replicas, isr_nodes=led.isr, eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=led.offline,
    )


def describe_page(broker: BrokerServices, names: list[str], cursor: Cursor | RequestCursor | None,
                  limit: int) -> tuple[list[DescribeTopicPartitionsResponseTopic], Cursor | None]:
    """(topics, next cursor) for one page; `names` empty means every topic."""
    topics = broker.catalogue.topics()
    wanted = sorted(set(names)) if names else sorted(topics)
    if cursor is not None and names and cursor.topic_name not in wanted:
        raise InvalidCursor(f"the cursor's topic {cursor.topic_name!r} is not in the topic list")
    limit = max(1, min(limit, MAX_PARTITIONS_PER_PAGE))
    out: list[DescribeTopicPartitionsResponseTopic] = []
    room = limit
    for name in wanted:
        if cursor is not None and name < cursor.topic_name:
            continue
        info = topics.get(name)
        if info is None:
            out.append(DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if room == 0:
            return out, Cursor(topic_name=name, partition_index=first)
        last = min(info.num_partitions, first + room)
        out.append(DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id, is_internal=is_internal_topic(name),
            partitions=[_partition(broker, name, p) for p in range(first, last)],
        ))
        room -= last - first
        if last < info.num_partitions:
            return out, Cursor(topic_name=name, partition_index=last)
    return out, None


async def handle(ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    from ..network.server import CloseConnection

    try:
        topics, cursor = describe_page(ctx.broker, [t.name for t in request.topics], request.cursor,
                                       request.response_partition_limit)
    except InvalidCursor as e:
        # Kafka throws InvalidRequestException from the handler, which closes the connection.
        raise CloseConnection(str(e)) from None
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=cursor)
