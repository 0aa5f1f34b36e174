"""ApiVersions (18): advertise the APIs and versions the router serves, within the Kafka release kbroker
answers as (protocol/kafka_releases.py: 4.4.0's table, or `--kafka-version`'s), and that release's features.

Features (KIP-584) tell clients which cluster-wide behaviours are switched on; clients that gate on
them (kafka-python's version inference, the admin DescribeFeatures call, KIP-848 and KIP-890 client
paths) read them here. A release's features are claimed only as far as kbroker has built them
(`IMPLEMENTED_FEATURES`).
"""

from __future__ import annotations

import re

from ..network.router import RequestContext
from ...coordinator.share.share_partition import SHARE_VERSION_BUILT
from ...coordinator.txn.metadata import TRANSACTION_VERSION_BUILT
from ...protocol.errors import ErrorCode
from ...protocol.kafka_releases import KafkaRelease
from ...protocol.messages.api_versions_request import ApiVersionsRequest
from ...protocol.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = 18
VERSIONS = (0, 5)
_VALID_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# feature name -> the highest level whose behaviour kbroker implements. A release's feature is advertised
# only when it is here, its levels capped to this one; add an entry when a feature is built.
# metadata.version
# describes the controller's metadata log, which a single kbroker
# node does not keep: the release's levels are claimed as they are.
IMPLEMENTED_FEATURES: dict[str, int] = {
    "metadata.version": 33,  # 4.4-IV0, the newest level of the newest release
    # 0: a static quorum of one voter, this node (DescribeQuorum); 1 (KIP-853's voters that change) is not
    "kraft.version": 0,
    "eligible.leader.replicas.version": 1,  # KIP-966: a single replica's set of eligible leaders is empty
    "group.version": 1,  # 1: the consumer group protocol (KIP-848)
    # 1: share groups (KIP-932); 2: their dead letter queues (KIP-1191), which a fresh Kafka 4.4 finalizes
    "share.version": SHARE_VERSION_BUILT,
    "streams.version": 1,  # 1: the streams group protocol (KIP-1071)
    # 2: transactions v2 (KIP-890 part 2: an epoch bump per transaction, partitions added by Produce)
    "transaction.version": TRANSACTION_VERSION_BUILT,
}
# Kafka reports the metadata log offset at which the features were finalized; kbroker counts the changes
# UpdateFeatures made (operations/features.py: FinalizedFeatures.epoch, from 1).


def features(release: KafkaRelease) -> dict[str, tuple[int, int, int]]:
    """feature -> (lowest supported level, highest supported level, finalized level, 0 when off): the
    release's, as far as kbroker has built them. UpdateFeatures checks its requests against it."""
    out = {}
    for name, (low, high) in sorted(release.supported_features.items()):
        top = IMPLEMENTED_FEATURES.get(name, -1)
        if top >= low:
            out[name] = (low, min(high, top), min(release.finalized_features.get(name, 0), top))
    return out


def supported_features(release: KafkaRelease, version: int) -> list[SupportedFeatureKey]:
    # KAFKA-17011/17492: clients parsing v3 cannot take a minimum of 0, so Kafka leaves such a feature
    # out below v4
    return [SupportedFeatureKey(name, low, high) for name, (low, high, _) in features(release).items()
            if not (low == 0 and version < 4)]


def finalized_features(levels: dict[str, tuple[int, int, int]]) -> list[FinalizedFeatureKey]:
    """`levels`: features(release) or the broker's FinalizedFeatures.levels(). Level 0 means "off" and
    Kafka does not list it as finalized."""
    return [FinalizedFeatureKey(name, max_version_level=level, min_version_level=level)
            for name, (_, _, level) in levels.items() if level > 0]


def error_answer(error: ErrorCode) -> ApiVersionsResponse:
    """ApiVersionsRequest.getErrorResponse: the error alone, no APIs (UNSUPPORTED_VERSION, which names
    ApiVersions' own versions, is error_answers.unsupported_api_versions)."""
    return ApiVersionsResponse(error_code=error, api_keys=[], throttle_time_ms=0)


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    broker = ctx.broker
    if ctx.api_version >= 3 and not (
        _VALID_SOFTWARE.match(request.client_software_name or "")
        and _VALID_SOFTWARE.match(request.client_software_version or "")
    ):
        # Kafka validates KIP-511's software name and version and answers INVALID_REQUEST.
        return error_answer(ErrorCode.INVALID_REQUEST)
    if ctx.api_version >= 5 and request.cluster_id is not None and (
            request.cluster_id != broker.cluster_id or request.node_id != broker.node_id):
        # KIP-1242: a client that names the cluster and node it means to reach, and reached another,
        # is told to bootstrap again.
        return error_answer(ErrorCode.REBOOTSTRAP_REQUIRED)
    levels = broker.features  # the release's, as UpdateFeatures changed them (operations/features.py)
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[ApiVersion(key, low, high) for key, low, high in broker.router.supported()],
        throttle_time_ms=0,
        supported_features=supported_features(broker.kafka_release, ctx.api_version),
        finalized_features_epoch=levels.epoch,
        finalized_features=finalized_features(levels.levels()),
    )
