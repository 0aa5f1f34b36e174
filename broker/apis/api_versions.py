"""ApiVersions (18): advertise exactly the APIs and versions the router serves."""

from __future__ import annotations

from kbroker.broker.router import RequestContext
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse

API_KEY = 18
VERSIONS = (0, 4)
_VALID_SOFTWARE = __import__("re").compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    keys = [ApiVersion(key, low, high) for key, low, high in ctx.broker.router.supported()]
    if ctx.api_version >= 3 and not (
        _VALID_SOFTWARE.match(request.client_software_name or "")
        and _VALID_SOFTWARE.match(request.client_software_version or "")
    ):
        # Kafka validates KIP-511's software name and version and answers INVALID_REQUEST.
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=keys)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0)
