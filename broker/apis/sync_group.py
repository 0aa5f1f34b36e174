"""SyncGroup (14) v0-v5 onto `GroupCoordinatorService.sync_group`.

v3+ carries the group instance id. From v5 the protocol type and name are mandatory: a request
without them is answered INCONSISTENT_GROUP_PROTOCOL here, as Kafka's KafkaApis does; whether they
match the group is the coordinator's check. The response has them from v5.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups import commands as c
from ...protocol.errors import ErrorCode
from ...protocol.messages.sync_group_request import SyncGroupRequest
from ...protocol.messages.sync_group_response import SyncGroupResponse

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 14
VERSIONS = (0, 5)


def failed_response(_ctx: RequestContext, _request: SyncGroupRequest, error: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(throttle_time_ms=0, error_code=error, protocol_type=None, protocol_name=None,
                             assignment=b"")


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    if v >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return failed_response(ctx, request, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    cmd = c.SyncGroup(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if v >= 3 else None,
        protocol_type=request.protocol_type if v >= 5 else None,
        protocol_name=request.protocol_name if v >= 5 else None,
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
    )

    async def call(coordinator: GroupCoordinatorService) -> SyncGroupResponse:
        r = await coordinator.sync_group(cmd)
        return SyncGroupResponse(throttle_time_ms=0, error_code=r.error, protocol_type=r.protocol_type,
                                 protocol_name=r.protocol_name, assignment=r.assignment or b"")

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
