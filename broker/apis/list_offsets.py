"""ListOffsets (2), v0-v11: offsets by timestamp and the special positions (v10 only adds a timeout for
tiered storage).

-2 earliest: the log start offset; -1 latest: the log end offset, or with isolation_level
read_committed the last stable offset (the first offset of the oldest open transaction); -3 max timestamp (v7+): the record with the largest
timestamp; -4 earliest local (v8+): the log start (all data is local); -5 latest tiered (v9+): with no
tiered storage Kafka answers offset -1 and timestamp -1, and so it does for -6 earliest pending upload
(v11+). Any other value is a timestamp looked up
through the time index: the first record whose timestamp is at least that, or -1/-1 when none is.
A batch with more records than a request may walk on the event loop is searched on a worker thread
(broker/storage/log/timestamp_search.py), so one search through millions of records holds no other client.

v0 (Kafka 3.9; removed in 4.0) answers a list of up to MaxNumOffsets offsets, newest first, as
Kafka's legacyFetchOffsetsBefore: the segments' base offsets (each at least the log start) paired
with their files' modification times, plus the log end offset at "now" when the active segment
holds data; latest starts from the last entry, earliest from the first, a timestamp from the last
entry not newer than it.
"""

from __future__ import annotations

from collections import Counter


from ..storage.log.partition_log import PartitionLog
from ..storage.log.timestamp_search import BatchToWalk
from ..storage.log.validation import InlineBudget
from ..workers import OFFSET_SEARCH, run_in_worker
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.list_offsets_request import ListOffsetsRequest
from ...protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

API_KEY = 2
VERSIONS = (0, 11)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
LEADER_EPOCH = 0
READ_COMMITTED = 1


async def _lookup(plog: PartitionLog, timestamp: int, version: int, budget: InlineBudget) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one partition. A batch past what is left of the
    request's `budget` for walking records on the loop is walked on the offset-search worker
    (log/timestamp_search.py)."""
    if timestamp == LATEST:
        return plog.log_end_offset, -1, LEADER_EPOCH
    if timestamp == EARLIEST or (timestamp == EARLIEST_LOCAL and version >= 8):
        return plog.log_start_offset, -1, LEADER_EPOCH
    if (timestamp == LATEST_TIERED and version >= 9) or (timestamp == EARLIEST_PENDING_UPLOAD and version >= 11):
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP and version >= 7:
        best = plog.max_timestamp_offset(budget)
        if isinstance(best, BatchToWalk):
            best = await run_in_worker(OFFSET_SEARCH, best.walk) or best.otherwise or (-1, -1)
        offset, ts = best
        return (offset, ts, LEADER_EPOCH) if offset >= 0 else (-1, -1, -1)
    start = 0
    while True:
        found = plog.offset_for_timestamp(timestamp, start, budget)
        if not isinstance(found, BatchToWalk):
            break
        walked = await run_in_worker(OFFSET_SEARCH, found.walk)
        if walked is not None:
            found = walked
            break
        if plog.closed:  # deleted while the batch was walked
            raise KafkaError(f"{plog.topic}-{plog.partition} was deleted", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        assert found.resume_offset is not None
        start = found.resume_offset  # no record of it qualifies (its header's max timestamp said one would)
    if found is None:
        return -1, -1, -1
    return found[0], found[1], LEADER_EPOCH


def failed_response(_ctx: RequestContext, request: ListOffsetsRequest, error: int) -> ListOffsetsResponse:
    """Every requested partition answers `error` (Kafka's ListOffsetsRequest.getErrorResponse)."""
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error) for p in t.partitions])
        for t in request.topics
    ])


def legacy_offsets_before(plog: PartitionLog, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    entries = [(max(seg.base_offset, plog.log_start_offset), seg.last_modified_ms()) for seg in plog.segments]
    if plog.segments[-1].size > 0:
        entries.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST:
        start = len(entries) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(entries) - 1
        while start >= 0 and entries[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    return sorted((entries[start - j][0] for j in range(count)), reverse=True)


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
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
            plog = broker.logs.get_log(topic.name, p.partition_index)
            if plog is None:
                parts.append(ListOffsetsPartitionResponse(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            current = p.current_leader_epoch if ctx.api_version >= 4 else -1
            if current != -1 and current != LEADER_EPOCH:
                # Kafka's Partition.fetchOffsetForTimestamp checks the client's idea of the leader epoch
                parts.append(ListOffsetsPartitionResponse(p.partition_index, ErrorCode.UNKNOWN_LEADER_EPOCH
                                                          if current > LEADER_EPOCH else ErrorCode.FENCED_LEADER_EPOCH))
                continue
            if ctx.api_version == 0:
                offsets = legacy_offsets_before(plog, p.timestamp, p.max_num_offsets, broker.clock.wall_ms())
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                                          old_style_offsets=offsets))
                continue
            try:
                offset, ts, epoch = await _lookup(plog, p.timestamp, ctx.api_version, budget)
            except KafkaError as e:  # a timestamp search that reached a damaged batch: CORRUPT_MESSAGE
                parts.append(ListOffsetsPartitionResponse(p.partition_index, e.code))
                continue
            if p.timestamp == LATEST and request.isolation_level == READ_COMMITTED:
                offset = broker.producer_states.last_stable_offset(plog)
            parts.append(ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=ErrorCode.NONE, timestamp=ts, offset=offset,
                leader_epoch=epoch,
            ))
        topics_out.append(ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics_out)
