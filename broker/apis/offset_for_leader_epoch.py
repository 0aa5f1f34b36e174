"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, from the partition's epoch history
(broker/storage/log/epochs.py, kept by the partition service; the current epoch is the catalogue's).

As Kafka's Partition.lastOffsetForLeaderEpoch: a CurrentLeaderEpoch (v2+) newer than the partition's is
UNKNOWN_LEADER_EPOCH and an older one FENCED_LEADER_EPOCH (-1 skips the check); for the latest epoch
the answer is the log end offset; for an older one, that epoch and the start offset of the next; for
one older than any the history knows, the start of the first; for one newer than any, epoch -1 and
offset -1. A partition whose leader never changed has one term, epoch 0, from its log start.
"""

from __future__ import annotations

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
NO_EPOCH = -1


def failed_response(_ctx: RequestContext, request: OffsetForLeaderEpochRequest,
                    error: int) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(t.topic, [EpochEndOffset(error_code=error, partition=p.partition)
                                             for p in t.partitions])
        for t in request.topics])


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    partitions = ctx.broker.partitions
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            current = p.current_leader_epoch if ctx.api_version >= 2 else NO_EPOCH
            error, epoch, end = partitions.epoch_end_offset(topic.topic, p.partition, current, p.leader_epoch)
            if error != ErrorCode.NONE:
                parts.append(EpochEndOffset(error_code=error, partition=p.partition))
            else:
                parts.append(EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch,
                                            end_offset=end))
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
