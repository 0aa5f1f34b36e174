"""InitProducerId (22): producer ids for idempotent and transactional producers.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, whatever id and
epoch (v3+) the request carries. With one, the transaction coordinator (broker/coordinators/transactions.py)
answers: a new id gets a producer id at epoch 0; an existing one has its epoch bumped, which fences
the previous instance; an Ongoing transaction of that id is aborted first (CONCURRENT_TRANSACTIONS,
the client retries). From v3 a client recovering from an abortable error sends its current producer
id and epoch to have the epoch bumped (KIP-360); a stale pair is PRODUCER_FENCED.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.init_producer_id_request import InitProducerIdRequest
from ...protocol.messages.init_producer_id_response import InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)
NO_PRODUCER_ID = -1


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is None:
        producer_id = ctx.broker.catalogue.allocate_producer_id()
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
    expected = None
    if ctx.api_version >= 3 and request.producer_id != NO_PRODUCER_ID:
        expected = (request.producer_id, request.producer_epoch)
    error, producer_id, epoch = await ctx.broker.transactions.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, expected)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # what clients before KIP-588 understand (Kafka's KafkaApis)
    return InitProducerIdResponse(error_code=error, producer_id=producer_id, producer_epoch=epoch)
