"""WriteShareGroupState (85) v0-v1 (KIP-932): a data partition's leader writes a share-partition's
state (acknowledgements, records given back) to the share coordinator leading its
`__share_group_state` partition, answered once durable there. Its batches are laid over the state
held (a start offset of -1 keeps the start); a leader epoch or state epoch below the last recorded
one is FENCED_LEADER_EPOCH or FENCED_STATE_EPOCH and writes nothing (a deposed data leader's late
write). CLUSTER_ACTION on the cluster; the answers are broker/coordinators/share_state_rpc.py's."""

from __future__ import annotations

import asyncio

from ..coordinators.share_state_rpc import ShareStateRpcs
from ..network.router import RequestContext
from ...protocol.messages.write_share_group_state_request import WriteShareGroupStateRequest
from ...protocol.messages.write_share_group_state_response import (
    PartitionResult,
    WriteShareGroupStateResponse,
    WriteStateResult,
)
from .share_state_wire import error_message, grouped

API_KEY = 85
VERSIONS = (0, 1)


def failed_response(_ctx: RequestContext, request: WriteShareGroupStateRequest, error: int) -> WriteShareGroupStateResponse:
    return WriteShareGroupStateResponse(results=[WriteStateResult(t.topic_id, [
        PartitionResult(p.partition, error, error_message(error)) for p in t.partitions]) for t in request.topics])


async def handle(ctx: RequestContext, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    rpcs = ShareStateRpcs(ctx.broker)
    keys = [(t.topic_id, p) for t in request.topics for p in t.partitions]
    answers = await asyncio.gather(*(  # handed to their turns in order, durable together
        rpcs.write(request.group_id, topic_id, p.partition, p.state_epoch, p.leader_epoch, p.start_offset,
                   [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches])
        for topic_id, p in keys))
    return WriteShareGroupStateResponse(results=grouped(keys, list(answers), PartitionResult, WriteStateResult))
