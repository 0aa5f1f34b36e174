"""The changes of a topic after its creation, in the cluster's database (issue 44): partitions added,
configs replaced, the topic deleted. Each is one transaction, conditional on the topic id the caller
saw (a topic deleted and created again under its name is another topic), so two nodes' changes
cannot interleave; each notifies the nodes as it commits (notify.py), whose refresh (engine.py) brings
their image up to it.

* CreatePartitions: `topics.num_partitions` moves from the count the caller saw (a concurrent
  growth makes this one fail), and the new partitions are inserted as creation inserts them (each
  led by its first replica in epoch 0, metadata.insert_partitions).
* Configs: the topic's overrides are replaced whole (AlterConfigs semantics; IncrementalAlterConfigs
  passes the merged set), validated by the caller as on one node.
* DeleteTopics: one DELETE of the topic's row; the foreign keys cascade to its configs, partitions,
  epoch history and stored batches, so the placement and the log go in the same transaction. A leader's
  round in flight holds its partitions' rows until it commits, so the deletion waits for it, and a
  round after it finds no row to claim: its batches are not inserted (log.py) and its producers are
  answered NOT_LEADER_OR_FOLLOWER, then UNKNOWN_TOPIC_OR_PARTITION once the node's image lost the topic.
"""

from __future__ import annotations

import uuid
from typing import Any

from ....protocol.errors import ErrorCode, KafkaError
from .metadata import insert_partitions
from .notify import notify


def _gone(name: str) -> KafkaError:
    return KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


async def add_partitions(conn: Any, name: str, topic_id: uuid.UUID, old_total: int,
                         replicas: dict[int, list[int]]) -> None:
    """Partitions old_total.. of the topic, placed on `replicas` (the catalogue's placement)."""
    new_total = old_total + len(replicas)
    async with conn.transaction():
        moved = await conn.fetchval("UPDATE topics SET num_partitions = $3 WHERE name = $1 AND topic_id = $2 "
                                    "AND num_partitions = $4 RETURNING num_partitions",
                                    name, topic_id, new_total, old_total)
        if moved is None:
            now = await conn.fetchval("SELECT num_partitions FROM topics WHERE name = $1 AND topic_id = $2",
                                      name, topic_id)
            if now is None:
                raise _gone(name)
            raise KafkaError(f"Topic currently has {now} partitions, which is higher than the requested "
                             f"{new_total}." if now >= new_total else
                             f"Topic {name} grew to {now} partitions meanwhile.", ErrorCode.INVALID_PARTITIONS)
        await insert_partitions(conn, name, replicas)
        await notify(conn, f"topic {name} has {new_total} partitions")


async def replace_configs(conn: Any, name: str, topic_id: uuid.UUID, overrides: dict[str, str]) -> None:
    """The topic's overrides become `overrides` (validated by the caller)."""
    async with conn.transaction():
        found = await conn.fetchval("SELECT name FROM topics WHERE name = $1 AND topic_id = $2 FOR UPDATE",
                                    name, topic_id)
        if found is None:
            raise _gone(name)
        await conn.execute("DELETE FROM topic_configs WHERE topic = $1", name)
        if overrides:
            await conn.executemany("INSERT INTO topic_configs (topic, key, value) VALUES ($1, $2, $3)",
                                   [(name, k, v) for k, v in sorted(overrides.items())])
        await notify(conn, f"topic {name}'s configs replaced")


async def delete_topic(conn: Any, name: str, topic_id: uuid.UUID) -> None:
    """The topic, its placement and its stored batches, in one transaction (the foreign keys cascade)."""
    async with conn.transaction():
        deleted = await conn.fetchval("DELETE FROM topics WHERE name = $1 AND topic_id = $2 RETURNING name",
                                      name, topic_id)
        if deleted is None:
            raise _gone(name)
        await notify(conn, f"topic {name} deleted")
