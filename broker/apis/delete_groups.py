"""DeleteGroups (42) v0-v3 onto `GroupCoordinatorService.delete_groups`: a result per group
(GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID, or NONE once the tombstones are durable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import group_wire
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_groups_request import DeleteGroupsRequest
from ...protocol.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 42
VERSIONS = (0, 3)


def failed_response(_ctx: RequestContext, request: DeleteGroupsRequest, error: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeletableGroupResult(group_id=g, error_code=error) for g in dict.fromkeys(request.groups_names)])


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.groups_names))  # Kafka answers a repeated name once

    async def call(coordinator: GroupCoordinatorService) -> DeleteGroupsResponse:
        transactions = ctx.broker.transactions_if_built  # offsets open transactions hold: tombstoned too
        pending = {} if transactions is None else {g: transactions.pending_partitions(g) for g in names}
        results = await coordinator.delete_groups(names, pending)
        return DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeletableGroupResult(group_id=r.group_id, error_code=r.error) for r in results
        ])

    return await group_wire.answer(ctx, call, lambda e: failed_response(ctx, request, e))
