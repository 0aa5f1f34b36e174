"""CreateAcls (30) v1-v3: add ACL bindings (Alter on the cluster); persisted before the answer.

As in Kafka's controller, a request that would add more than 10,000 ACLs adds none: every creation
answers POLICY_VIOLATION (broker/storage/state_file.py).

While the ACL file is damaged (broker/security/acl_store.py) changes answer POLICY_VIOLATION, so the
file stays as the operator must see it."""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from ..network.router import RequestContext
from .limits import MAX_CHANGES_PER_REQUEST, TOO_MANY_CHANGES
from ..security.acl import (
    AclBinding, Operation, PatternType, Permission, ResourceType, invalid_binding_reason,
)
from ...protocol.errors import ErrorCode
from ...protocol.messages.create_acls_request import CreateAclsRequest
from ...protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse

Code = TypeVar("Code", bound=IntEnum)

API_KEY = 30
VERSIONS = (0, 3)


def _enum(cls: type[Code], value: int) -> Code:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN


def failed_response(_ctx: RequestContext, request: CreateAclsRequest, error: int,
                    message: str | None = None) -> CreateAclsResponse:
    """Every creation answers `error` (Kafka's CreateAclsRequest.getErrorResponse)."""
    return CreateAclsResponse(results=[AclCreationResult(error_code=error, error_message=message)
                                       for _ in request.creations])


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    security = ctx.broker.security
    if security.authorizer is None:
        return failed_response(ctx, request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not security.authorize(ctx, Operation.ALTER, ResourceType.CLUSTER):
        return failed_response(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if security.authorizer.locked:  # the damaged file stays as it is for the operator (security/acl_store.py)
        return failed_response(ctx, request, ErrorCode.POLICY_VIOLATION,
                               f"ACLs cannot be changed while {security.authorizer.locked}")
    results, valid = [], []
    for c in request.creations:
        acl = AclBinding(_enum(ResourceType, c.resource_type), c.resource_name,
                         _enum(PatternType, c.resource_pattern_type), c.principal, c.host,
                         _enum(Operation, c.operation), _enum(Permission, c.permission_type))
        reason = invalid_binding_reason(acl)
        if reason is None:
            valid.append(acl)
            results.append(AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        else:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=reason))
    async with security.acl_changes:  # not between a DeleteAcls' filters (delete_acls.py)
        if len(security.authorizer.new_among(valid)) > MAX_CHANGES_PER_REQUEST:
            return failed_response(ctx, request, ErrorCode.POLICY_VIOLATION, TOO_MANY_CHANGES)
        await security.add_acls(valid)
    return CreateAclsResponse(results=results)
