"""DescribeClientQuotas (48) v0-v1: the stored quotas whose entities match the filter
(broker/operations/quotas.py). A filter naming one type twice, or a bad match, is answered as Kafka
does: INVALID_REQUEST with a message and no entries; an unknown entity type is UNSUPPORTED_VERSION
(Kafka's ClientQuotasImage throws UnsupportedVersionException for it)."""

from __future__ import annotations

from ..operations import quotas as q
from ..network.router import RequestContext
from ..network.error_answers import refuse
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from ...protocol.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)

API_KEY = 48
VERSIONS = (0, 1)
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def failed_response(_ctx: RequestContext, _request: DescribeClientQuotasRequest,
                    error: ErrorCode) -> DescribeClientQuotasResponse:
    """As Kafka's: no entries (null), not an empty list."""
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error, error_message=None, entries=None)


class UnknownEntityType(q.QuotaError):
    pass


def _filter(request: DescribeClientQuotasRequest) -> list[tuple[str, int, str | None]]:
    seen = set()
    out = []
    for c in request.components:
        if c.entity_type not in (q.USER, q.CLIENT_ID, q.IP):
            raise UnknownEntityType(f"Unsupported entity type {c.entity_type}")
        if c.entity_type in seen:
            raise q.QuotaError(f"Duplicate {c.entity_type} filter component entity type")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise q.QuotaError(f"Unknown match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise q.QuotaError("Exact match requires a name")
        seen.add(c.entity_type)
        out.append((c.entity_type, c.match_type, c.match))
    if q.IP in seen and len(seen) > 1:
        raise q.QuotaError("Invalid entity filter component combination, IP filter component should not be "
                           "used with user or clientId filter component.")
    return out


async def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    try:
        components = _filter(request)
    except q.QuotaError as e:
        code = ErrorCode.UNSUPPORTED_VERSION if isinstance(e, UnknownEntityType) else ErrorCode.INVALID_REQUEST
        return refuse(ctx, request, code, str(e))
    entries = [
        EntryData(entity=[EntityData(t, n) for t, n in entity],
                  values=[ValueData(k, v) for k, v in sorted(values.items())])
        for entity, values in ctx.broker.quotas.matching(components, request.strict).items()
    ]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
                                        entries=entries)
