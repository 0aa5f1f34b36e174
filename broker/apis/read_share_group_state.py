"""ReadShareGroupState (84) v0 (KIP-932): a data partition's leader reads a share-partition's state
from the share coordinator leading its `__share_group_state` partition, as it starts the
share-partition (Kafka's persister). CLUSTER_ACTION on the cluster (broker/security/api_checks.py);
the answers per partition are broker/coordinators/share_state_rpc.py's. Kafka 4.4 lists it in
ApiVersions on its broker listeners, and so does kbroker."""

from __future__ import annotations

from ..coordinators.share_state_rpc import ShareStateRpcs
from ..network.router import RequestContext
from ...protocol.messages.read_share_group_state_request import ReadShareGroupStateRequest
from ...protocol.messages.read_share_group_state_response import (
    PartitionResult,
    ReadShareGroupStateResponse,
    ReadStateResult,
    StateBatch,
)
from .share_state_wire import error_message

API_KEY = 84
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, request: ReadShareGroupStateRequest, error: int) -> ReadShareGroupStateResponse:
    return ReadShareGroupStateResponse(results=[ReadStateResult(t.topic_id, [
        PartitionResult(p.partition, error, error_message(error), 0, -1) for p in t.partitions])
        for t in request.topics])


async def handle(ctx: RequestContext, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    rpcs = ShareStateRpcs(ctx.broker)
    results = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            answer = rpcs.read(request.group_id, topic.topic_id, p.partition, p.leader_epoch)
            partitions.append(PartitionResult(
                p.partition, answer.error, answer.message, answer.state_epoch,
                answer.start_offset if answer.error == 0 else -1,
                [StateBatch(f, last, s, c) for f, last, s, c in answer.batches]))
        results.append(ReadStateResult(topic.topic_id, partitions))
    return ReadShareGroupStateResponse(results=results)
