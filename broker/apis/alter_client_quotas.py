"""AlterClientQuotas (49) v0-v1: set or remove quota values per entity (broker/operations/quotas.py).

Each entry is validated on its own (entity shape, key, value) and answered with its own error, as
Kafka's controller does; the valid ones are applied and persisted together unless ValidateOnly. As in
Kafka's controller, a request changing more than 10,000 quota values (one record each there)
changes none: every entry answers POLICY_VIOLATION (broker/storage/state_file.py), ValidateOnly or not.
"""

from __future__ import annotations

from ..operations import quotas as q
from ..network.router import RequestContext
from .limits import MAX_CHANGES_PER_REQUEST, TOO_MANY_CHANGES
from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_client_quotas_request import AlterClientQuotasRequest
from ...protocol.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
)

API_KEY = 49
VERSIONS = (0, 1)


def failed_response(_ctx: RequestContext, request: AlterClientQuotasRequest, error: int,
                    message: str | None = None) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(entries=[
        EntryData(error, message, [EntityData(e.entity_type, e.entity_name) for e in entry.entity])
        for entry in request.entries])


async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    changes = []
    answers = []
    for entry in request.entries:
        echo = [EntityData(e.entity_type, e.entity_name) for e in entry.entity]
        try:
            entity = q.make_entity((e.entity_type, e.entity_name) for e in entry.entity)
            ops = []
            for op in entry.ops:
                if op.remove:
                    if op.key not in q.KEYS:
                        raise q.QuotaError(f"Invalid configuration key {op.key}")
                else:
                    q.check_value(entity, op.key, op.value)
                ops.append((op.key, op.value, op.remove))
        except q.QuotaError as e:
            answers.append(EntryData(ErrorCode.INVALID_REQUEST, str(e), echo))
            continue
        changes.append((entity, ops))
        answers.append(EntryData(ErrorCode.NONE, None, echo))
    if sum(len(ops) for _, ops in changes) > MAX_CHANGES_PER_REQUEST:
        return failed_response(ctx, request, ErrorCode.POLICY_VIOLATION, TOO_MANY_CHANGES)
    if changes and not request.validate_only:
        await ctx.broker.quotas.alter(changes)
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=answers)
