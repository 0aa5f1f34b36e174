"""The finalized feature levels UpdateFeatures changes (broker/operations/features.py): kept in
features.json across a restart with the epoch, and a file that is damaged, or names a level this
release does not support, never stops the broker: those entries are reported and the release's levels
hold."""

from __future__ import annotations

from pathlib import Path

from kbroker.broker.operations.features import FILE_NAME, FileLevels, FinalizedFeatures

RELEASE = {"group.version": (0, 1, 1), "share.version": (0, 2, 2), "metadata.version": (7, 33, 33)}


async def test_a_change_holds_across_a_restart_with_its_epoch(tmp_path: Path) -> None:
    heard: list[tuple[str, int]] = []
    store = FinalizedFeatures(FileLevels(tmp_path), RELEASE)
    store.listeners.append(lambda name, level: heard.append((name, level)))
    assert (store.level("share.version"), store.epoch) == (2, 1)
    await store.change({"share.version": 1})
    await store.change({"share.version": 0})
    await store.change({"share.version": 0})  # no change of level: heard once, the epoch moves all the same
    assert heard == [("share.version", 1), ("share.version", 0)]
    again = FinalizedFeatures(FileLevels(tmp_path), RELEASE)
    assert (again.level("share.version"), again.epoch) == (0, 4)
    assert again.levels() == {**RELEASE, "share.version": (0, 2, 0)}
    assert again.level("no.such.version") == 0


async def test_damage_and_levels_the_release_does_not_support_are_ignored(tmp_path: Path) -> None:
    store = FinalizedFeatures(FileLevels(tmp_path), RELEASE)
    await store.change({"share.version": 1})
    path = tmp_path / FILE_NAME
    text = path.read_text()
    assert '"level":1' in text.replace(" ", "")
    path.write_text(text.replace('"level": 1', '"level": 0').replace('"level":1', '"level":0'))  # its checksum fails
    damaged = FinalizedFeatures(FileLevels(tmp_path), RELEASE)
    assert damaged.level("share.version") == 2  # the release's: the damaged entry is not trusted
    await FinalizedFeatures(FileLevels(tmp_path), RELEASE).change({"share.version": 2})
    # a release that supports share.version 0-1 (finalizing 1) does not take the kept 2: its own level holds
    assert FinalizedFeatures(FileLevels(tmp_path), {**RELEASE, "share.version": (0, 1, 1)}).level("share.version") == 1
    path.write_text("not json at all")
    assert FinalizedFeatures(FileLevels(tmp_path), RELEASE).level("share.version") == 2


async def test_a_change_is_checked_on_what_the_storage_holds_and_followed_by_epoch(tmp_path: Path) -> None:
    """Two owners over one storage, as two nodes over the cluster's database: the second, a change behind,
    judges an update on the storage's levels (as they are ordered), not on its own view, and adopts
    only a newer epoch, its listeners hearing each level that moved."""
    from kbroker.broker.apis.update_features import UPGRADE, refusal

    storage = FileLevels(tmp_path)
    first, second = FinalizedFeatures(storage, RELEASE), FinalizedFeatures(storage, RELEASE)
    heard: list[tuple[str, int]] = []
    second.listeners.append(lambda name, level: heard.append((name, level)))
    assert await first.change({"share.version": 1}) is None
    assert (second.level("share.version"), second.epoch) == (2, 1)  # not followed yet

    def upgrade_to_1(levels):
        return refusal(1, levels, "share.version", 1, UPGRADE)

    assert upgrade_to_1(second.levels()) is not None  # on its own view, 1 is a downgrade
    assert await second.change({"share.version": 1}, upgrade_to_1) is None  # on the storage's, the level it has
    assert (second.level("share.version"), second.epoch, heard) == (1, 3, [("share.version", 1)])
    refused = await second.change({"share.version": 0}, lambda levels: refusal(1, levels, "share.version", 0, UPGRADE))
    assert refused is not None and "Can't downgrade" in refused and storage.load()[1] == 3  # nothing stored
    first.follow(storage.load())
    first.follow(({"share.version": 2}, 2))  # an older epoch (a read from before): ignored
    assert (first.level("share.version"), first.epoch) == (1, 3)
    first.follow(({"share.version": 7, "group.version": 0}, 4))  # levels this release cannot take: ignored
    assert (first.levels(), first.epoch) == ({**RELEASE, "share.version": (0, 2, 2)}, 4)
    # a request validated only (or changing no level kept) is judged on the storage's levels too
    storage = FileLevels(tmp_path / "again")
    first, second = FinalizedFeatures(storage, RELEASE), FinalizedFeatures(storage, RELEASE)
    assert await first.change({"share.version": 1}) is None
    assert (second.level("share.version"), upgrade_to_1(second.levels()) is not None) == (2, True)
    assert await second.check(upgrade_to_1) is None and (second.level("share.version"), second.epoch) == (1, 2)
