"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, from our one leader's epoch history.

This node has led every partition since it was created, in leader epoch 0 (the epoch Metadata
reports and every appended batch carries), so the history holds one entry, epoch 0 from the log
start. As Kafka's Partition.lastOffsetForLeaderEpoch: a CurrentLeaderEpoch (v2+) newer than ours is
UNKNOWN_LEADER_EPOCH and an older one FENCED_LEADER_EPOCH (-1 skips the check); for a requested
epoch at or past ours the answer is our epoch and the log end offset; a requested epoch below any
we have is answered with epoch -1 and offset -1.
"""

from __future__ import annotations

from ..storage.log.partition_log import PartitionLog
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from ...protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

API_KEY = 23
VERSIONS = (0, 4)


def failed_response(_ctx: RequestContext, request: OffsetForLeaderEpochRequest,
                    error: int) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(t.topic, [EpochEndOffset(error_code=error, partition=p.partition)
                                             for p in t.partitions])
        for t in request.topics])
LEADER_EPOCH = 0
NO_EPOCH = -1


def end_offset(plog: PartitionLog, partition: int, current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
    if current_leader_epoch != NO_EPOCH and current_leader_epoch != LEADER_EPOCH:
        error = ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch > LEADER_EPOCH else ErrorCode.FENCED_LEADER_EPOCH
        return EpochEndOffset(error_code=error, partition=partition)
    if leader_epoch != LEADER_EPOCH:
        # Kafka's LeaderEpochFileCache.endOffsetFor: an epoch past the latest one (as one before the
        # first) has no end offset here
        return EpochEndOffset(error_code=ErrorCode.NONE, partition=partition, leader_epoch=NO_EPOCH, end_offset=-1)
    return EpochEndOffset(error_code=ErrorCode.NONE, partition=partition, leader_epoch=LEADER_EPOCH,
                          end_offset=plog.log_end_offset)


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            plog = ctx.broker.logs.get_log(topic.topic, p.partition)
            if plog is None:
                parts.append(EpochEndOffset(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition=p.partition))
                continue
            current = p.current_leader_epoch if ctx.api_version >= 2 else NO_EPOCH
            parts.append(end_offset(plog, p.partition, current, p.leader_epoch))
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
