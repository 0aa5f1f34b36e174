"""EndTxn (26) v0-v5: commit or abort. Answered once PrepareCommit/PrepareAbort is durable; the
markers follow in the background (broker/coordinators/transactions.py).

v5 is transactions v2 (KIP-890 part 2; a client sends it once `transaction.version` 2 is finalized):
the end bumps the producer epoch, the markers carry the new one, and the answer names the producer id
and epoch the producer goes on with (a new producer id at epoch 0 once the epoch is exhausted).
Before v5 the answer's producer id and epoch are -1 and the epoch stays (Kafka's endTransactionWithTV1).
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.end_txn_request import EndTxnRequest
from ...protocol.messages.end_txn_response import EndTxnResponse

API_KEY = 26
VERSIONS = (0, 5)
TRANSACTIONS_V2_FROM = 5  # Kafka's TransactionVersion.transactionVersionForEndTxn


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    error, producer_id, epoch = await ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
        v2=ctx.api_version >= TRANSACTIONS_V2_FROM)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # what clients before KIP-588 understand (Kafka's KafkaApis)
    return EndTxnResponse(throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=epoch)
