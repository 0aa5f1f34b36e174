"""ExpireDelegationToken (40): refused as Kafka refuses it with delegation tokens off (delegation_tokens.py)."""

from __future__ import annotations

from .delegation_tokens import error_timestamp, tokens_error
from ..network.router import RequestContext
from ...protocol.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from ...protocol.messages.expire_delegation_token_response import ExpireDelegationTokenResponse

API_KEY = 40
VERSIONS = (0, 2)


def failed_response(_ctx: RequestContext, _request: ExpireDelegationTokenRequest, error: int
                    ) -> ExpireDelegationTokenResponse:
    return ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=error_timestamp(error), throttle_time_ms=0)


def handle(ctx: RequestContext, request: ExpireDelegationTokenRequest) -> ExpireDelegationTokenResponse:
    return failed_response(ctx, request, tokens_error(ctx))
