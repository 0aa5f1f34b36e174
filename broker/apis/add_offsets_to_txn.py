"""AddOffsetsToTxn (25) v0-v4: the group's `__consumer_offsets` partition joins the transaction, so
that TxnOffsetCommit may follow (Kafka adds exactly that partition)."""

from __future__ import annotations

from ..coordinators.offsets_topic import TOPIC as OFFSETS_TOPIC
from ..network.router import RequestContext
from ..network.error_answers import refuse
from ...protocol.errors import ErrorCode
from ...protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from ...protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse

API_KEY = 25
VERSIONS = (0, 4)


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not request.group_id:
        return refuse(ctx, request, ErrorCode.INVALID_GROUP_ID)
    tp = (OFFSETS_TOPIC, ctx.broker.coordinator.partition_for(request.group_id))
    error = await ctx.broker.transactions.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch, [tp])
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # what clients before KIP-588 understand (Kafka's KafkaApis)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
