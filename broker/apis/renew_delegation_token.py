"""RenewDelegationToken (39): refused as Kafka refuses it with delegation tokens off (delegation_tokens.py)."""

from __future__ import annotations

from .delegation_tokens import error_timestamp, tokens_error
from ..network.router import RequestContext
from ...protocol.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from ...protocol.messages.renew_delegation_token_response import RenewDelegationTokenResponse

API_KEY = 39
VERSIONS = (0, 2)


def failed_response(_ctx: RequestContext, _request: RenewDelegationTokenRequest, error: int
                    ) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=error_timestamp(error), throttle_time_ms=0)


def handle(ctx: RequestContext, request: RenewDelegationTokenRequest) -> RenewDelegationTokenResponse:
    return failed_response(ctx, request, tokens_error(ctx))
