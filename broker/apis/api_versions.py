"""ApiVersions (18): advertise exactly the APIs and versions the router serves."""

from __future__ import annotations

from kbroker.broker.router import RequestContext
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = 18
VERSIONS = (0, 4)
# Feature levels as a Kafka 4 broker reports them (v3+, tagged fields): group.version 1 is the
# consumer group protocol (KIP-848), finalized since the cluster's first epoch.
SUPPORTED_FEATURES = (("group.version", 0, 1),)
FINALIZED_FEATURES = (("group.version", 1, 1),)
FINALIZED_FEATURES_EPOCH = 1
_VALID_SOFTWARE = __import__("re").compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    keys = [ApiVersion(key, low, high) for key, low, high in ctx.broker.router.supported()]
    if ctx.api_version >= 3 and not (
        _VALID_SOFTWARE.match(request.client_software_name or "")
        and _VALID_SOFTWARE.match(request.client_software_version or "")
    ):
        # Kafka validates KIP-511's software name and version and answers INVALID_REQUEST.
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=keys)
    if ctx.api_version < 3:
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0)
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0,
        supported_features=[SupportedFeatureKey(n, lo, hi) for n, lo, hi in SUPPORTED_FEATURES],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[FinalizedFeatureKey(n, hi, lo) for n, lo, hi in FINALIZED_FEATURES],
    )
