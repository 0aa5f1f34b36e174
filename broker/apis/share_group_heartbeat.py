"""ShareGroupHeartbeat (76) v1 (KIP-932) onto the group coordinator: join (epoch 0), heartbeat, leave
(epoch -1). Members bring their own id; topic partitions travel by topic id."""

from __future__ import annotations

from . import group_wire
from ..network.router import Deferred, RequestContext
from ...coordinator.groups.share import share_commands as sc
from ...protocol.errors import ErrorCode
from ...protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from ...protocol.messages.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

API_KEY = 76
VERSIONS = (1, 1)
MAX_MEMBER_ID = 36  # KafkaApis.isMemberIdValid: a member id is 1 to 36 characters (a UUID's string)


def share_groups_off(ctx: RequestContext) -> bool:
    """share.version is below 1 (UpdateFeatures lowered it, or the release's is 0): every share API
    answers UNSUPPORTED_VERSION before any other check, ACLs included (KafkaApis' isShareGroupProtocolEnabled)."""
    return ctx.broker.features.level("share.version") < 1


def valid_member_id(member_id: str | None) -> bool:
    """What KafkaApis asks of a share group member's id in ShareGroupHeartbeat, ShareFetch and
    ShareAcknowledge (its isMemberIdValid)."""
    return bool(member_id) and len(member_id or "") <= MAX_MEMBER_ID


def failed_response(_ctx: RequestContext | None, _request: ShareGroupHeartbeatRequest | None, error: ErrorCode,
                    message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                       member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)


def command(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> sc.ShareGroupHeartbeat:
    return sc.ShareGroupHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        client_id=ctx.client_id or "",
        client_host=group_wire.client_host(ctx.peer),
    )


def _response(r: sc.ShareGroupHeartbeatResult) -> ShareGroupHeartbeatResponse:
    if r.error is not ErrorCode.NONE:
        return failed_response(None, None, r.error, r.error_message)
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=r.member_id,
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=None if r.assignment is None else Assignment(topic_partitions=[
            TopicPartitions(topic_id=t, partitions=list(ps)) for t, ps in r.assignment]),
    )


def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse | Deferred:
    if share_groups_off(ctx):
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)
    if not valid_member_id(request.member_id):  # KafkaApis' check, before the coordinator's; no message
        return failed_response(ctx, request, ErrorCode.INVALID_REQUEST)
    if not request.group_id:
        # Kafka validates the request before routing it to a group: INVALID_REQUEST, not INVALID_GROUP_ID.
        return failed_response(ctx, request, ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    return group_wire.reply(ctx, group_wire.service(ctx).submit_now(command(ctx, request)), _response,
                            lambda e: failed_response(ctx, request, e))
