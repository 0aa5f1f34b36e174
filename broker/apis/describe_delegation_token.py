"""DescribeDelegationToken (41): refused as Kafka refuses it with delegation tokens off (delegation_tokens.py):
no tokens, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED or DELEGATION_TOKEN_AUTH_DISABLED (the broker answers this
one itself in Kafka, not its controller, with the same errors)."""

from __future__ import annotations

from .delegation_tokens import tokens_error
from ..network.router import RequestContext
from ...protocol.messages.describe_delegation_token_request import DescribeDelegationTokenRequest
from ...protocol.messages.describe_delegation_token_response import DescribeDelegationTokenResponse

API_KEY = 41
VERSIONS = (0, 3)


def failed_response(_ctx: RequestContext, _request: DescribeDelegationTokenRequest, error: int
                    ) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(error_code=error, tokens=[], throttle_time_ms=0)


def handle(ctx: RequestContext, request: DescribeDelegationTokenRequest) -> DescribeDelegationTokenResponse:
    return failed_response(ctx, request, tokens_error(ctx))
