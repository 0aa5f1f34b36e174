"""InitProducerId (22): producer ids for idempotent producers.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, whatever id and
epoch (v3+) the request carries. With a transactional id the request belongs to a transaction
coordinator, which this broker does not run: it answers COORDINATOR_NOT_AVAILABLE, what a client
also gets from FindCoordinator when the transaction state topic cannot be served.
"""

from __future__ import annotations

from kbroker.broker.router import RequestContext
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kbroker.protocol.messages.init_producer_id_response import InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    producer_id = ctx.broker.producer_states.ids.allocate()
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
