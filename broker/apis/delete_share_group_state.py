"""DeleteShareGroupState (86) v0 (KIP-932): the group coordinator forgets share-partitions' states
(DeleteShareGroupOffsets, a share group deleted) at the share coordinator leading each one's
`__share_group_state` partition: a tombstone of the key, answered once durable (nothing to forget
answers at once). CLUSTER_ACTION on the cluster; the answers are
broker/coordinators/share_state_rpc.py's."""

from __future__ import annotations

import asyncio

from ..coordinators.share_state_rpc import ShareStateRpcs
from ..network.router import RequestContext
from ...protocol.messages.delete_share_group_state_request import DeleteShareGroupStateRequest
from ...protocol.messages.delete_share_group_state_response import (
    DeleteShareGroupStateResponse,
    DeleteStateResult,
    PartitionResult,
)
from .share_state_wire import error_message, grouped

API_KEY = 86
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, request: DeleteShareGroupStateRequest, error: int) -> DeleteShareGroupStateResponse:
    return DeleteShareGroupStateResponse(results=[DeleteStateResult(t.topic_id, [
        PartitionResult(p.partition, error, error_message(error)) for p in t.partitions]) for t in request.topics])


async def handle(ctx: RequestContext, request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    rpcs = ShareStateRpcs(ctx.broker)
    keys = [(t.topic_id, p) for t in request.topics for p in t.partitions]
    answers = await asyncio.gather(*(rpcs.delete(request.group_id, topic_id, p.partition) for topic_id, p in keys))
    return DeleteShareGroupStateResponse(results=grouped(keys, list(answers), PartitionResult, DeleteStateResult))
