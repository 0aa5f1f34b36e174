"""Metadata (3): this node is the only broker and the controller; every partition is led here.

Below v12 a topic must be named and may not be asked for by id (v10-11 carry the fields but Kafka
refuses them): such a request gets Kafka's whole-request INVALID_REQUEST answer, each requested
topic echoed with the error (a null name as ""), as in MetadataRequest.getErrorResponse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..storage.log.manager import is_internal_topic
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.metadata_request import MetadataRequest
from ...protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from ...protocol.wire import ZERO_UUID

if TYPE_CHECKING:
    from ..storage.log.manager import TopicInfo
    from ..services import BrokerServices

API_KEY = 3
VERSIONS = (0, 13)


def describe_topic(broker: BrokerServices, info: TopicInfo) -> MetadataResponseTopic:
    node = broker.node_id
    # Every partition names the same one node, so all share these lists (only the encoder reads
    # them): an answer for a topic of thousands of partitions makes no three lists per partition.
    this_node = [node]
    none: list[int] = []
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=is_internal_topic(info.name),
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.NONE, partition_index=p, leader_id=node, leader_epoch=0,
                replica_nodes=this_node, isr_nodes=this_node, offline_replicas=none,
            )
            for p in range(info.num_partitions)
        ],
    )


def failed_response(_ctx: RequestContext, request: MetadataRequest, error: ErrorCode) -> MetadataResponse:
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
        MetadataResponseTopic(error_code=error, name=t.name or "", topic_id=t.topic_id, is_internal=False,
                              partitions=[])
        for t in request.topics or ()
    ])


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    host, port = broker.advertised(ctx.listener)
    topics = broker.logs.topics()
    out: list[MetadataResponseTopic] = []
    if ctx.api_version < 12 and request.topics:
        for t in request.topics:
            if t.name is None or t.topic_id != ZERO_UUID:
                return failed_response(ctx, request, ErrorCode.INVALID_REQUEST)
    # v0 has no null: an empty list there means "all topics".
    wanted = request.topics
    if wanted is None or (ctx.api_version == 0 and not wanted):
        out = [describe_topic(broker, info) for name, info in sorted(topics.items())]
    else:
        # Each topic once, as Kafka answers (it keeps the names in a set): a request naming one
        # topic a million times is answered with one entry, not a million.
        wanted = list({(t.name, t.topic_id): t for t in wanted}.values())
        by_id = {info.topic_id: info for info in topics.values()}
        auto = request.allow_auto_topic_creation if ctx.api_version >= 4 else True
        for t in wanted:
            if t.name is None and t.topic_id != ZERO_UUID:
                info = by_id.get(t.topic_id)
                if info is None:
                    out.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                     topic_id=t.topic_id))
                else:
                    out.append(describe_topic(broker, info))
                continue
            name = t.name or ""
            info = topics.get(name)
            if info is None and auto and broker.config.auto_create_topics_enable:
                try:
                    info = await broker.auto_create_topic(name)
                except KafkaError as e:
                    out.append(MetadataResponseTopic(error_code=e.code, name=name))
                    continue
            if info is None:
                out.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name))
            else:
                out.append(describe_topic(broker, info))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=out,
    )
