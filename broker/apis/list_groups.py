"""ListGroups (16) v0-v5 onto `GroupCoordinatorService.list_groups`.

v4 adds a states filter and the state of each group, v5 a types filter and the group type (every
group here is "classic"). Filters are case-insensitive, as in Kafka. A partition still loading
makes the top-level error COORDINATOR_LOAD_IN_PROGRESS, with the groups known so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups import commands as c
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_groups_request import ListGroupsRequest
from ...protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 16
VERSIONS = (0, 5)


def failed_response(_ctx: RequestContext, _request: ListGroupsRequest, error: ErrorCode) -> ListGroupsResponse:
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[])


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    cmd = c.ListGroups(
        states_filter=tuple(request.states_filter) if v >= 4 else (),
        types_filter=tuple(request.types_filter) if v >= 5 else (),
    )

    async def call(coordinator: GroupCoordinatorService) -> ListGroupsResponse:
        r = await coordinator.list_groups(cmd)
        return ListGroupsResponse(throttle_time_ms=0, error_code=r.error, groups=[
            ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                        group_type=g.group_type)
            for g in r.groups
        ])

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
