"""TxnOffsetCommit (28) v0-v6: a transaction's consumed offsets, visible in the group only when the
transaction commits (discarded on abort). Until then OffsetFetch with `require_stable` answers
UNSTABLE_OFFSET_COMMIT for those partitions. Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION and
metadata longer than offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE, per partition, as Kafka does.

From v3 the consumer's generation, member id and group instance id are checked against the group
(KIP-447): UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or ILLEGAL_GENERATION for a consumer that lost
its partitions; without them (generation -1, empty member id) any producer may commit.

From v5 (transactions v2) the group's `__consumer_offsets` partition is added to the transaction here
(the client no longer sends AddOffsetsToTxn); before, it must have been added. v6 names topics by id
(an id this broker does not know is UNKNOWN_TOPIC_ID), as Kafka 4.4 does.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ..coordinators.transactions import PendingOffset
from ...protocol.errors import ErrorCode
from ...protocol.wire import ZERO_UUID
from ...protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from ...protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

API_KEY = 28
VERSIONS = (0, 6)
ADD_PARTITION_FROM = 5  # Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation
TOPIC_IDS_FROM = 6
E = ErrorCode


def failed_response(_ctx: RequestContext, request: TxnOffsetCommitRequest, error: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            TxnOffsetCommitResponsePartition(p.partition_index, error) for p in t.partitions])
        for t in request.topics])


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    service = broker.transactions
    max_bytes = broker.config.offset_metadata_max_bytes
    errors: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], PendingOffset] = {}
    by_id = ctx.api_version >= TOPIC_IDS_FROM
    names_by_id = broker.catalogue.names_by_id() if by_id else {}
    unknown_ids: list[TxnOffsetCommitResponseTopic] = []
    for topic in request.topics:
        if by_id:
            name = names_by_id.get(topic.topic_id)
            if name is None:
                unknown_ids.append(TxnOffsetCommitResponseTopic(topic_id=topic.topic_id, partitions=[
                    TxnOffsetCommitResponsePartition(p.partition_index, E.UNKNOWN_TOPIC_ID) for p in topic.partitions]))
                continue
            topic.name = name
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if not broker.catalogue.has_partition(*tp):
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata) > max_bytes:
                errors[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                offsets[tp] = PendingOffset(p.committed_offset,
                                            p.committed_leader_epoch if ctx.api_version >= 2 else -1, metadata)
    if offsets:
        if service is None:
            error = E.COORDINATOR_NOT_AVAILABLE
        elif not request.group_id:
            error = E.INVALID_GROUP_ID
        else:
            v3 = ctx.api_version >= 3  # KIP-447: the consumer's generation, member id and instance id
            error = await service.txn_offset_commit(
                request.transactional_id, request.producer_id, request.producer_epoch, request.group_id, offsets,
                generation_id=request.generation_id_or_member_epoch if v3 else -1,
                member_id=request.member_id if v3 else "",
                group_instance_id=request.group_instance_id if v3 else None,
                add_partition=ctx.api_version >= ADD_PARTITION_FROM)
            if error == E.TRANSACTION_ABORTABLE and ctx.api_version <= 3:
                error = E.INVALID_TXN_STATE  # what clients before KIP-890 understand (Kafka's DEFAULT_ERROR)
        errors.update({tp: error for tp in offsets})
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for (name, partition), code in errors.items():
        by_topic.setdefault(name, []).append(TxnOffsetCommitResponsePartition(partition, code))
    ids = {name: topic_id for topic_id, name in names_by_id.items()}
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=unknown_ids + [
        TxnOffsetCommitResponseTopic(name=topic_name, topic_id=ids.get(topic_name, ZERO_UUID), partitions=parts)
        for topic_name, parts in by_topic.items()])
