"""OffsetCommit (8) v0-v10 onto `GroupCoordinatorService.commit_offsets`.

As Kafka 4's KafkaApis: a partition this broker does not have (unknown topic, or a partition number
the topic lacks) is answered UNKNOWN_TOPIC_OR_PARTITION here and never reaches the coordinator
(older brokers stored such offsets; Kafka 4 does not). If nothing is left, the coordinator is not
asked at all. The rest goes to the coordinator, which owns the group and generation checks and
OFFSET_METADATA_TOO_LARGE. v2-v4 carry a retention time; v7+ the group instance id; `api_version`
is passed because an unknown group answers ILLEGAL_GENERATION below v9 and GROUP_ID_NOT_FOUND
from v9. v0 and v1 (Kafka 3.9; removed in 4.0): v0 has no generation or member (a simple commit),
v1 carries a commit timestamp per partition that Kafka 3.9 keeps as the commit time (so the offset
expires retention after it); -1 means now. v10 names topics by id (an id this broker does not know is UNKNOWN_TOPIC_ID). The response lists each topic once, the broker's refusals first (Kafka's response builder).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from uuid import UUID

from . import group_wire
from ..network.router import Deferred, RequestContext
from ...coordinator.groups import commands as c
from ...coordinator.groups.results import OffsetCommitResult
from ...protocol.errors import ErrorCode
from ...protocol.wire import ZERO_UUID
from ...protocol.messages.offset_commit_request import OffsetCommitRequest
from ...protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

if TYPE_CHECKING:
    from ..partitions.catalogue import TopicInfo

API_KEY = 8
VERSIONS = (0, 10)
TOPIC_IDS_FROM = 10

E = ErrorCode


def failed_response(_ctx: RequestContext, request: OffsetCommitRequest, error: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(p.partition_index, error) for p in t.partitions])
        for t in request.topics
    ])


def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse | Deferred:
    v = ctx.api_version
    out: dict[str, list[OffsetCommitResponsePartition]] = {}
    valid: list[c.OffsetCommitTopic] = []
    catalogue = ctx.broker.catalogue
    topic_info: Callable[[str], TopicInfo | None] = catalogue.topic
    if v >= TOPIC_IDS_FROM:  # the answer names topic ids as they were when the request came
        snapshot = catalogue.topics()
        topic_info = snapshot.get
        names_by_id = {info.topic_id: name for name, info in snapshot.items()}
    unknown_ids: list[OffsetCommitResponseTopic] = []
    for topic in request.topics:
        if v >= TOPIC_IDS_FROM:
            name = names_by_id.get(topic.topic_id)
            if name is None:
                unknown_ids.append(OffsetCommitResponseTopic(topic_id=topic.topic_id, partitions=[
                    OffsetCommitResponsePartition(p.partition_index, E.UNKNOWN_TOPIC_ID) for p in topic.partitions]))
                continue
            topic.name = name
        answered = out.setdefault(topic.name, [])
        keep: list[c.OffsetCommitPartition] = []
        info = topic_info(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p.partition_index < info.num_partitions:
                answered.append(OffsetCommitResponsePartition(p.partition_index, E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            keep.append(c.OffsetCommitPartition(  # positional: every commit builds one
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch if v >= 6 else -1,
                p.committed_metadata,
                p.commit_timestamp if v == 1 else -1,
            ))
        if keep:
            valid.append(c.OffsetCommitTopic(topic.name, tuple(keep)))

    def respond() -> OffsetCommitResponse:
        if v < TOPIC_IDS_FROM:  # topic ids are not on the wire before v10
            return OffsetCommitResponse(0, [OffsetCommitResponseTopic(name, ZERO_UUID, parts)
                                            for name, parts in out.items()])
        return OffsetCommitResponse(
            throttle_time_ms=0,
            topics=unknown_ids + [OffsetCommitResponseTopic(name=name, topic_id=_topic_id(topic_info(name)),
                                                            partitions=parts) for name, parts in out.items()],
        )

    if not valid:
        return respond()
    cmd = c.OffsetCommit(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        topics=tuple(valid),
        group_instance_id=request.group_instance_id if v >= 7 else None,
        retention_time_ms=request.retention_time_ms if v <= 4 else -1,
        api_version=v,
    )

    def answer(result: OffsetCommitResult) -> OffsetCommitResponse:
        _answered(out, result)
        return respond()

    def fail_all(error: ErrorCode) -> OffsetCommitResponse:
        for t in valid:
            out[t.name].extend(OffsetCommitResponsePartition(p.partition, error) for p in t.partitions)
        return respond()

    # Handed to the group now (run at once if it is idle, else queued), so this connection's next
    # request (which may be a fetch of these very offsets) is handled after it; the answer waits
    # only for the commit's fsync.
    return group_wire.submit_answering(ctx, cmd, answer, fail_all)


def _topic_id(info: TopicInfo | None) -> UUID:
    return ZERO_UUID if info is None else info.topic_id


def _answered(out: dict[str, list[OffsetCommitResponsePartition]], result: OffsetCommitResult) -> None:
    for t in result.topics:
        answered = out.get(t.name)
        if answered is None:
            answered = out[t.name] = []
        for p in t.partitions:
            answered.append(OffsetCommitResponsePartition(p.partition, p.error))
