"""DeleteRecords (21) v0-v2: advance a partition's log start offset (`kafka-delete-records.sh`).

As Kafka's ReplicaManager.deleteRecords on a one-replica partition: offset -1 means the high
watermark; an offset below 0 or past the high watermark is OFFSET_OUT_OF_RANGE; the answer is the
new low watermark (log start offset), which never moves backwards. The new log start offset is
durable before the answer leaves (the partition's checkpoint; over PostgreSQL, the partition's row,
fenced as appends are), so it survives a restart; segments
wholly below it are deleted. Internal topics are refused with INVALID_TOPIC_EXCEPTION, as Kafka
refuses them (broker/partitions/internal_topics.py), with one `internal_topic_change_refused` event
per topic and request. The deletion is the partition service's (broker/partitions/service.py).
"""

from __future__ import annotations

from contextlib import suppress

from ..partitions import internal_topics
from ..network.router import RequestContext
from ...protocol.messages.delete_records_request import DeleteRecordsRequest
from ...protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

API_KEY = 21
VERSIONS = (0, 2)


def failed_response(_ctx: RequestContext, request: DeleteRecordsRequest, error: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(topics=[
        DeleteRecordsTopicResult(t.name, [DeleteRecordsPartitionResult(p.partition_index, -1, error)
                                          for p in t.partitions])
        for t in request.topics])


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
        # the service refuses each partition of an internal topic; the refusal's event is the topic's
        with suppress(internal_topics.Refused), internal_topics.reported(ctx, name, "delete_records",
                                                                          partitions=len(offsets)):
            internal_topics.check_records_deletion(name)
        parts = []
        for partition, offset in offsets.items():
            error, low = await ctx.broker.partitions.delete_records(name, partition, offset)
            parts.append(DeleteRecordsPartitionResult(partition_index=partition, low_watermark=low, error_code=error))
        results.append(DeleteRecordsTopicResult(name=name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=results)
