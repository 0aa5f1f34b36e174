"""AlterUserScramCredentials (51) v0: upsert and delete SCRAM credentials (Alter on the cluster).

The client sends the salt and the salted password (RFC 5802 Hi()); the broker keeps StoredKey and
ServerKey derived from it, written to the data directory before the answer. Checks as in Kafka's
ScramControlManager: an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations outside
4096..16384 or an empty salt/password/name (UNACCEPTABLE_CREDENTIAL), a user named twice in the
request, even for two mechanisms (DUPLICATE_RESOURCE), deleting what does not exist (RESOURCE_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import structlog

from ..network.router import RequestContext
from ..security.acl import Operation, ResourceType
from ..security.credentials import MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, ScramCredential
from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion,
)
from ...protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
)

API_KEY = 51
VERSIONS = (0, 0)
log = structlog.get_logger("kbroker.security")


def _names(request: AlterUserScramCredentialsRequest) -> list[str]:
    return list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))


def failed_response(_ctx: RequestContext, request: AlterUserScramCredentialsRequest, error: int,
                    message: str | None = None) -> AlterUserScramCredentialsResponse:
    """Every user answers `error` (Kafka's AlterUserScramCredentialsRequest.getErrorResponse)."""
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=n, error_code=error, error_message=message) for n in _names(request)])


def _deletion_problem(d: ScramCredentialDeletion, existing: Mapping[str, Mapping]) -> tuple[int, str] | None:
    if not d.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if d.mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if MECHANISM_NAMES[d.mechanism] not in existing.get(d.name, {}):
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return None


def _upsertion_problem(u: ScramCredentialUpsertion) -> tuple[int, str] | None:
    if not u.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if u.mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if u.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not u.salt or not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


async def handle(ctx: RequestContext,
                 request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    security = ctx.broker.security
    names = _names(request)
    if not security.authorize(ctx, Operation.ALTER, ResourceType.CLUSTER):
        return failed_response(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    existing = security.credentials.scram_users()
    # Kafka 4.4's order: deletions, then upsertions, each in turn; a user named a second time anywhere in
    # the request is DUPLICATE_RESOURCE (even for another mechanism), unless it already failed a check.
    errors: dict[str, tuple[int, str]] = {}
    seen: set[str] = set()
    checks = [(d.name, partial(_deletion_problem, d, existing)) for d in request.deletions] + \
             [(u.name, partial(_upsertion_problem, u)) for u in request.upsertions]
    for name, problem in checks:
        if name in errors:
            continue
        if name in seen:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            continue
        seen.add(name)
        found = problem()
        if found is not None:
            errors[name] = found
    upserts = [(u.name, MECHANISM_NAMES[u.mechanism],
                ScramCredential.from_salted_password(MECHANISM_NAMES[u.mechanism], u.salt, u.salted_password,
                                                     u.iterations))
               for u in request.upsertions if u.name not in errors]
    deletions = [(d.name, MECHANISM_NAMES[d.mechanism]) for d in request.deletions if d.name not in errors]
    if upserts or deletions:
        await security.credentials.alter_scram(upserts, deletions)
        log.info("scram_credentials_altered", principal=ctx.connection.principal if ctx.connection else None,
                 upserted=sorted({u[0] for u in upserts}), deleted=sorted({d[0] for d in deletions}))
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=n, error_code=errors.get(n, (ErrorCode.NONE, None))[0],
                                        error_message=errors.get(n, (ErrorCode.NONE, None))[1])
        for n in names])
