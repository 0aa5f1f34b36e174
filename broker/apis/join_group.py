"""JoinGroup (11) v0-v9 onto `GroupCoordinatorService.join_group`.

Version adaptation, as Kafka's JoinGroupRequest/KafkaApis do it:
- v0 has no rebalance timeout: the session timeout is used;
- v4+ from a dynamic member (no instance id) requires a known member id (MEMBER_ID_REQUIRED flow);
- v5+ carries the group instance id, v8+ a reason, v9+ supports skipping the assignment;
- the client host is the peer address as Kafka's `InetAddress.toString()` prints it ("/1.2.3.4");
- below v7 the protocol name is not nullable: a missing one goes out as "".

A group instance id must follow Kafka's own rule for it (JoinGroupRequest.validateGroupInstanceId,
the topic-name rule: 1-249 characters of [a-zA-Z0-9._-]); Kafka's clients enforce it, its broker
does not, and a 32,767-byte id made every non-flexible JoinGroup and DescribeGroups answer of its
group unencodable (the member id is the instance id plus a UUID). We refuse it with INVALID_REQUEST.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups import commands as c
from ...protocol.errors import ErrorCode
from ...protocol.messages.join_group_request import JoinGroupRequest
from ...protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 11
VERSIONS = (0, 9)


def failed_response(ctx: RequestContext, _request: JoinGroupRequest, error: ErrorCode) -> JoinGroupResponse:
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=error, generation_id=-1,
        protocol_type=None, protocol_name=None if ctx.api_version >= 7 else "",
        leader="", skip_assignment=False, member_id="", members=[],
    )


_LEGAL_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def invalid_instance_id(instance_id: str) -> str | None:
    if instance_id in (".", ".."):
        return f"Group instance id cannot be {instance_id!r}"
    if not _LEGAL_INSTANCE_ID.fullmatch(instance_id):
        return ("Group instance id must be 1 to 249 characters of ASCII alphanumerics, '.', '_' and '-', "
                f"not {len(instance_id)} characters")
    return None


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    instance_id = request.group_instance_id if v >= 5 else None
    if instance_id is not None:
        problem = invalid_instance_id(instance_id)
        if problem is not None:
            group_wire.log.warning("join_group_refused", error=problem, group=request.group_id, **ctx.log_fields())
            return failed_response(ctx, request, ErrorCode.INVALID_REQUEST)
    cmd = c.JoinGroup(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=instance_id,
        require_known_member_id=v >= 4 and instance_id is None,
        client_id=ctx.client_id,
        client_host=group_wire.client_host(ctx.peer),
        rebalance_timeout_ms=request.rebalance_timeout_ms if v >= 1 else request.session_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        reason=c.client_reason(request.reason) if v >= 8 else None,
        supports_skip_assignment=v >= 9,
    )

    async def call(coordinator: GroupCoordinatorService) -> JoinGroupResponse:
        r = await coordinator.join_group(cmd)
        protocol_name = r.protocol_name
        if protocol_name is None and v < 7:
            protocol_name = ""
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=r.error,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=protocol_name,
            leader=r.leader_id or "",
            skip_assignment=r.skip_assignment,
            member_id=r.member_id or "",
            members=[JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                             metadata=m.metadata) for m in r.members],
        )

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
