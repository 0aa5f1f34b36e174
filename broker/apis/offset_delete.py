"""OffsetDelete (47) v0 onto `GroupCoordinatorService.delete_offsets`.

As Kafka 4's KafkaApis: partitions this broker does not have are answered
UNKNOWN_TOPIC_OR_PARTITION here; the coordinator is asked in every case (it validates the group:
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, and per partition GROUP_SUBSCRIBED_TO_TOPIC). A group-level
error is answered alone, without topics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups import commands as c
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_delete_request import OffsetDeleteRequest
from ...protocol.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 47
VERSIONS = (0, 0)

E = ErrorCode


def failed_response(_ctx: RequestContext, _request: OffsetDeleteRequest, error: ErrorCode) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    out: dict[str, list[OffsetDeleteResponsePartition]] = {}
    valid: list[c.TopicPartitions] = []
    exists = group_wire.partition_exists(ctx)
    for topic in request.topics:
        answered = out.setdefault(topic.name, [])
        keep = []
        for p in topic.partitions:
            if exists(topic.name, p.partition_index):
                keep.append(p.partition_index)
            else:
                answered.append(OffsetDeleteResponsePartition(p.partition_index, E.UNKNOWN_TOPIC_OR_PARTITION))
        if keep:
            valid.append(c.TopicPartitions(topic.name, tuple(keep)))
    cmd = c.OffsetDelete(group_id=request.group_id, topics=tuple(valid))

    async def call(coordinator: GroupCoordinatorService) -> OffsetDeleteResponse:
        r = await coordinator.delete_offsets(cmd)
        if r.error != E.NONE:
            return failed_response(ctx, request, r.error)
        for t in r.topics:
            out.setdefault(t.name, []).extend(OffsetDeleteResponsePartition(p.partition, p.error) for p in t.partitions)
        return OffsetDeleteResponse(error_code=E.NONE, throttle_time_ms=0, topics=[
            OffsetDeleteResponseTopic(name=name, partitions=parts) for name, parts in out.items()
        ])

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
