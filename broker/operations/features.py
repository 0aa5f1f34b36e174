"""The finalized feature levels (KIP-584) this broker answers with, and the ones UpdateFeatures changed.

A level starts as the Kafka release's (`--kafka-version`; api_versions.features caps it to what kbroker
has built). Kafka keeps a change as a FeatureLevelRecord in its metadata log, one epoch for the cluster;
`FinalizedFeatures` is the one owner of the concept here, and keeps the changes in a `LevelStorage`:
* a single node (or several in one process): `FileLevels`, `features.json` in the data directory (a
  StateFile: written durably before UpdateFeatures is answered, one checksummed entry per feature);
* a node of a cluster over PostgreSQL: the database's (broker/storage/postgres/features.py), changed in
  one transaction and followed by every node (`follow`, from its image pass), so every node answers
  with the cluster's levels and epoch.
Either is read at the start, so a downgraded `share.version` stays down across a restart. Only the
features whose levels kbroker can act on at run time may change (CHANGEABLE); the others follow its
code and release. A level is applied (and the listeners told) once its storage holds it durably.

The epoch (ApiVersions' FinalizedFeaturesEpoch) is Kafka's metadata offset of the last change; here it
counts the changes, kept by the storage with them, so it only grows (clients keep the newest they see).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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
# What a storage holds: feature -> the level an UpdateFeatures set (as stored: not yet checked against
# this release), and the epoch of the last change.
Stored = tuple[dict[str, int], int]
# Why an update cannot be made, judged on the levels (as levels() gives them) it would change; None: it can.
Refusal = Callable[[Levels], str | None]


class LevelStorage(Protocol):
    source: str  # where the changes are kept, for the log

    def load(self) -> Stored:
        """What the storage held when last read (at the start: what the broker starts with)."""

    async def current(self) -> Stored:
        """What the storage holds now (read again where others change it too)."""

    async def commit(self, updates: Mapping[str, int], check: Callable[[Stored], str | None]) -> Stored | str:
        """Under the storage's own order of changes: `check` what it holds; if it refuses, its reason
        (nothing written); else `updates` stored with the epoch moved by one, returning once durable
        with what it holds then."""


class FinalizedFeatures:
    def __init__(self, storage: LevelStorage, release_levels: Levels) -> None:
        """`release_levels`: api_versions.features(the release), which the storage's changes override."""
        self.storage = storage
        self.release_levels = dict(release_levels)
        self.listeners: list[Callable[[str, int], None]] = []  # called with (feature, level) on a change
        self.changed, self.epoch = self._accepted(storage.load())
        if self.changed:
            log.info("feature_levels_restored", levels=dict(self.changed), epoch=self.epoch, source=storage.source)

    def levels(self) -> dict[str, tuple[int, int, int]]:
        """feature -> (lowest supported, highest supported, finalized level; 0 when off)."""
        return self._levels(self.changed)

    def _levels(self, changed: Mapping[str, int]) -> dict[str, tuple[int, int, int]]:
        return {name: (low, high, changed.get(name, finalized))
                for name, (low, high, finalized) in self.release_levels.items()}

    def level(self, feature: str) -> int:
        """The finalized level of `feature`, 0 when it is off or unknown."""
        if feature in self.changed:
            return self.changed[feature]
        return self.release_levels.get(feature, (0, 0, 0))[2]

    async def change(self, updates: Mapping[str, int], refusal: Refusal | None = None) -> str | None:
        """Finalize `updates` (CHANGEABLE features) unless `refusal`, asked about the levels the storage
        holds as the change is ordered (a cluster's, not only this node's view of them), says why not:
        then its reason, nothing changed. Returns once durable and applied here."""
        def check(stored: Stored) -> str | None:
            return None if refusal is None else refusal(self._levels(self._accepted(stored, report=False)[0]))

        result = await self.storage.commit(updates, check)
        if isinstance(result, str):
            return result
        self.follow(result)
        return None

    async def check(self, refusal: Refusal) -> str | None:
        """What `refusal` says of the levels the storage holds now (a change validated only, or one that
        changes no level kbroker keeps): the cluster's, over PostgreSQL, as Kafka's controller judges it."""
        stored = await self.storage.current()
        self.follow(stored)
        return refusal(self._levels(self._accepted(stored, report=False)[0]))

    def follow(self, stored: Stored) -> None:
        """Adopt what the storage holds when it is newer than what is applied (another node's change, read
        by this node's image pass; or this node's own, committed): listeners hear of each level that
        differs from before."""
        if stored[1] <= self.epoch:
            return
        before = {name: self.level(name) for name in set(self.changed) | set(stored[0])}
        self.changed, self.epoch = self._accepted(stored)
        for name, old in sorted(before.items()):
            level = self.level(name)
            if level != old:
                log.info("feature_level_changed", feature=name, old=old, new=level, epoch=self.epoch)
                for listener in self.listeners:
                    listener(name, level)

    def _accepted(self, stored: Stored, *, report: bool = True) -> tuple[dict[str, int], int]:
        """The stored changes that hold for this release (a feature it lets change, at a level it
        supports), and the epoch; the rest are reported, never raised: they answer at the release's levels."""
        levels, epoch = stored
        changed: dict[str, int] = {}
        reasons = []
        for name, level in sorted(levels.items()):
            if name not in CHANGEABLE or name not in self.release_levels:
                reasons.append(f"{name}: not a feature this release lets change")
            elif level != 0 and not self.release_levels[name][0] <= level <= self.release_levels[name][1]:
                reasons.append(f"{name}: level {level} is not supported by this release")
            else:
                changed[name] = level
        if reasons and report:
            log.error("feature_levels_ignored", source=self.storage.source, ignored=reasons[:20],
                      detail="those features answer at the release's levels until UpdateFeatures sets them again")
        return changed, max(FIRST_EPOCH, epoch)


