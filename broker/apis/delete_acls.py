"""DeleteAcls (31) v1-v3: remove the ACLs matching each filter (Alter on the cluster); persisted
before the answer, which lists what each filter removed.

As in Kafka's controller, one request removes at most 10,000 ACLs: a filter whose matches would take
it past that answers UNKNOWN_SERVER_ERROR ("Cannot remove more than 10000 acls in a single delete
operation.") and removes none of its own (Kafka's controller removes the matches it had counted
before it noticed; a client cannot rely on which those are), while the filters within the bound
are applied.

While the ACL file is damaged (broker/security/acl_store.py) changes answer POLICY_VIOLATION, so the
file stays as the operator must see it."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from .describe_acls import to_filter
from .repeats import in_request_order
from ..network.router import RequestContext
from .limits import MAX_CHANGES_PER_REQUEST
from ..security.acl import AclBinding, AclFilter, Operation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
)
from ...protocol.messages.delete_acls_request import DeleteAclsRequest

if TYPE_CHECKING:
    from ..security.service import Security

API_KEY = 31
VERSIONS = (0, 3)
# The loop is given back between filters once a slice of matching has run this long.
_SLICE_S = 0.005


def failed_response(_ctx: RequestContext, request: DeleteAclsRequest, error: int,
                    message: str | None = None) -> DeleteAclsResponse:
    """Every filter answers `error` (Kafka's DeleteAclsRequest.getErrorResponse)."""
    return DeleteAclsResponse(filter_results=[
        DeleteAclsFilterResult(error_code=error, error_message=message, matching_acls=[]) for _ in request.filters])


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    security = ctx.broker.security
    if security.authorizer is None:
        return failed_response(ctx, request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not security.authorize(ctx, Operation.ALTER, ResourceType.CLUSTER):
        return failed_response(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if security.authorizer.locked:  # the damaged file stays as it is for the operator (security/acl_store.py)
        return failed_response(ctx, request, ErrorCode.POLICY_VIOLATION,
                               f"ACLs cannot be changed while {security.authorizer.locked}")
    # The filters are matched in slices that give the loop back (below); meanwhile no other request
    # changes the ACLs, so every filter sees the same ones, as in Kafka's controller.
    async with security.acl_changes:
        return await _delete(security, request)


async def _delete(security: Security, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = security.authorizer
    assert authorizer is not None
    filters = [to_filter(f) for f in request.filters]
    answers: dict[AclFilter, DeleteAclsFilterResult] = {}  # a filter given twice is answered alike
    doomed: dict[AclBinding, None] = {}  # the ACLs to remove, once each, in the order the filters found them
    slice_started = time.monotonic()
    for flt in filters:
        if flt in answers:
            continue
        reason = flt.invalid_reason()
        if reason:
            answers[flt] = DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=reason,
                                                  matching_acls=[])
            continue
        # A filter without a resource name is matched against every ACL: thousands of them against
        # 10,000 ACLs would hold the loop for minutes.
        if time.monotonic() - slice_started > _SLICE_S:
            await asyncio.sleep(0)
            slice_started = time.monotonic()
        matched = authorizer.matching(flt)
        if len(doomed) + sum(1 for a in matched if a not in doomed) > MAX_CHANGES_PER_REQUEST:
            answers[flt] = DeleteAclsFilterResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, matching_acls=[],
                                                  error_message=f"Cannot remove more than {MAX_CHANGES_PER_REQUEST} "
                                                                "acls in a single delete operation.")
            continue
        doomed.update(dict.fromkeys(matched))
        answers[flt] = DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            DeleteAclsMatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=a.resource_type,
                                  resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                                  host=a.host, operation=a.operation, permission_type=a.permission)
            for a in matched])
    results = in_request_order(filters, answers)
    await security.remove_acls(list(doomed))
    return DeleteAclsResponse(filter_results=results)
