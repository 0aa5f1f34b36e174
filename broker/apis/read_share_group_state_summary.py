"""ReadShareGroupStateSummary (87) v0-v1 (KIP-932): a share-partition's start offset, state and leader
epochs (and v1's count of records past the start whose delivery is complete), from the share
coordinator leading its `__share_group_state` partition; the group coordinator asks it to describe a
share group's offsets (Kafka's DescribeShareGroupOffsets). CLUSTER_ACTION on the cluster; the answers
per partition are broker/coordinators/share_state_rpc.py's."""

from __future__ import annotations

from ..coordinators.share_state_rpc import ShareStateRpcs
from ..network.router import RequestContext
from ...protocol.messages.read_share_group_state_summary_request import ReadShareGroupStateSummaryRequest
from ...protocol.messages.read_share_group_state_summary_response import (
    PartitionResult,
    ReadShareGroupStateSummaryResponse,
    ReadStateSummaryResult,
)
from .share_state_wire import error_message

API_KEY = 87
VERSIONS = (0, 1)


def failed_response(_ctx: RequestContext, request: ReadShareGroupStateSummaryRequest,
                    error: int) -> ReadShareGroupStateSummaryResponse:
    return ReadShareGroupStateSummaryResponse(results=[ReadStateSummaryResult(t.topic_id, [
        PartitionResult(p.partition, error, error_message(error), 0, 0, -1, -1) for p in t.partitions])
        for t in request.topics])


async def handle(ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    rpcs = ShareStateRpcs(ctx.broker)
    results = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            a = rpcs.read(request.group_id, topic.topic_id, p.partition, p.leader_epoch)
            if a.error:
                partitions.append(PartitionResult(p.partition, a.error, a.message, 0, 0, -1, -1))
                continue
            complete = a.delivery_complete_count if a.start_offset >= 0 else -1
            partitions.append(PartitionResult(p.partition, 0, None, a.state_epoch, a.leader_epoch, a.start_offset,
                                              complete))
        results.append(ReadStateSummaryResult(topic.topic_id, partitions))
    return ReadShareGroupStateSummaryResponse(results=results)
