"""SaslAuthenticate (36) v0-v2: one step of the SASL exchange chosen by SaslHandshake v1.

A failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message, then the connection
closes; v1+ carries the session lifetime for re-authentication (KIP-368).
"""

from __future__ import annotations

from ..network.router import RequestContext
from ..network.error_answers import refuse
from ...protocol.errors import ErrorCode
from ...protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from ...protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse

API_KEY = 36
VERSIONS = (0, 2)


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    conn = ctx.connection
    if conn is None:
        return refuse(ctx, request, ErrorCode.ILLEGAL_SASL_STATE, "SASL is not enabled on this listener")
    result = conn.authenticate(request.auth_bytes)
    return SaslAuthenticateResponse(error_code=result.error_code, error_message=result.error_message,
                                    auth_bytes=result.auth_bytes, session_lifetime_ms=result.session_lifetime_ms)
