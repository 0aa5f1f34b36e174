"""LeaveGroup (13) v0-v5 onto `GroupCoordinatorService.leave_group`.

v0-v2 name one member (`member_id`) and get one top-level error: the request error if there is one,
else that member's error (Kafka's LeaveGroupResponse for old versions). v3+ carry a batch of
members (member id and/or instance id) and get an error per member; v5 adds a reason per member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups import commands as c
from ...protocol.errors import ErrorCode
from ...protocol.messages.leave_group_request import LeaveGroupRequest
from ...protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 13
VERSIONS = (0, 5)


def failed_response(_ctx: RequestContext, _request: LeaveGroupRequest, error: ErrorCode) -> LeaveGroupResponse:
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    if v >= 3:
        members = tuple(
            c.LeavingMember(m.member_id, m.group_instance_id, c.client_reason(m.reason) if v >= 5 else None)
            for m in request.members
        )
    else:
        members = (c.LeavingMember(request.member_id),)
    cmd = c.LeaveGroup(group_id=request.group_id, members=members)

    async def call(coordinator: GroupCoordinatorService) -> LeaveGroupResponse:
        r = await coordinator.leave_group(cmd)
        if v < 3:
            error = r.error
            if error == ErrorCode.NONE:
                error = next((m.error for m in r.members if m.error != ErrorCode.NONE), ErrorCode.NONE)
            return failed_response(ctx, request, error)
        return LeaveGroupResponse(
            throttle_time_ms=0,
            error_code=r.error,
            members=[MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
                     for m in r.members],
        )

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
