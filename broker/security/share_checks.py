"""ACL checks of the share group APIs (KIP-932), as KafkaApis makes them: GROUP READ to heartbeat, fetch,
acknowledge and alter offsets, GROUP DESCRIBE to describe a group or its offsets, GROUP DELETE to delete
its offsets; a member subscribes only to topics it may DESCRIBE. A refused group refuses the request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .acl import Operation as Op, ResourceType as RT
from .check_helpers import DENIED_MESSAGE, GROUP_DENIED, Call, split
from .txn_group_admin_checks import check_consumer_group_heartbeat
from ..network.error_answers import refuse
from ..network.router import RequestContext

if TYPE_CHECKING:
    from .service import Security

check_share_group_heartbeat = check_consumer_group_heartbeat  # the same checks (KafkaApis)


def group_check(operation: Op):
    """The request's one group needs `operation`; refused, the API's own error answer."""
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if sec.authorize(ctx, operation, RT.GROUP, request.group_id):
            return await call(request)
        return refuse(ctx, request, GROUP_DENIED, DENIED_MESSAGE[GROUP_DENIED])
    return check


async def check_share_group_describe(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.share_group_describe_response import DescribedGroup

    return await split(
        ctx, request, call, sec, items="group_ids", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g),
        denied_entry=lambda g: DescribedGroup(error_code=GROUP_DENIED, error_message=DENIED_MESSAGE[GROUP_DENIED],
                                              group_id=g, authorized_operations=-2147483648))


async def check_describe_share_group_offsets(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.describe_share_group_offsets_response import DescribeShareGroupOffsetsResponseGroup

    return await split(
        ctx, request, call, sec, items="groups", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g.group_id),
        denied_entry=lambda g: DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, topics=[], error_code=GROUP_DENIED, error_message=DENIED_MESSAGE[GROUP_DENIED]))


CHECKS = {
    76: check_share_group_heartbeat, 77: check_share_group_describe,
    78: group_check(Op.READ), 79: group_check(Op.READ),
    90: check_describe_share_group_offsets, 91: group_check(Op.READ), 92: group_check(Op.DELETE),
}