class FileLevels:
    """The changes in `features.json` (a node on its local log): one checksummed entry per feature, and
    the epoch's; damage costs the entries it touches (reported, never raised)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.source = str(self.path)
        self._stored: Stored = ({}, FIRST_EPOCH)
        self._file = StateFile(self.path, self._capture)
        self._read()

    def load(self) -> Stored:
        return self._stored

    async def current(self) -> Stored:
        return self._stored

    async def commit(self, updates: Mapping[str, int], check: Callable[[Stored], str | None]) -> Stored | str:
        reason = check(self._stored)
        if reason is not None:
            return reason
        levels, epoch = self._stored
        self._stored = ({**levels, **updates}, epoch + 1)
        stored = self._stored
        await self._file.save()
        return stored

    def _capture(self) -> Callable[[], bytes]:
        levels, epoch = self._stored
        rows = [{"feature": name, "level": level} for name, level in sorted(levels.items())]
        rows.append({"feature": _EPOCH_ROW, "level": epoch})
        return partial(render_rows, "features", rows)

    def _read(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.error("features_file_damaged", file=str(self.path), damage=[f"unreadable: {exc!r}"])
            return
        read = read_rows(raw, "features", list)
        reasons = read.reasons()
        levels: dict[str, int] = {}
        epoch = FIRST_EPOCH
        for row in read.rows:
            name, level = row.get("feature"), row.get("level")
            if not isinstance(name, str) or not isinstance(level, int):
                reasons.append(f"entry {row!r}: not a feature and a level")
            elif name == _EPOCH_ROW:
                epoch = max(epoch, level)
            else:
                levels[name] = level
        if reasons:
            log.error("features_file_damaged", file=str(self.path), damage=reasons[:20],
                      detail="those entries are ignored: their features answer at the release's levels until "
                             "UpdateFeatures sets them again")
        self._stored = (levels, epoch)


def for_broker(broker: BrokerServices, storage: LevelStorage | None = None) -> FinalizedFeatures:
    """The broker's levels: its release's (api_versions.features), as `storage` changed them (None: its
    data directory's file; a node of a cluster over PostgreSQL: the database's, the cluster's).
    share.version below 1 turns share groups off: their sessions and share-partitions go, as Kafka's
    SharePartitionManager.onShareVersionToggle drops them (they reload from the share coordinator's
    state when share groups are on again)."""
    from ..apis.api_versions import features

    if storage is None:
        storage = FileLevels(broker.data_dir)
    elif (broker.data_dir / FILE_NAME).exists():
        log.warning("features_file_ignored", file=str(broker.data_dir / FILE_NAME), source=storage.source,
                    detail="the finalized features are the cluster's, kept in " + storage.source)
    store = FinalizedFeatures(storage, features(broker.kafka_release))

    def changed(feature: str, level: int) -> None:
        manager = broker.share_partitions_if_built
        if feature == "share.version" and level < 1 and manager is not None:
            manager.share_groups_off()

    store.listeners.append(changed)
    return store
