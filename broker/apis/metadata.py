"""Metadata (3): this node is the only broker and the controller; each partition as the catalogue
places it (broker/partitions/catalogue.py): on one node led here in its leader epoch, or leaderless
(LEADER_NOT_AVAILABLE, this node offline) when its topic is fenced.

Below v12 a topic must be named and may not be asked for by id (v10-11 carry the fields but Kafka
refuses them): such a request gets Kafka's whole-request INVALID_REQUEST answer, each requested
topic echoed with the error (a null name as ""), as in MetadataRequest.getErrorResponse.

Auto-creation makes `__consumer_offsets` and `__transaction_state` with their coordinators' own
settings (LEADER_NOT_AVAILABLE meanwhile); `__cluster_metadata` and `__share_group_state` are never
made by it (UNKNOWN_TOPIC_OR_PARTITION and an `internal_topic_change_refused` event;
broker/partitions/internal_topics.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.topic_names import is_internal_topic
from ..partitions import internal_topics
from ..partitions.catalogue import NO_LEADER
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
    from ..partitions.catalogue import TopicInfo
    from ..services import BrokerServices

API_KEY = 3
VERSIONS = (0, 13)


def describe_topic(broker: BrokerServices, info: TopicInfo) -> MetadataResponseTopic:
    leadership = broker.catalogue.leadership
    partitions = []
    for p in range(info.num_partitions):
        # On one node every partition shares its epoch's one Leadership and its lists (only the
        # encoder reads them): an answer for thousands of partitions makes no three lists each.
        led = leadership(info.name, p)
        assert led is not None
        partitions.append(MetadataResponsePartition(
            error_code=ErrorCode.NONE if led.leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p, leader_id=led.leader, leader_epoch=led.epoch,
            replica_nodes=led.replicas, isr_nodes=led.isr, offline_replicas=led.offline,
        ))
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=is_internal_topic(info.name),
        partitions=partitions,
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
    topics = broker.catalogue.topics()
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
        ids = list(dict.fromkeys(t.topic_id for t in wanted if t.topic_id != ZERO_UUID))
        if ids:
            # By topic id whenever any id is given, names ignored (the Java client sends name "" with
            # its ids); the unknown ids first, as KafkaApis.handleTopicMetadataRequest answers.
            by_id = {info.topic_id: info for info in topics.values()}
            out = [MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=tid)
                   for tid in ids if tid not in by_id]
            out += [describe_topic(broker, by_id[tid]) for tid in ids if tid in by_id]
            wanted = []
        auto = request.allow_auto_topic_creation if ctx.api_version >= 4 else True
        for t in wanted:
            name = t.name or ""
            info = topics.get(name)
            if info is None and auto and broker.config.auto_create_topics_enable:
                try:
                    with internal_topics.reported(ctx, name, "metadata_auto_create"):
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
