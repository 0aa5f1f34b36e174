"""ListPartitionReassignments (46) v0, as Kafka's controller answers it: the reassignments under way,
of every topic (a null list) or of the partitions named (those not being reassigned, and unknown
topics, left out). On one node none is ever under way, so the answer lists none; with several nodes
in this process (`--nodes N`) one is under way while a node it adds is stopped (cluster_catalogue.reassign)."""

from __future__ import annotations

from ..network.router import RequestContext
from ..partitions.cluster_catalogue import local_cluster
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from ...protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

API_KEY = 46
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    topics: list[OngoingTopicReassignment] = []
    cluster = local_cluster(ctx.broker.catalogue)
    if cluster is not None:
        ongoing = cluster.reassignments()
        asked = None if request.topics is None else {(t.name, p) for t in request.topics for p in t.partition_indexes}
        by_topic: dict[str, OngoingTopicReassignment] = {}
        for (topic, partition), (replicas, adding, removing) in ongoing.items():
            if asked is None or (topic, partition) in asked:
                by_topic.setdefault(topic, OngoingTopicReassignment(name=topic)).partitions.append(
                    OngoingPartitionReassignment(partition, replicas, adding, removing))
        topics = list(by_topic.values())
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                              topics=topics)
