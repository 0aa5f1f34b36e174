"""What the delegation token APIs (38-41) share: whether this connection may ask for tokens at all.

Kafka serves the four APIs on every broker, and with its defaults (no `delegation.token.secret.key`)
delegation tokens are off; so is it here, and the APIs answer as Kafka's do then: a connection that
may not use tokens (PLAINTEXT, or SSL without a client certificate: KafkaApis.allowTokenRequests) gets
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; any other gets what Kafka's controller answers with tokens off,
DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

from ..network.router import ANONYMOUS, RequestContext
from ...protocol.errors import ErrorCode

ERROR_TIMESTAMP = -1  # DelegationTokenManager.ERROR_TIMESTAMP


def error_timestamp(error: int) -> int:
    """The times an answer carries with `error`. The broker's own refusals carry ERROR_TIMESTAMP (-1);
    DELEGATION_TOKEN_AUTH_DISABLED comes from Kafka's controller (DelegationTokenControlManager), whose
    answer sets only its error code, so its times are the schema's default, 0 (asked of Kafka 4.4:
    tests/reference/test_delegation_tokens_sasl.py)."""
    return 0 if error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED else ERROR_TIMESTAMP


def requests_allowed(ctx: RequestContext) -> bool:
    connection = ctx.connection
    if connection is None:  # PLAINTEXT
        return False
    return connection.sasl or connection.principal != ANONYMOUS  # SSL needs a client certificate


def tokens_error(ctx: RequestContext) -> ErrorCode:
    """The error every token request gets: tokens are off (see the module's text)."""
    return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED if requests_allowed(ctx) \
        else ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def principal_parts(principal: str) -> tuple[str, str]:
    """`User:alice` -> ("User", "alice"), as KafkaPrincipal's type and name."""
    kind, _, name = principal.partition(":")
    return kind, name
