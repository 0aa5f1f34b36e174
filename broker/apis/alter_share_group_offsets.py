"""AlterShareGroupOffsets (91) v0 (KIP-932; `kafka-share-groups.sh --reset-offsets`): each named
share-partition starts again at the given offset with nothing in flight, durable before the answer.
Only while the group has no member (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
from ...protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from .share_group_heartbeat import share_groups_off
from .share_group_offsets import refusal_to_change

API_KEY = 91
VERSIONS = (0, 0)
E = ErrorCode
_UNKNOWN = "This server does not host this topic-partition."
_UNSUPPORTED = "The version of API is not supported."  # share.version below 1 (Errors.UNSUPPORTED_VERSION's words)


def failed_response(_ctx: RequestContext, _request: AlterShareGroupOffsetsRequest, error: int,
                    message: str | None = None) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=error, error_message=message, responses=[])


async def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    if share_groups_off(ctx):
        return failed_response(ctx, request, E.UNSUPPORTED_VERSION, _UNSUPPORTED)
    broker = ctx.broker
    refused = await refusal_to_change(ctx, request.group_id)
    if refused is not None:
        return failed_response(ctx, request, *refused)
    manager = broker.share_partitions
    await manager.ready()  # the share coordinator has replayed its log
    responses = []
    for topic in request.topics:
        info = broker.catalogue.topic(topic.topic_name)
        out = AlterShareGroupOffsetsResponseTopic(topic_name=topic.topic_name, partitions=[])
        if info is not None:
            out.topic_id = info.topic_id
        responses.append(out)
        for p in topic.partitions:
            row = AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=E.NONE)
            out.partitions.append(row)
            error, _, _ = broker.partitions.bounds(topic.topic_name, p.partition_index)
            if info is None or error != E.NONE:
                row.error_code, row.error_message = E.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN
                continue
            try:  # kept as given, as Kafka 4.4 keeps it (past the end too)
                await manager.set_start(request.group_id, topic.topic_name, info.topic_id, p.partition_index,
                                        p.start_offset)
            except Exception as exc:  # noqa: BLE001 - the partition's answer says it was not kept
                row.error_code, row.error_message = getattr(exc, "code", E.UNKNOWN_SERVER_ERROR), str(exc)
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                          responses=responses)
