"""SaslHandshake (17) v0-v1: choose the mechanism; v0 means the tokens that follow are bare frames.

An unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones and the connection
closes, as in Kafka; on a listener without SASL the answer is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from ...protocol.messages.sasl_handshake_response import SaslHandshakeResponse

API_KEY = 17
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    conn = ctx.connection
    if conn is None:  # a PLAINTEXT listener
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    error, mechanisms = conn.handshake(request.mechanism, ctx.api_version)
    return SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)
