"""StreamsGroupDescribe (89) v0-v1 (KIP-1071): each group is described in its own turn. v1's
topology description (StreamsGroupTopologyDescriptionUpdate, 93) is not kept: its status is
NOT_REQUESTED (0) and the description null."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from . import group_wire
from .repeats import distinct, in_request_order
from ..network.router import RequestContext
from ...coordinator.groups.streams import streams_commands as sc
from ...coordinator.groups.streams.assignor import ASSIGNOR_NAME
from ...coordinator.groups.streams.topology import TaskSet, TopicInfo as StreamsTopicInfo
from ...protocol.messages.streams_group_describe_request import StreamsGroupDescribeRequest
from ...protocol.messages.streams_group_describe_response import (
    Assignment,
    DescribedGroup,
    Endpoint,
    KeyValue,
    Member,
    StreamsGroupDescribeResponse,
    Subtopology,
    TaskIds,
    TopicInfo,
    Topology,
)

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 89
VERSIONS = (0, 1)
_NO_OPERATIONS = -2147483648


def failed_response(_ctx: RequestContext, request: StreamsGroupDescribeRequest, error: int) -> StreamsGroupDescribeResponse:
    return StreamsGroupDescribeResponse(groups=[
        DescribedGroup(error_code=error, group_id=group_id, authorized_operations=_NO_OPERATIONS)
        for group_id in request.group_ids])


def _tasks(tasks: TaskSet) -> list[TaskIds]:
    return [TaskIds(subtopology_id=s, partitions=list(ps)) for s, ps in tasks]


def _assignment(a: tuple[TaskSet, TaskSet, TaskSet]) -> Assignment:
    return Assignment(active_tasks=_tasks(a[0]), standby_tasks=_tasks(a[1]), warmup_tasks=_tasks(a[2]))


def _infos(items: tuple[StreamsTopicInfo, ...]) -> list[TopicInfo]:
    return [TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                      topic_configs=[KeyValue(key=k, value=v) for k, v in t.configs]) for t in items]


def _group(g: sc.DescribedStreamsGroup) -> DescribedGroup:
    return DescribedGroup(
        error_code=g.error, error_message=g.error_message, group_id=g.group_id, group_state=g.state,
        group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, authorized_operations=_NO_OPERATIONS,
        assignor_name=ASSIGNOR_NAME if g.error == 0 else None,
        topology=None if g.topology is None else Topology(epoch=g.topology.epoch, subtopologies=[
            Subtopology(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                        repartition_sink_topics=list(s.repartition_sink_topics),
                        state_changelog_topics=_infos(s.state_changelog_topics),
                        repartition_source_topics=_infos(s.repartition_source_topics))
            for s in g.topology.subtopologies]),
        members=[
            Member(member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                   client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                   process_id=m.process_id,
                   user_endpoint=None if m.user_endpoint is None else Endpoint(host=m.user_endpoint[0],
                                                                               port=m.user_endpoint[1]),
                   client_tags=[KeyValue(key=k, value=v) for k, v in m.client_tags], task_offsets=[],
                   task_end_offsets=[], assignment=_assignment(m.assignment),
                   target_assignment=_assignment(m.target_assignment), is_classic=False)
            for m in g.members
        ],
    )


async def handle(ctx: RequestContext, request: StreamsGroupDescribeRequest) -> StreamsGroupDescribeResponse:
    async def one(group_id: str) -> sc.DescribedStreamsGroup:
        async def call(coordinator: GroupCoordinatorService) -> sc.DescribedStreamsGroup:
            return await coordinator.submit(sc.StreamsGroupDescribe(group_id))

        return await group_wire.answer(ctx, call, lambda e: sc.DescribedStreamsGroup(group_id, e))

    ids = distinct(request.group_ids)
    described = await asyncio.gather(*(one(g) for g in ids))
    answers = {group_id: _group(g) for group_id, g in zip(ids, described)}
    return StreamsGroupDescribeResponse(throttle_time_ms=0, groups=in_request_order(request.group_ids, answers))
