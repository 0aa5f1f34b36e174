"""ListOffsets (2), v0-v11: offsets by timestamp and the special positions (v10 only adds a timeout for
tiered storage).

-2 earliest: the log start offset; -1 latest: the high watermark (what consumers may read: with
`--flush always` the durable end), or with isolation_level read_committed the last stable offset
(the first offset of the oldest open transaction); -3 max timestamp (v7+): the record with the largest
timestamp; -4 earliest local (v8+): the log start (all data is local); -5 latest tiered (v9+): with no
tiered storage Kafka answers offset -1 and timestamp -1, and so it does for -6 earliest pending upload
(v11+). Any other value is a timestamp looked up
through the time index: the first record whose timestamp is at least that, or -1/-1 when none is.
A batch with more records than a request may walk on the event loop is searched on a worker thread
(broker/storage/log/timestamp_search.py), so one search through millions of records holds no other client.
The leader epoch answered is the one the found record was appended in (for latest, the current
one), from the partition's epoch history; a CurrentLeaderEpoch (v4+) other than the catalogue's is
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, as in Kafka. The lookups are the partition service's.

v0 (Kafka 3.9; removed in 4.0) answers a list of up to MaxNumOffsets offsets, newest first, as
Kafka's legacyFetchOffsetsBefore: the segments' base offsets (each at least the log start) paired
with their files' modification times, plus the log end offset at "now" when the active segment
holds data (the high watermark); latest starts from the last entry, earliest from the first, a timestamp from the last
entry not newer than it.
"""

from __future__ import annotations

from collections import Counter

from ..network.router import RequestContext
from ..partitions.service import InlineBudget
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_offsets_request import ListOffsetsRequest
from ...protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

API_KEY = 2
VERSIONS = (0, 11)
READ_COMMITTED = 1
CURRENT_EPOCH_FROM = 4  # the request names the leader epoch the client knows


def failed_response(_ctx: RequestContext, request: ListOffsetsRequest, error: int) -> ListOffsetsResponse:
    """Every requested partition answers `error` (Kafka's ListOffsetsRequest.getErrorResponse)."""
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error) for p in t.partitions])
        for t in request.topics
    ])


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    partitions = ctx.broker.partitions
    topics_out = []
    # Kafka refuses every mention of a partition listed twice anywhere in the request (its
    # duplicatePartitions), and looks none of them up: a topic's entry repeated 20 times repeated
    # a timestamp search of a million records 20 times.
    named = Counter((topic.name, p.partition_index) for topic in request.topics for p in topic.partitions)
    budget = InlineBudget()  # the records all of its searches may walk on the loop
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            if named[(topic.name, p.partition_index)] > 1:
                parts.append(ListOffsetsPartitionResponse(p.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            if ctx.api_version == 0:
                error, offsets = partitions.offsets_before(topic.name, p.partition_index, p.timestamp,
                                                           p.max_num_offsets)
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error,
                                                          old_style_offsets=offsets))
                continue
            current = p.current_leader_epoch if ctx.api_version >= CURRENT_EPOCH_FROM else -1
            error, offset, ts, epoch = await partitions.list_offset(
                topic.name, p.partition_index, p.timestamp, ctx.api_version,
                request.isolation_level == READ_COMMITTED, budget, current)
            if error != ErrorCode.NONE:
                parts.append(ListOffsetsPartitionResponse(p.partition_index, error))
                continue
            parts.append(ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=ErrorCode.NONE, timestamp=ts, offset=offset,
                leader_epoch=epoch,
            ))
        topics_out.append(ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics_out)
