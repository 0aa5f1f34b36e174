"""ConsumerGroupDescribe (69) v0-v1 (KIP-848): each group is described by its own actor."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from . import group_wire
from .repeats import distinct, in_request_order
from ..network.router import RequestContext
from ...coordinator.groups.consumer import consumer_commands as cc
from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from ...protocol.messages.consumer_group_describe_response import (
    Assignment,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 69
VERSIONS = (0, 1)
_NO_OPERATIONS = -2147483648


def failed_response(_ctx: RequestContext, request: ConsumerGroupDescribeRequest,
                    error: int) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(groups=[
        DescribedGroup(error_code=error, group_id=group_id, authorized_operations=_NO_OPERATIONS)
        for group_id in request.group_ids])


def _assignment(parts: tuple[cc.DescribedTopicPartitions, ...]) -> Assignment:
    return Assignment(topic_partitions=[
        TopicPartitions(topic_id=p.topic_id, topic_name=p.topic_name, partitions=list(p.partitions)) for p in parts])


def _group(g: cc.DescribedConsumerGroup) -> DescribedGroup:
    return DescribedGroup(
        error_code=g.error, error_message=g.error_message, group_id=g.group_id, group_state=g.state,
        group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=g.assignor_name,
        authorized_operations=_NO_OPERATIONS,
        members=[
            Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                   client_id=m.client_id, client_host=m.client_host,
                   subscribed_topic_names=list(m.subscribed_topic_names),
                   subscribed_topic_regex=m.subscribed_topic_regex or "", assignment=_assignment(m.assignment),
                   target_assignment=_assignment(m.target_assignment), member_type=m.member_type)
            for m in g.members
        ],
    )


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    if "group.version" not in ctx.broker.kafka_release.finalized_features:
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)  # Kafka 3.x's default: see the heartbeat
    async def one(group_id: str) -> cc.DescribedConsumerGroup:
        async def call(coordinator: GroupCoordinatorService) -> cc.DescribedConsumerGroup:
            return await coordinator.submit(cc.ConsumerGroupDescribe(group_id))

        return await group_wire.answer(ctx, call, lambda e: cc.DescribedConsumerGroup(group_id, e))

    ids = distinct(request.group_ids)
    described = await asyncio.gather(*(one(g) for g in ids))
    answers = {group_id: _group(g) for group_id, g in zip(ids, described)}
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=in_request_order(request.group_ids, answers))
