"""The finalized feature levels (KIP-584) this broker answers with, and the ones UpdateFeatures changed.

A level starts as the Kafka release's (`--kafka-version`; api_versions.features caps it to what kbroker
has built). Kafka keeps a change as a FeatureLevelRecord in its metadata log; kbroker keeps it in
`features.json` in the data directory (a StateFile: written durably before UpdateFeatures is answered, one
checksummed entry per feature), read at the start, so a downgraded `share.version` stays down across a
restart. Only the features whose levels kbroker can act on at run time may change (CHANGEABLE); the
others follow its code and release.

The epoch (ApiVersions' FinalizedFeaturesEpoch) is Kafka's metadata offset of the last change; here it
counts the changes, kept in the file with them, so it only grows (clients keep the newest they see).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from ..storage.state_file import StateFile, read_rows, render_rows

if TYPE_CHECKING:
    from ..services import BrokerServices

log = structlog.get_logger("kbroker.features")

FILE_NAME = "features.json"
# Features whose level kbroker follows while it runs: share.version 0 turns share groups off (every share
# API answers UNSUPPORTED_VERSION), 1 on without dead letter queues, 2 with them.
CHANGEABLE = frozenset({"share.version"})
FIRST_EPOCH = 1  # the epoch before any change: ours are known from the start
_EPOCH_ROW = "__epoch__"

Levels = Mapping[str, tuple[int, int, int]]  # feature -> (lowest supported, highest supported, finalized)


class FinalizedFeatures:
    def __init__(self, data_dir: Path, release_levels: Levels) -> None:
        """`release_levels`: api_versions.features(the release), which the file's changes override."""
        self.path = Path(data_dir) / FILE_NAME
        self.release_levels = dict(release_levels)
        self.changed: dict[str, int] = {}  # feature -> the level an UpdateFeatures set
        self.epoch = FIRST_EPOCH
        self._file = StateFile(self.path, self._capture)
        self.listeners: list[Callable[[str, int], None]] = []  # called with (feature, level) on a change
        self._load()

    def levels(self) -> dict[str, tuple[int, int, int]]:
        """feature -> (lowest supported, highest supported, finalized level; 0 when off)."""
        return {name: (low, high, self.changed.get(name, finalized))
                for name, (low, high, finalized) in self.release_levels.items()}

    def level(self, feature: str) -> int:
        """The finalized level of `feature`, 0 when it is off or unknown."""
        if feature in self.changed:
            return self.changed[feature]
        return self.release_levels.get(feature, (0, 0, 0))[2]

    async def change(self, updates: Mapping[str, int]) -> None:
        """Finalize `updates` (already checked: CHANGEABLE features, supported levels); returns once
        durable. Listeners hear of each level that differs from before, once it is applied in memory."""
        before = {name: self.level(name) for name in updates}
        for name, level in updates.items():
            self.changed[name] = level
        self.epoch += 1
        for name, level in updates.items():
            if level != before[name]:
                log.info("feature_level_changed", feature=name, old=before[name], new=level, epoch=self.epoch)
                for listener in self.listeners:
                    listener(name, level)
        await self._file.save()

    def _capture(self) -> Callable[[], bytes]:
        rows = [{"feature": name, "level": level} for name, level in sorted(self.changed.items())]
        rows.append({"feature": _EPOCH_ROW, "level": self.epoch})
        return partial(render_rows, "features", rows)

    def _load(self) -> None:
        """The file's changes that still hold for this release (a feature it supports, at a level it
        supports); damage and the rest are reported, never raised: the broker starts on the release's."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.error("features_file_damaged", file=str(self.path), damage=[f"unreadable: {exc!r}"])
            return
        read = read_rows(raw, "features", list)
        reasons = read.reasons()
        for row in read.rows:
            name, level = row.get("feature"), row.get("level")
            if not isinstance(name, str) or not isinstance(level, int):
                reasons.append(f"entry {row!r}: not a feature and a level")
            elif name == _EPOCH_ROW:
                self.epoch = max(self.epoch, level)
            elif name not in CHANGEABLE or name not in self.release_levels:
                reasons.append(f"{name}: not a feature this release lets change")
            elif level != 0 and not self.release_levels[name][0] <= level <= self.release_levels[name][1]:
                reasons.append(f"{name}: level {level} is not supported by this release")
            else:
                self.changed[name] = level
        if reasons:
            log.error("features_file_damaged", file=str(self.path), damage=reasons[:20],
                      detail="those entries are ignored: their features answer at the release's levels until "
                             "UpdateFeatures sets them again")
        if self.changed:
            log.info("feature_levels_restored", levels=dict(self.changed), epoch=self.epoch)


def for_broker(broker: BrokerServices) -> FinalizedFeatures:
    """The broker's levels: its release's (api_versions.features), as its data directory's file changed
    them. share.version below 1 turns share groups off: their sessions and share-partitions go, as Kafka's
    SharePartitionManager.onShareVersionToggle drops them (they reload from the share coordinator's state
    when share groups are on again)."""
    from ..apis.api_versions import features

    store = FinalizedFeatures(broker.data_dir, features(broker.kafka_release))

    def changed(feature: str, level: int) -> None:
        manager = broker.share_partitions_if_built
        if feature == "share.version" and level < 1 and manager is not None:
            manager.share_groups_off()

    store.listeners.append(changed)
    return store
