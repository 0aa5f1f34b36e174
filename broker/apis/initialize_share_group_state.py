"""InitializeShareGroupState (83) v0 (KIP-932): the group coordinator starts share-partitions' states at
a start offset with a state epoch (a share group's new topics; AlterShareGroupOffsets), at the share
coordinator leading each one's `__share_group_state` partition: the state starts afresh, answered
once durable; a state epoch below the last one is FENCED_STATE_EPOCH. CLUSTER_ACTION on the cluster;
the answers are broker/coordinators/share_state_rpc.py's."""

from __future__ import annotations

import asyncio

from ..coordinators.share_state_rpc import ShareStateRpcs
from ..network.router import RequestContext
from ...protocol.messages.initialize_share_group_state_request import InitializeShareGroupStateRequest
from ...protocol.messages.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse,
    InitializeStateResult,
    PartitionResult,
)
from .share_state_wire import error_message, grouped

API_KEY = 83
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, request: InitializeShareGroupStateRequest,
                    error: int) -> InitializeShareGroupStateResponse:
    return InitializeShareGroupStateResponse(results=[InitializeStateResult(t.topic_id, [
        PartitionResult(p.partition, error, error_message(error)) for p in t.partitions]) for t in request.topics])


async def handle(ctx: RequestContext, request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    rpcs = ShareStateRpcs(ctx.broker)
    keys = [(t.topic_id, p) for t in request.topics for p in t.partitions]
    answers = await asyncio.gather(*(
        rpcs.initialize(request.group_id, topic_id, p.partition, p.state_epoch, p.start_offset)
        for topic_id, p in keys))
    return InitializeShareGroupStateResponse(results=grouped(keys, list(answers), PartitionResult, InitializeStateResult))
