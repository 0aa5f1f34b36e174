"""Heartbeat (12) v0-v4 onto the group coordinator (v3+ carries the instance id).

A plain handler (the server calls it inline): an idle group answers at once (`submit_now`); a busy
one queues the command and the answer comes from a callback on its future, so the connection reads
on meanwhile.
"""

from __future__ import annotations

from . import group_wire
from ..network.router import Deferred, RequestContext
from ...coordinator.groups import commands as c
from ...coordinator.groups.results import HeartbeatResult
from ...protocol.errors import ErrorCode
from ...protocol.messages.heartbeat_request import HeartbeatRequest
from ...protocol.messages.heartbeat_response import HeartbeatResponse

API_KEY = 12
VERSIONS = (0, 4)


def failed_response(_ctx: RequestContext, _request: HeartbeatRequest, error: ErrorCode) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


def _response(result: HeartbeatResult) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=result.error)


def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse | Deferred:
    cmd = c.Heartbeat(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.api_version >= 3 else None,
    )
    return group_wire.reply(ctx, group_wire.service(ctx).submit_now(cmd), _response,
                           lambda e: failed_response(ctx, request, e))
