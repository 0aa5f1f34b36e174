"""Heartbeat (12) v0-v4 onto `GroupCoordinatorService.heartbeat` (v3+ carries the instance id)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import group_wire
from ..router import RequestContext
from ...coordinator import commands as c
from ...protocol.errors import ErrorCode
from ...protocol.messages.heartbeat_request import HeartbeatRequest
from ...protocol.messages.heartbeat_response import HeartbeatResponse

if TYPE_CHECKING:
    from ...coordinator.actor import GroupCoordinatorService

API_KEY = 12
VERSIONS = (0, 4)


def failed_response(_ctx: RequestContext, _request: HeartbeatRequest, error: ErrorCode) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    cmd = c.Heartbeat(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.api_version >= 3 else None,
    )

    async def call(coordinator: GroupCoordinatorService) -> HeartbeatResponse:
        r = await coordinator.heartbeat(cmd)
        return failed_response(ctx, request, r.error)

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
