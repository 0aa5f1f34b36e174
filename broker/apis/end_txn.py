"""EndTxn (26) v0-v4: commit or abort. Answered once PrepareCommit/PrepareAbort is durable; the
markers follow in the background (broker/coordinators/transactions.py). v5 (KIP-890 part 2, an epoch bump on every
end) is not advertised, so clients keep the classic protocol."""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.end_txn_request import EndTxnRequest
from ...protocol.messages.end_txn_response import EndTxnResponse

API_KEY = 26
VERSIONS = (0, 4)


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    error = await ctx.broker.transactions.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                  request.committed)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # what clients before KIP-588 understand (Kafka's KafkaApis)
    return EndTxnResponse(throttle_time_ms=0, error_code=error)
