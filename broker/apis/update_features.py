"""UpdateFeatures (57) v0-v2: `kafka-features.sh upgrade/downgrade/disable` and Admin.updateFeatures.

Checked as Kafka 4.4's FeatureControlManager checks it, in its order and words: an unknown upgrade type, a
negative level, a feature or level the node does not support, a downgrade asked for as an upgrade or an
upgrade as a downgrade, any metadata.version downgrade. A feature kbroker acts on at run time
(operations/features.CHANGEABLE: `share.version`) then takes the level, safe or unsafe downgrade alike,
kept durably before the answer (unless validate-only), checked on the levels as the storage orders
the change (over PostgreSQL the cluster's, read under its lock: a node whose view is a notification
behind judges as Kafka's one controller would). Another feature's levels follow kbroker's code and
release: a change Kafka would make (group.version 1 -> 0) is refused, saying so; asking for the level it
has is Kafka's no-op. As in Kafka, one refused update fails the whole request with
INVALID_UPDATE_VERSION at the top level (every version); v0-v1 list each feature on success; v0 has no
upgrade type (allowDowngrade true is a safe downgrade).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..network.router import RequestContext
from ..operations.features import CHANGEABLE
from ...protocol.errors import ErrorCode
from ...protocol.messages.update_features_request import UpdateFeaturesRequest
from ...protocol.messages.update_features_response import UpdatableFeatureResult, UpdateFeaturesResponse

API_KEY = 57
VERSIONS = (0, 2)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
_FAILED = "The update failed for all features since the following feature had an error: "


def failed_response(_ctx: RequestContext, _request: UpdateFeaturesRequest, error: int) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=error, error_message=None, results=[])


def refusal(node_id: int, levels: Mapping[str, tuple[int, int, int]], feature: str, level: int,
            upgrade_type: int) -> str | None:
    """Why this update cannot be made (Kafka's FeatureControlManager wording where Kafka refuses it too);
    None when it can: a CHANGEABLE feature's supported level, or another's level as it is."""
    invalid = f"Invalid update version {level} for feature {feature}. "
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return invalid + "The controller does not support the given upgrade type."
    if level < 0:
        return invalid + "A feature version cannot be less than 0."
    if feature not in levels:
        return invalid + f"Local controller {node_id} does not support this feature."
    low, high, finalized = levels[feature]
    if level != 0 and not low <= level <= high:
        return invalid + f"Local controller {node_id} only supports versions {low}-{high}"
    if level < finalized and upgrade_type == UPGRADE:
        return invalid + ("Can't downgrade the version of this feature without setting the upgrade type to "
                          "either safe or unsafe downgrade.")
    if level > finalized and upgrade_type != UPGRADE:
        return invalid + "Can't downgrade to a newer version."
    if feature == "metadata.version" and level < finalized:
        return f"Unsupported metadata.version downgrade from {finalized} to {level}. " + (
            "Refusing to perform the requested downgrade because it might delete metadata information."
            if upgrade_type == SAFE_DOWNGRADE else "Unsafe metadata downgrade is not supported in this version.")
    if level != finalized and feature not in CHANGEABLE:
        return invalid + f"kbroker's {feature} is {finalized} and follows its version: it cannot be changed at run time."
    return None


async def handle(ctx: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    store = ctx.broker.features
    updates = []
    for update in request.feature_updates:
        if ctx.api_version >= 1:
            upgrade_type = update.upgrade_type
        else:  # v0 has no upgrade type: UpdateFeaturesRequest makes allowDowngrade a safe downgrade
            upgrade_type = SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
        updates.append((update.feature, update.max_version_level, upgrade_type))

    def refused(levels: Mapping[str, tuple[int, int, int]]) -> str | None:
        for feature, level, upgrade_type in updates:
            reason = refusal(ctx.broker.node_id, levels, feature, level, upgrade_type)
            if reason is not None:
                return reason
        return None

    changes = {feature: level for feature, level, _ in updates if feature in CHANGEABLE}
    if changes and not (ctx.api_version >= 1 and request.validate_only):
        # checked on the levels as the storage orders the change (over PostgreSQL: the cluster's)
        reason = await store.change(changes, refused)
    else:  # validated only, or no level kbroker keeps: judged on the levels the storage holds now
        reason = await store.check(refused)
    if reason is not None:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_UPDATE_VERSION,
                                      error_message=_FAILED + reason, results=[])
    results = [] if ctx.api_version >= 2 else [
        UpdatableFeatureResult(u.feature, ErrorCode.NONE, "NONE") for u in request.feature_updates]
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
