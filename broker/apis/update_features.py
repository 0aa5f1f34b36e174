"""UpdateFeatures (57) v0-v2: `kafka-features.sh upgrade/downgrade/disable` and Admin.updateFeatures.

kbroker's feature levels are fixed by its code and the Kafka release it answers as
(api_versions.features). A request that asks for the levels features already have succeeds (Kafka's
no-op); what Kafka 4.4's controller refuses is
refused with its words (a level the node does not support, an unknown feature, a downgrade asked for
as an upgrade, any metadata.version downgrade). A change Kafka would make (group.version 1 -> 0 as a
safe downgrade) is refused too, saying that kbroker's levels follow its version: there is no
controller here to write it. As in Kafka, one refused update fails the whole request with
INVALID_UPDATE_VERSION at the top level (every version); v0-v1 list each feature on success.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.update_features_request import UpdateFeaturesRequest
from ...protocol.messages.update_features_response import UpdatableFeatureResult, UpdateFeaturesResponse
from .api_versions import features

API_KEY = 57
VERSIONS = (0, 2)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
_FAILED = "The update failed for all features since the following feature had an error: "


def failed_response(_ctx: RequestContext, _request: UpdateFeaturesRequest, error: int) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=error, error_message=None, results=[])


def refusal(node_id: int, levels: dict[str, tuple[int, int, int]], feature: str, level: int,
            upgrade_type: int) -> str | None:
    """Why this update cannot be made (Kafka's FeatureControlManager wording where Kafka refuses it too);
    None when it asks for what is already there."""
    invalid = f"Invalid update version {level} for feature {feature}. "
    if feature not in levels:
        return invalid + f"Local controller {node_id} does not support this feature."
    low, high, finalized = levels[feature]
    if level < finalized and upgrade_type == UPGRADE:
        return invalid + ("Can't downgrade the version of this feature without setting the upgrade type to "
                          "either safe or unsafe downgrade.")
    if level != 0 and not low <= level <= high:
        return invalid + f"Local controller {node_id} only supports versions {low}-{high}"
    if feature == "metadata.version" and level < finalized:
        return f"Unsupported metadata.version downgrade from {finalized} to {level}. " + (
            "Refusing to perform the requested downgrade because it might delete metadata information."
            if upgrade_type == SAFE_DOWNGRADE else "Unsafe metadata downgrade is not supported in this version.")
    if level != finalized:
        return invalid + f"kbroker's {feature} is {finalized} and follows its version: it cannot be changed at run time."
    return None


def handle(ctx: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    levels = features(ctx.broker.kafka_release)
    for update in request.feature_updates:
        # v0 has no upgrade type: Kafka 4.4 takes every v0 update as an upgrade
        upgrade_type = update.upgrade_type if ctx.api_version >= 1 else UPGRADE
        reason = refusal(ctx.broker.node_id, levels, update.feature, update.max_version_level, upgrade_type)
        if reason is not None:
            return UpdateFeaturesResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_UPDATE_VERSION,
                                          error_message=_FAILED + reason, results=[])
    results = [] if ctx.api_version >= 2 else [
        UpdatableFeatureResult(u.feature, ErrorCode.NONE, "NONE") for u in request.feature_updates]
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
