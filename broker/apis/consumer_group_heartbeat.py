"""ConsumerGroupHeartbeat (68) v0-v1 (KIP-848) onto the group coordinator.

v1 clients generate their own member id (KIP-1082) and may subscribe by regular expression; the
coordinator validates both. Topic partitions travel by topic id.
"""

from __future__ import annotations

from . import group_wire
from ..network.router import Deferred, RequestContext
from ...coordinator.groups.consumer import consumer_commands as cc
from ...coordinator.groups.consumer.consumer_commands import ConsumerGroupHeartbeatResult
from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from ...protocol.messages.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)

API_KEY = 68
VERSIONS = (0, 1)


def failed_response(_ctx: RequestContext | None, _request: ConsumerGroupHeartbeatRequest | None, error: ErrorCode,
                    message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)


def command(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> cc.ConsumerGroupHeartbeat:
    return cc.ConsumerGroupHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor,
        owned_topic_partitions=None if request.topic_partitions is None else tuple(
            (tp.topic_id, tuple(tp.partitions)) for tp in request.topic_partitions),
        client_id=ctx.client_id or "",
        client_host=group_wire.client_host(ctx.peer),
        api_version=ctx.api_version,
        # under an authorizer, a regex resolves only to topics this member may describe
        topic_filter=None if (security := ctx.broker.security_if_built) is None else security.topic_describer(ctx),
    )


def _response(r: ConsumerGroupHeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    if r.error is not ErrorCode.NONE:
        return failed_response(None, None, r.error, r.error_message)
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=r.member_id,
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=None if r.assignment is None else Assignment(topic_partitions=[
            TopicPartitions(topic_id=t, partitions=list(ps)) for t, ps in r.assignment]),
    )


def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse | Deferred:
    """A plain handler: an idle group answers at once; a busy one queues the command and the
    answer comes from a callback on its future (see group_wire.reply)."""
    if "group.version" not in ctx.broker.kafka_release.finalized_features:
        # Kafka 3.7-3.9 advertise the API but serve it only with the consumer protocol switched on, which
        # their defaults leave off (--kafka-version 3.x answers as they do)
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)
    if not request.group_id:
        # Kafka validates the request before routing it to a group: INVALID_REQUEST, not INVALID_GROUP_ID.
        return failed_response(ctx, request, ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    return group_wire.reply(ctx, group_wire.service(ctx).submit_now(command(ctx, request)), _response,
                            lambda e: failed_response(ctx, request, e))
