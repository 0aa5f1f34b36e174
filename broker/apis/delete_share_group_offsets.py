"""DeleteShareGroupOffsets (92) v0 (KIP-932; `kafka-share-groups.sh --delete-offsets`): every
share-partition of each named topic forgets its state (a tombstone in `__share_group_state`); the next
fetch starts it from share.auto.offset.reset. Only while the group has no member (NON_EMPTY_GROUP)."""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequest
from ...protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from .share_group_heartbeat import share_groups_off
from .share_group_offsets import refusal_to_change

API_KEY = 92
VERSIONS = (0, 0)
E = ErrorCode
_UNKNOWN = "This server does not host this topic-partition."
_UNSUPPORTED = "The version of API is not supported."  # share.version below 1 (Errors.UNSUPPORTED_VERSION's words)


def failed_response(_ctx: RequestContext, _request: DeleteShareGroupOffsetsRequest, error: int,
                    message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=error, error_message=message, responses=[])


async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    if share_groups_off(ctx):
        return failed_response(ctx, request, E.UNSUPPORTED_VERSION, _UNSUPPORTED)
    broker = ctx.broker
    manager = broker.share_partitions
    await manager.ready()  # the share coordinator has replayed its log
    refused = await refusal_to_change(ctx, request.group_id, must_exist=True)
    if refused is not None:
        return failed_response(ctx, request, *refused)
    responses = []
    for topic in request.topics:
        info = broker.catalogue.topic(topic.topic_name)
        out = DeleteShareGroupOffsetsResponseTopic(topic_name=topic.topic_name, error_code=E.NONE)
        responses.append(out)
        if info is None:
            out.error_code, out.error_message = E.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN
            continue
        out.topic_id = info.topic_id
        try:
            await manager.delete_state(request.group_id, topic.topic_name, info.topic_id)
        except Exception as exc:  # noqa: BLE001 - the topic's answer says it was not deleted
            out.error_code, out.error_message = getattr(exc, "code", E.UNKNOWN_SERVER_ERROR), str(exc)
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                           responses=responses)
