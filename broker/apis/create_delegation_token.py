"""CreateDelegationToken (38): refused as Kafka refuses it with delegation tokens off (delegation_tokens.py):
the owner (the requester unless the request names one) and, from v3, the requester in the answer, no
token. An owner other than the requester needs CREATE_TOKENS on that user, else
DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer that is not a User, INVALID_PRINCIPAL_TYPE."""

from __future__ import annotations

from .delegation_tokens import error_timestamp, principal_parts, requests_allowed, tokens_error
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.create_delegation_token_request import CreateDelegationTokenRequest
from ...protocol.messages.create_delegation_token_response import CreateDelegationTokenResponse

API_KEY = 38
VERSIONS = (0, 3)


def _answer(ctx: RequestContext, request: CreateDelegationTokenRequest, error: int) -> CreateDelegationTokenResponse:
    by = ctx.principal
    owner = (f"{request.owner_principal_type}:{request.owner_principal_name}"
             if ctx.api_version >= 3 and request.owner_principal_name else by)
    owner_type, owner_name = principal_parts(owner)
    by_type, by_name = principal_parts(by)
    at = error_timestamp(error)
    return CreateDelegationTokenResponse(
        error_code=error, principal_type=owner_type, principal_name=owner_name,
        token_requester_principal_type=by_type, token_requester_principal_name=by_name,
        issue_timestamp_ms=at, expiry_timestamp_ms=at, max_timestamp_ms=at,
        token_id="", hmac=b"", throttle_time_ms=0)


failed_response = _answer


def handle(ctx: RequestContext, request: CreateDelegationTokenRequest) -> CreateDelegationTokenResponse:
    if not requests_allowed(ctx):
        return _answer(ctx, request, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    owner_named = ctx.api_version >= 3 and bool(request.owner_principal_name)
    owner = f"{request.owner_principal_type}:{request.owner_principal_name}" if owner_named else ctx.principal
    security = ctx.broker.security_if_built
    if owner != ctx.principal and security is not None:
        from ..security.acl import Operation, ResourceType

        if not security.authorize(ctx, Operation.CREATE_TOKENS, ResourceType.USER, owner):
            return _answer(ctx, request, ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    if any(r.principal_type != "User" for r in request.renewers):
        return _answer(ctx, request, ErrorCode.INVALID_PRINCIPAL_TYPE)
    return _answer(ctx, request, tokens_error(ctx))
