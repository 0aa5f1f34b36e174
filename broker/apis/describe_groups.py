"""DescribeGroups (15) v0-v6 onto `GroupCoordinatorService.describe_groups`.

Per group: the state as Kafka names it ("Stable", "PreparingRebalance", "CompletingRebalance",
"Empty", "Dead"), protocol type and (when Stable) protocol, and the members with their metadata and
assignment bytes as received. An unknown group is "Dead" with no error below v6 and
GROUP_ID_NOT_FOUND with Kafka 4's message from v6 (KIP-1043; the coordinator decides by
`api_version`). Authorized operations (v3+) are Kafka's "not requested" value (INT32_MIN) unless
asked for; with no authorizer Kafka then reports every operation a group
supports: READ, DESCRIBE and DELETE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import group_wire
from .repeats import distinct, in_request_order
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_groups_request import DescribeGroupsRequest
from ...protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 15
VERSIONS = (0, 6)

E = ErrorCode
NOT_REQUESTED = -(2**31)
# AclOperation codes READ=3, DELETE=6, DESCRIBE=8, DESCRIBE_CONFIGS=10, ALTER_CONFIGS=11 as a bit field
# (Kafka's Utils.to32BitField of AclEntry.supportedOperations(GROUP)).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def failed_response(_ctx: RequestContext, request: DescribeGroupsRequest, error: ErrorCode) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        DescribedGroup(error_code=error, group_id=g, group_state="", protocol_type="", protocol_data="", members=[],
                       authorized_operations=NOT_REQUESTED)
        for g in request.groups
    ])


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    v = ctx.api_version
    include_ops = v >= 3 and request.include_authorized_operations

    async def call(coordinator: GroupCoordinatorService) -> DescribeGroupsResponse:
        ids = distinct(request.groups)
        described = await coordinator.describe_groups(ids, v)
        answers = {group_id: DescribedGroup(
                error_code=g.error,
                error_message=f"Group {g.group_id} not found." if g.error == E.GROUP_ID_NOT_FOUND else None,
                group_id=g.group_id,
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=[
                    DescribedGroupMember(
                        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                        client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment,
                    )
                    for m in g.members
                ],
                authorized_operations=GROUP_OPERATIONS if include_ops and g.error == E.NONE else NOT_REQUESTED,
            )
            for group_id, g in zip(ids, described)
        }
        return DescribeGroupsResponse(throttle_time_ms=0, groups=in_request_order(request.groups, answers))

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
