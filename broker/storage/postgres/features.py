"""The finalized feature levels of a cluster over PostgreSQL (schema version 4): Kafka keeps them as
FeatureLevelRecords in its one metadata log, with one epoch for the cluster; here they are the rows of
`finalized_features` (feature -> the level an UpdateFeatures set) and `cluster.features_epoch`.

A change (`DatabaseLevels.commit`, the `LevelStorage` of broker/operations/features.py) is one
transaction: the epoch's row locked (changes through any node are ordered by it, as by Kafka's one
controller), the levels read and checked under that lock, the new ones stored, the epoch moved by one,
the nodes notified (notify.py) at its COMMIT; UpdateFeatures is answered only after it. Every node
reads them in its image pass (`read`, broker/postgres_node.py: at once when notified, every
--cluster-poll-ms besides) and adopts a newer epoch."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .notify import notify

FIRST_EPOCH = 1  # cluster.features_epoch before any change (the column's default)
Stored = tuple[dict[str, int], int]  # feature -> level, the epoch


async def read_levels(conn: Any) -> Stored:
    """The stored levels and their epoch, in one statement (one snapshot)."""
    rows = await conn.fetch("SELECT c.features_epoch, f.feature, f.level FROM cluster c "
                            "LEFT JOIN finalized_features f ON true")
    if not rows:  # no cluster row: a database kbroker has not prepared (schema.prepare_schema makes it)
        return {}, FIRST_EPOCH
    return {row["feature"]: row["level"] for row in rows if row["feature"] is not None}, rows[0]["features_epoch"]


class DatabaseLevels:
    """A node's `LevelStorage`: what it last read (`load`), and the changes, committed in the database."""

    source = "the cluster's database (finalized_features)"

    def __init__(self, pool: Any, stored: Stored) -> None:
        self.pool = pool
        self._stored = stored

    def load(self) -> Stored:
        return self._stored

    async def read(self) -> Stored:
        """The database's levels now (the image pass; `current` of the LevelStorage)."""
        async with self.pool.acquire() as conn:
            stored = await read_levels(conn)
        if stored[1] >= self._stored[1]:  # not a read from before this node's own commit, which returned meanwhile
            self._stored = stored
        return stored

    current = read

    async def commit(self, updates: Mapping[str, int], check: Callable[[Stored], str | None]) -> Stored | str:
        async with self.pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval("SELECT features_epoch FROM cluster FOR UPDATE")
            levels = {row["feature"]: row["level"] for row in await conn.fetch(
                "SELECT feature, level FROM finalized_features")}
            reason = check((levels, epoch))
            if reason is not None:
                return reason  # nothing written: the transaction ends with the lock
            await conn.executemany("INSERT INTO finalized_features (feature, level) VALUES ($1, $2) "
                                   "ON CONFLICT (feature) DO UPDATE SET level = excluded.level",
                                   sorted(updates.items()))
            epoch = await conn.fetchval("UPDATE cluster SET features_epoch = features_epoch + 1 "
                                        "RETURNING features_epoch")
            changes = ", ".join(f"{name}={level}" for name, level in sorted(updates.items()))
            await notify(conn, f"finalized features {changes} in epoch {epoch}")
        stored = ({**levels, **updates}, epoch)
        if epoch >= self._stored[1]:
            self._stored = stored
        return stored
