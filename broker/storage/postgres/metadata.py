"""The placement rows of the cluster's database (schema.py): topics and their partitions, and the one
way a partition's leadership changes, an election (epoch + 1, its term opened in the epoch history at
the partition's committed end, one transaction). Each tells the nodes (notify.py) as it commits. The controller (issue 44, step 4) calls these; the
log's appends (log.py) check what they wrote."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from .notify import notify

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    log_start: int
    log_end: int


async def create_topic(conn: Any, name: str, replicas: dict[int, list[int]], configs: dict[str, str] | None = None,
                       topic_id: uuid.UUID | None = None) -> uuid.UUID:
    """The topic, its configs and its partitions (each led by its first replica, epoch 0), in one
    transaction. asyncpg.UniqueViolationError when it exists."""
    topic_id = topic_id or uuid.uuid4()
    async with conn.transaction():
        await conn.execute("INSERT INTO topics (name, topic_id, num_partitions) VALUES ($1, $2, $3)",
                           name, topic_id, len(replicas))
        if configs:
            await conn.executemany("INSERT INTO topic_configs (topic, key, value) VALUES ($1, $2, $3)",
                                   [(name, k, v) for k, v in sorted(configs.items())])
        await insert_partitions(conn, name, replicas)
        await notify(conn, f"topic {name} created")
    return topic_id


async def insert_partitions(conn: Any, name: str, replicas: dict[int, list[int]]) -> None:
    """New partitions of a topic (inside the caller's transaction): each led by its first replica in
    epoch 0, its first term opened at offset 0 in the epoch history."""
    rows = [(name, p, nodes[0] if nodes else NO_LEADER, 0, nodes) for p, nodes in sorted(replicas.items())]
    await conn.executemany("INSERT INTO partitions (topic, partition, leader, leader_epoch, replicas) "
                           "VALUES ($1, $2, $3, $4, $5)", rows)
    await conn.executemany("INSERT INTO epoch_history (topic, partition, leader_epoch, start_offset) "
                           "VALUES ($1, $2, 0, 0)", [(name, p) for p in sorted(replicas)])


async def partition_row(conn: Any, topic: str, partition: int) -> PartitionRow | None:
    row = await conn.fetchrow("SELECT leader, leader_epoch, replicas, log_start, log_end FROM partitions "
                              "WHERE topic = $1 AND partition = $2", topic, partition)
    if row is None:
        return None
    return PartitionRow(topic, partition, row["leader"], row["leader_epoch"], list(row["replicas"]),
                        row["log_start"], row["log_end"])


async def elect(conn: Any, topic: str, partition: int, leader: int, *, expected_epoch: int | None = None,
                replicas: list[int] | None = None, lock_timeout_ms: int = 0, live_leader: bool = False) -> int | None:
    """A new leadership term: `leader` (NO_LEADER: none) in epoch + 1, opened in the epoch history at
    the committed end, in one transaction that holds the partition's row, so no append of the old
    term commits after it. `expected_epoch`: only if the partition is still in that epoch (a
    controller's decision made on what it read); `replicas`: the partition's new replica list. Returns
    the new epoch, None if it did not apply. `lock_timeout_ms`: how long to wait for the row (0: as long
    as it takes), asyncpg.LockNotAvailableError past it. `live_leader`: only if `leader`'s broker lease
    is live as the row is taken."""
    async with conn.transaction():
        if lock_timeout_ms:
            await conn.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
        row = await conn.fetchrow("SELECT leader_epoch, log_end FROM partitions WHERE topic = $1 AND partition = $2 "
                                  "FOR UPDATE", topic, partition)
        if row is None or (expected_epoch is not None and row["leader_epoch"] != expected_epoch):
            return None
        if live_leader and not await conn.fetchval(
                "SELECT 1 FROM brokers WHERE node_id = $1 AND lease_expires > statement_timestamp()", leader):
            return None
        epoch = row["leader_epoch"] + 1
        await conn.execute("UPDATE partitions SET leader = $3, leader_epoch = $4, replicas = coalesce($5, replicas) "
                           "WHERE topic = $1 AND partition = $2", topic, partition, leader, epoch, replicas)
        await conn.execute("INSERT INTO epoch_history (topic, partition, leader_epoch, start_offset) "
                           "VALUES ($1, $2, $3, $4)", topic, partition, epoch, row["log_end"])
        await notify(conn, f"{topic}-{partition} led by {leader} in epoch {epoch}")
    return epoch


async def epoch_history(conn: Any, topic: str, partition: int) -> list[tuple[int, int]]:
    rows = await conn.fetch("SELECT leader_epoch, start_offset FROM epoch_history WHERE topic = $1 AND partition = $2 "
                            "ORDER BY leader_epoch", topic, partition)
    return [(row["leader_epoch"], row["start_offset"]) for row in rows]
