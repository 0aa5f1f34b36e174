"""UnregisterBroker (64): remove a broker's registration from the cluster (kafka-cluster.sh unregister, for a
broker that is gone for good). Kafka's broker forwards it to its controller, which answers
BROKER_ID_NOT_REGISTERED ("Broker ID 2 is not currently registered") for an id it does not know. This
node is the only registered broker; unregistering it is answered NONE and changes nothing: a live Kafka
broker that is unregistered registers again with its next heartbeat, and this one never stops being live.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from ...protocol.messages.unregister_broker_response import UnregisterBrokerResponse

API_KEY = 64
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, _request: UnregisterBrokerRequest, error: int) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(throttle_time_ms=0, error_code=error, error_message=None)


def handle(ctx: RequestContext, request: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
    if request.broker_id == ctx.broker.node_id:
        return failed_response(ctx, request, ErrorCode.NONE)
    return UnregisterBrokerResponse(throttle_time_ms=0, error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                                    error_message=f"Broker ID {request.broker_id} is not currently registered")
