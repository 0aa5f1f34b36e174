"""DescribeAcls (29) v1-v3: the ACLs matching a filter (Describe on the cluster), grouped by resource."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from ..network.router import RequestContext
from ..network.error_answers import refuse
from ..security.acl import AclFilter, Operation, PatternType, Permission, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_acls_request import DescribeAclsRequest
from ...protocol.messages.describe_acls_response import (
    AclDescription, DescribeAclsResource, DescribeAclsResponse,
)

Code = TypeVar("Code", bound=IntEnum)

API_KEY = 29
VERSIONS = (0, 3)


def to_filter(r: Any) -> AclFilter:
    """The filter of DescribeAcls, or of one DeleteAcls filter (their fields are named alike)."""
    def enum(cls: type[Code], value: int) -> Code:
        try:
            return cls(value)
        except ValueError:
            return cls(0)
    return AclFilter(enum(ResourceType, r.resource_type_filter), r.resource_name_filter,
                     enum(PatternType, r.pattern_type_filter), r.principal_filter, r.host_filter,
                     enum(Operation, r.operation), enum(Permission, r.permission_type))


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    security = ctx.broker.security
    if security.authorizer is None:
        return refuse(ctx, request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not security.authorize(ctx, Operation.DESCRIBE, ResourceType.CLUSTER):
        return refuse(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    flt = to_filter(request)
    reason = flt.invalid_reason()
    if reason:
        return refuse(ctx, request, ErrorCode.INVALID_REQUEST, reason)
    grouped: dict[tuple, list] = {}
    for acl in security.authorizer.matching(flt):
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                           permission_type=acl.permission))
    return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=[
        DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
        for (rt, name, pt), acls in grouped.items()])
