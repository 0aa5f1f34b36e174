"""DeleteTopics (20), v1-v6: by name, and from v6 by name or topic id.

Unknown names are UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; a topic named twice in
one request, or an entry with both (or neither) a name and an id, is INVALID_REQUEST. Internal topics
(`__consumer_offsets`, `__transaction_state`) are refused with INVALID_TOPIC_EXCEPTION, Kafka's answer
to DeleteRecords on them (broker/partitions/internal_topics.py); Kafka 4.4 deletes them.
"""

from __future__ import annotations

from collections import Counter

from ..partitions import internal_topics
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.delete_topics_request import DeleteTopicsRequest
from ...protocol.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from ...protocol.wire import ZERO_UUID

API_KEY = 20
VERSIONS = (0, 6)


def failed_response(ctx: RequestContext, request: DeleteTopicsRequest, error: int) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        results = [DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=error) for t in request.topics]
    else:
        results = [DeletableTopicResult(name=name, error_code=error) for name in request.topic_names]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    topics = broker.catalogue.topics()
    by_id = {info.topic_id: name for name, info in topics.items()}
    seen_names = Counter(n for n, _ in wanted if n is not None)  # one pass each: a request may name 100,000
    seen_ids = Counter(i for n, i in wanted if n is None and i != ZERO_UUID)
    results = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        if name is not None and topic_id != ZERO_UUID:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."
            continue
        if name is None and topic_id == ZERO_UUID:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
            continue
        if name is not None and seen_names[name] > 1:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            continue
        if name is None and seen_ids[topic_id] > 1:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic id."
            continue
        if name is None:
            name = by_id.get(topic_id)
            if name is None:
                result.error_code, result.error_message = ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."
                continue
            result.name = name
        info = topics.get(name)
        if info is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = "This server does not host this topic-partition."
            continue
        result.topic_id = info.topic_id
        try:
            with internal_topics.reported(ctx, name, "delete_topics"):
                await broker.catalogue.delete_topic_async(name)
        except KafkaError as refusal:  # the internal topics' policy; a cluster's concurrent deletion
            result.error_code, result.error_message = refusal.code, str(refusal)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
