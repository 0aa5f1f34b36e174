"""DescribeShareGroupOffsets (90) v0-v1 (KIP-932): each share-partition's start offset (and v1's lag:
the records below the high watermark whose delivery is not complete), from the share-partition
states (broker/coordinators/share_partitions.py). Topics null: every share-partition of the group with
a state (none for a group that does not exist); named partitions without a state, or unknown, answer
start offset -1 and no error, as Kafka 4.4 does."""

from __future__ import annotations

import asyncio
from uuid import UUID

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_share_group_offsets_request import DescribeShareGroupOffsetsRequest
from ...protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from .share_group_heartbeat import share_groups_off
from .share_group_offsets import describe_group

API_KEY = 90
VERSIONS = (0, 1)
E = ErrorCode
_ZERO = UUID(int=0)


def failed_response(_ctx: RequestContext, request: DescribeShareGroupOffsetsRequest,
                    error: int) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=[
        DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[], error_code=error)
        for g in request.groups])


async def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    if share_groups_off(ctx):  # each group answered so, as KafkaApis does
        return failed_response(ctx, request, E.UNSUPPORTED_VERSION)
    broker = ctx.broker
    manager = broker.share_partitions
    await manager.ready()  # the share coordinator has replayed its log
    ids = {name: info.topic_id for name, info in broker.catalogue.topics().items()}
    names = broker.catalogue.names_by_id()
    groups = []
    for g in request.groups:
        answer = DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[], error_code=E.NONE)
        groups.append(answer)
        started = manager.started(g.group_id)
        if g.topics is None:
            described = await describe_group(ctx, g.group_id)
            if described.error not in (E.NONE, E.GROUP_ID_NOT_FOUND):  # a group with no state lists nothing
                answer.error_code, answer.error_message = described.error, described.error_message
                continue
            # the initialized share-partitions whose states other nodes serve (over PostgreSQL), asked of them
            started.update(await manager.persister.started_elsewhere(g.group_id, (
                (t, p) for t, ps in described.initialized for p in ps if (t, p) not in started)))
            wanted: dict[str, list[int]] = {}
            for (started_id, partition) in sorted(started, key=lambda k: (names.get(k[0], ""), k[1])):
                if started_id in names:
                    wanted.setdefault(names[started_id], []).append(partition)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
            started.update(await manager.persister.started_elsewhere(g.group_id, (
                (ids[t], p) for t, ps in wanted.items() if t in ids for p in ps if (ids[t], p) not in started)))
        elsewhere = [(t, p) for t, ps in wanted.items() for p in ps if (ids.get(t), p) in started
                     and broker.partitions.bounds(t, p)[0] != E.NONE]
        led_elsewhere = dict(zip(elsewhere, await asyncio.gather(  # their leaders' high watermarks (KIP-1226)
            *(manager.persister.high_watermark(t, p) for t, p in elsewhere))))
        for topic, partitions in wanted.items():
            topic_id = ids.get(topic)
            out = DescribeShareGroupOffsetsResponseTopic(topic_name=topic, topic_id=_ZERO if topic_id is None else topic_id,
                                                         partitions=[])
            answer.topics.append(out)
            for partition in partitions:
                out.partitions.append(_partition(broker, topic, topic_id, partition, started,
                                                 led_elsewhere.get((topic, partition))))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


def _partition(broker, topic, topic_id, partition, started, elsewhere) -> DescribeShareGroupOffsetsResponsePartition:  # type: ignore[no-untyped-def]
    row = DescribeShareGroupOffsetsResponsePartition(partition_index=partition, start_offset=-1, leader_epoch=0,
                                                     lag=-1, error_code=E.NONE)
    error, _, high_watermark = broker.partitions.bounds(topic, partition)
    if elsewhere is not None and elsewhere >= 0:  # led by another node: its leader's answer
        error, high_watermark = E.NONE, elsewhere
    if topic_id is None or error != E.NONE:
        return row  # Kafka answers an unknown topic-partition as one without a state
    state = started.get((topic_id, partition))
    if state is not None:
        start, done = state
        row.start_offset = start
        row.lag = high_watermark - start - done  # as Kafka: negative for a start set past the end
    return row


