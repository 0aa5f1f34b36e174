"""DescribeQuorum (55) v0-v2: the KRaft metadata quorum, as `kafka-metadata-quorum.sh describe` and
Admin.describeMetadataQuorum ask for it.

A single kbroker node is its own whole quorum: one voter (itself) that is always the leader, no
observers, no Raft log. It answers as a one-node static quorum (kraft.version 0: no directory ids)
of Kafka's would: leader = this node, epoch 1 (never re-elected), the voter caught up at this instant.
The high watermark and the voter's log end offset are the metadata offset at which its features were
finalized (ApiVersions' FinalizedFeaturesEpoch), the only metadata offset kbroker has; the voter's
endpoint (v2) is the listener the request came in on, since kbroker has no CONTROLLER listener.
Kafka answers only for `__cluster_metadata` partition 0; anything else gets
UNKNOWN_TOPIC_OR_PARTITION on each partition asked about, the other fields at their zero defaults,
as KafkaRaftClient answers it (its messages are empty strings, not null).
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_quorum_request import DescribeQuorumRequest
from ...protocol.messages.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)

API_KEY = 55
VERSIONS = (0, 2)
METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1  # one node, elected once


def failed_response(_ctx: RequestContext, _request: DescribeQuorumRequest, error: int) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=error, error_message=None, topics=[], nodes=[])


def handle(ctx: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    topics = request.topics
    if not (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC and len(topics[0].partitions) == 1
            and topics[0].partitions[0].partition_index == 0):
        return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message="", nodes=[], topics=[
            TopicData(t.topic_name, [
                PartitionData(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "This server does not host this topic-partition.", leader_id=0, leader_epoch=0,
                              high_watermark=0, current_voters=[], observers=[])
                for p in t.partitions])
            for t in topics])
    broker = ctx.broker
    now = broker.clock.wall_ms()
    offset = broker.features.epoch  # the metadata log's end, as ApiVersions' FinalizedFeaturesEpoch says
    voter = ReplicaState(replica_id=broker.node_id, log_end_offset=offset, last_fetch_timestamp=now,
                         last_caught_up_timestamp=now)
    partition = PartitionData(0, ErrorCode.NONE, "", leader_id=broker.node_id, leader_epoch=LEADER_EPOCH,
                              high_watermark=offset, current_voters=[voter], observers=[])
    host, port = broker.advertised(ctx.listener)
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message="",
                                  topics=[TopicData(METADATA_TOPIC, [partition])],
                                  nodes=[Node(broker.node_id, [Listener(ctx.listener, host, port)])])
