"""ApiVersions (18): advertise exactly the APIs and versions the router serves, and Kafka's features.

Features (KIP-584) tell clients which cluster-wide behaviours are switched on; clients that gate on
them (kafka-python's version inference, the admin DescribeFeatures call, KIP-848 and KIP-890 client
paths) read them here. `FEATURES` is the one table of what this broker supports and has finalized;
add an entry when a feature's behaviour is implemented (group.version with KIP-848,
transaction.version with KIP-890).
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.api_versions_request import ApiVersionsRequest
from ...protocol.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = 18
VERSIONS = (0, 4)
_VALID_SOFTWARE = __import__("re").compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# feature name -> (lowest supported level, highest supported level, finalized level).
# metadata.version 7 is 3.3-IV3 (Kafka 4's minimum), 25 is 4.0-IV3.
FEATURES: dict[str, tuple[int, int, int]] = {
    "metadata.version": (7, 25, 25),
    "group.version": (0, 1, 1),  # 1: the consumer group protocol (KIP-848)
    # 0: a static quorum of one voter, this node (DescribeQuorum); 1 (KIP-853's voters that change) is not
    "kraft.version": (0, 0, 0),
}
# Kafka reports the metadata log offset at which the features were finalized; ours never change
# while the broker runs, so any fixed non-negative epoch says "known" to clients.
FINALIZED_FEATURES_EPOCH = 1


def supported_features(version: int) -> list[SupportedFeatureKey]:
    # KAFKA-17011: clients parsing v3 cannot take a minimum of 0, so Kafka leaves those features out there.
    return [SupportedFeatureKey(name, low, high)
            for name, (low, high, _) in sorted(FEATURES.items()) if low > 0 or version >= 4]


def finalized_features() -> list[FinalizedFeatureKey]:
    # Level 0 means "off" and Kafka does not list it as finalized.
    return [FinalizedFeatureKey(name, max_version_level=level, min_version_level=level)
            for name, (_, _, level) in sorted(FEATURES.items()) if level > 0]


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    keys = [ApiVersion(key, low, high) for key, low, high in ctx.broker.router.supported()]
    if ctx.api_version >= 3 and not (
        _VALID_SOFTWARE.match(request.client_software_name or "")
        and _VALID_SOFTWARE.match(request.client_software_version or "")
    ):
        # Kafka validates KIP-511's software name and version and answers INVALID_REQUEST, without the APIs.
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0,
        supported_features=supported_features(ctx.api_version),
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=finalized_features(),
    )
