"""ShareGroupDescribe (77) v1 (KIP-932): each group is described in its own turn."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from . import group_wire
from .repeats import distinct, in_request_order
from .share_group_heartbeat import share_groups_off
from ..network.router import RequestContext
from ...coordinator.groups.share import share_commands as sc
from ...protocol.errors import ErrorCode
from ...protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from ...protocol.messages.share_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeResponse,
    TopicPartitions,
)

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 77
VERSIONS = (1, 1)
_NO_OPERATIONS = -2147483648


def failed_response(_ctx: RequestContext, request: ShareGroupDescribeRequest, error: int) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(groups=[
        DescribedGroup(error_code=error, group_id=group_id, authorized_operations=_NO_OPERATIONS)
        for group_id in request.group_ids])


def _group(g: sc.DescribedShareGroup) -> DescribedGroup:
    return DescribedGroup(
        error_code=g.error, error_message=g.error_message, group_id=g.group_id, group_state=g.state,
        group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=g.assignor_name,
        authorized_operations=_NO_OPERATIONS,
        members=[
            Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                   client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                   assignment=Assignment(topic_partitions=[
                       TopicPartitions(topic_id=p.topic_id, topic_name=p.topic_name, partitions=list(p.partitions))
                       for p in m.assignment]))
            for m in g.members
        ],
    )


async def handle(ctx: RequestContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    if share_groups_off(ctx):
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)

    async def one(group_id: str) -> sc.DescribedShareGroup:
        async def call(coordinator: GroupCoordinatorService) -> sc.DescribedShareGroup:
            return await coordinator.submit(sc.ShareGroupDescribe(group_id))

        return await group_wire.answer(ctx, call, lambda e: sc.DescribedShareGroup(group_id, e))

    ids = distinct(request.group_ids)
    described = await asyncio.gather(*(one(g) for g in ids))
    answers = {group_id: _group(g) for group_id, g in zip(ids, described)}
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=in_request_order(request.group_ids, answers))
