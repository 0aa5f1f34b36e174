"""DescribeUserScramCredentials (50) v0: each user's SCRAM mechanisms and iteration counts (never the
keys); Describe on the cluster. Unknown users answer RESOURCE_NOT_FOUND, repeated ones
DUPLICATE_RESOURCE, as Kafka does."""

from __future__ import annotations

from collections import Counter

from ..network.router import RequestContext
from ..network.error_answers import refuse
from ..security.acl import Operation, ResourceType
from ..security.credentials import MECHANISM_CODES
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_user_scram_credentials_request import DescribeUserScramCredentialsRequest
from ...protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
)

API_KEY = 50
VERSIONS = (0, 0)


async def handle(ctx: RequestContext,
                 request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    security = ctx.broker.security
    if not security.authorize(ctx, Operation.DESCRIBE, ResourceType.CLUSTER):
        return refuse(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    users = security.credentials.scram_users()
    wanted = [u.name for u in request.users] if request.users else sorted(users)
    counts = Counter(wanted)
    results = []
    for name in dict.fromkeys(wanted):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=f"Cannot describe SCRAM "
                f"credentials for the same user twice in a single request: {name}", credential_infos=[]))
        elif name not in users:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {name}",
                credential_infos=[]))
        else:
            results.append(DescribeUserScramCredentialsResult(user=name, error_code=ErrorCode.NONE, credential_infos=[
                CredentialInfo(mechanism=MECHANISM_CODES[mech], iterations=cred.iterations)
                for mech, cred in sorted(users[name].items())]))
    return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message="", results=results)
