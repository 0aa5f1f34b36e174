"""ShareAcknowledge (79) v1-v2 (KIP-932): a share group member acknowledges records it acquired
(accept, release, reject; v2 renew) through its share session, without fetching (the share-partition
manager: broker/coordinators/share_partitions.py). Epoch -1 closes the session after the
acknowledgements, and what the member still holds goes back. A topic the principal may not READ is
answered TOPIC_AUTHORIZATION_FAILED per partition (KafkaApis.handleShareAcknowledgeRequest)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

from ..coordinators.share_partitions import answered
from ..network.router import RequestContext
from .share_fetch import may_read
from .share_group_heartbeat import share_groups_off, valid_member_id
from ...protocol.errors import ErrorCode
from ...protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from ...protocol.messages.share_acknowledge_response import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)

API_KEY = 79
VERSIONS = (1, 2)
E = ErrorCode


def failed_response(_ctx: RequestContext, _request: ShareAcknowledgeRequest, error: ErrorCode,
                    message: str | None = None) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                    acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


async def handle(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    broker = ctx.broker
    if share_groups_off(ctx):
        return failed_response(ctx, request, E.UNSUPPORTED_VERSION)
    if request.group_id is None or not valid_member_id(request.member_id):  # KafkaApis' checks (no message)
        return failed_response(ctx, request, E.INVALID_REQUEST)
    member_id: str = request.member_id or ""
    epoch = request.share_session_epoch
    if epoch == 0:
        return failed_response(ctx, request, E.INVALID_SHARE_SESSION_EPOCH)
    manager = broker.share_partitions
    await manager.ready()  # the share coordinator has replayed its log
    session, error = manager.session(request.group_id, member_id, epoch, broker.node_id)
    if session is None:
        return failed_response(ctx, request, error)
    names = broker.catalogue.names_by_id()
    readable = may_read(ctx)
    partitions: list[tuple[uuid.UUID, int]] = []
    answers: list[Awaitable[ErrorCode]] = []  # applied in order, their state writes awaited together
    for topic in request.topics:
        name = names.get(topic.topic_id)
        for p in topic.partitions:
            partitions.append((topic.topic_id, p.partition_index))
            answers.append(answered(E.UNKNOWN_TOPIC_ID) if name is None else answered(E.TOPIC_AUTHORIZATION_FAILED)
                           if not readable(name) else manager.acknowledge(
                request.group_id, member_id, name, p.partition_index,
                [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]))
    responses: dict[uuid.UUID, ShareAcknowledgeTopicResponse] = {}
    for (topic_id, index), code in zip(partitions, await asyncio.gather(*answers)):
        responses.setdefault(topic_id, ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=[])
                             ).partitions.append(PartitionData(
                                 partition_index=index, error_code=code,
                                 current_leader=LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=0)))
    if epoch == -1:
        manager.close(session)
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                    acquisition_lock_timeout_ms=manager.lock_ms_of(request.group_id), responses=list(responses.values()),
                                    node_endpoints=[])
