"""DeleteRecords (21) v0-v2: advance a partition's log start offset (`kafka-delete-records.sh`).

As Kafka's ReplicaManager.deleteRecords on a one-replica partition: offset -1 means the high
watermark; an offset below 0 or past the high watermark is OFFSET_OUT_OF_RANGE; the answer is the
new low watermark (log start offset), which never moves backwards. The new log start offset is
written to the partition's checkpoint before the answer leaves, so it survives a restart; segments
wholly below it are deleted. Internal topics are refused with INVALID_TOPIC_EXCEPTION, as Kafka
refuses them, with one `internal_topic_change_refused` event per topic and request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from ..partitions import internal_topics
from ..storage.log.manager import is_internal_topic
from ..storage.log.partition_log import OffsetOutOfRangeError
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_records_request import DeleteRecordsRequest
from ...protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 21
VERSIONS = (0, 2)


def failed_response(_ctx: RequestContext, request: DeleteRecordsRequest, error: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(topics=[
        DeleteRecordsTopicResult(t.name, [DeleteRecordsPartitionResult(p.partition_index, -1, error)
                                          for p in t.partitions])
        for t in request.topics])
HIGH_WATERMARK = -1
log = structlog.get_logger("kbroker.delete_records")


def delete_before(broker: BrokerServices, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
    """(error, low watermark) for one partition."""
    if is_internal_topic(topic):
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
    plog = broker.logs.get_log(topic, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    target = plog.high_watermark if offset == HIGH_WATERMARK else offset
    try:
        before = plog.log_start_offset
        low = plog.delete_records_before(target)
    except OffsetOutOfRangeError:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    if low != before:
        log.info("records_deleted", topic=topic, partition=partition, log_start_offset=low, previous=before)
    return ErrorCode.NONE, low


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    # As Kafka (KafkaApis keeps the request's partitions in a map): a partition named more than once
    # is deleted up to its last offset and answered once. Each entry was a deletion and a checkpoint
    # fsync of its own (one partition named 20,000 times held every client 20 s).
    wanted: dict[str, dict[int, int]] = {}
    for topic in request.topics:
        offsets = wanted.setdefault(topic.name, {})
        for p in topic.partitions:
            offsets[p.partition_index] = p.offset
    results = []
    for name, offsets in wanted.items():
        if is_internal_topic(name):
            refusal = internal_topics.records_deletion_refused(name)
            internal_topics.refused(ctx, name, "delete_records", refusal, partitions=len(offsets))
        parts = []
        for partition, offset in offsets.items():
            error, low = delete_before(ctx.broker, name, partition, offset)
            parts.append(DeleteRecordsPartitionResult(partition_index=partition, low_watermark=low, error_code=error))
        results.append(DeleteRecordsTopicResult(name=name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=results)
