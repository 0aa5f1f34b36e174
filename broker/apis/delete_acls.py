"""DeleteAcls (31) v1-v3: remove the ACLs matching each filter (Alter on the cluster); persisted
before the answer, which lists what each filter removed.

As in Kafka's controller, one request removes at most 10,000 ACLs: a filter whose matches would take
it past that answers UNKNOWN_SERVER_ERROR ("Cannot remove more than 10000 acls in a single delete
operation.") and removes none of its own (Kafka's controller removes the matches it had counted
before it noticed; a client cannot rely on which those are), while the filters within the bound
are applied."""

from __future__ import annotations

from .describe_acls import to_filter
from ..router import RequestContext
from ..state_file import MAX_CHANGES_PER_REQUEST
from ..security.acl import AclBinding, Operation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
)
from ...protocol.messages.delete_acls_request import DeleteAclsRequest

API_KEY = 31
VERSIONS = (0, 3)


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
    results: list[DeleteAclsFilterResult] = []
    doomed: dict[AclBinding, None] = {}  # the ACLs to remove, once each, in the order the filters found them
    for f in request.filters:
        flt = to_filter(f)
        reason = flt.invalid_reason()
        if reason:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=reason,
                                                  matching_acls=[]))
            continue
        matched = security.authorizer.matching(flt)
        if len(doomed) + sum(1 for a in matched if a not in doomed) > MAX_CHANGES_PER_REQUEST:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, matching_acls=[],
                                                  error_message=f"Cannot remove more than {MAX_CHANGES_PER_REQUEST} "
                                                                "acls in a single delete operation."))
            continue
        doomed.update(dict.fromkeys(matched))
        results.append(DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            DeleteAclsMatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=a.resource_type,
                                  resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                                  host=a.host, operation=a.operation, permission_type=a.permission)
            for a in matched]))
    await security.remove_acls(list(doomed))
    return DeleteAclsResponse(filter_results=results)
