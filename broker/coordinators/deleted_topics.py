"""A deleted topic's committed offsets go with it, as in Kafka 4.4: its metadata image tells the group
coordinator (GroupCoordinatorService.onMetadataUpdate -> handleTopicsDeletion), whose every shard
writes an offset tombstone to `__consumer_offsets` for each group's offset of the deleted topics
(OffsetMetadataManager.onTopicsDeleted), pending transactional offsets included. A consumer asking
afterwards, also of a topic created again under the name, is answered no offset (-1), and a restart
replays the tombstones.

The catalogue tells `DeletedTopicOffsets` (its `deletion_listeners`, broker/partitions/catalogue.py):
on one node and on `--nodes N` when DeleteTopics deletes a topic; over PostgreSQL on every node, when
its image of the database loses the topic (broker/storage/postgres/engine.py). Offsets an open
transaction committed to the topic are dropped from the transaction coordinator's hold here, as
Kafka's replay of those tombstones drops them from its pending offsets (so the transaction's commit
marker materialises none of them), and tombstoned with the rest; the replay of `__consumer_offsets`
drops them alike (offsets_topic.py `_fold_chunk`).

Share groups' state of the topic goes too, as Kafka's share coordinator drops it
(ShareCoordinatorService.onMetadataUpdate -> ShareCoordinatorShard.maybeCleanupShareState): a
tombstone in `__share_group_state` for every share-partition state of the deleted topic id, and the
share-partitions held in memory for it (share_partitions.py `topics_deleted`).

Not done here (Kafka does more on a deletion): the share groups' record of their initialized topics
(GroupMetadataManager.maybeCleanupShareGroupState; kbroker keys it by topic id, so a topic created
again is initialized anew all the same), and a check of the offset's stored topic id (kbroker's commit
records carry none: every offset of the name goes).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

import structlog

from ...protocol.records.classic_records import OffsetCommitRecord

log = structlog.get_logger("kbroker.deleted_topics")

TopicPartition = tuple[str, int]


class DeletedTopicOffsets:
    """The catalogue's deletion listener, registered once the broker builds its group coordinator (a
    broker that never built it holds no offset and no share group to clean up): the offsets' tombstones
    are dispatched at once, the share-partition states' after them."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._running: set[asyncio.Future[Any]] = set()

    def __call__(self, deleted: dict[str, uuid.UUID]) -> asyncio.Future[Any] | None:
        coordinator = self.broker.coordinator_if_built
        if coordinator is None or not deleted:
            return None
        topics = frozenset(deleted)
        # Dispatched now, before any later request reaches a group (delete_topic_offsets' contract).
        offsets = coordinator.delete_topic_offsets(topics, self._forget_pending(topics))
        shares = self.broker.share_partitions_if_built
        state = self.broker.share_state_if_built
        share_states = shares.topics_deleted(deleted) if shares is not None else \
            state.delete_topics(set(deleted.values())) if state is not None else None
        started = asyncio.ensure_future(self._all(offsets, share_states))
        self._running.add(started)
        started.add_done_callback(self._done)
        return started

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("deleted_topics_cleanup_failed", error=repr(exc))

    @staticmethod
    async def _all(offsets: Awaitable[int], share_states: Awaitable[int] | None) -> None:
        await offsets
        if share_states is not None:
            await share_states

    def _forget_pending(self, topics: frozenset[str]) -> dict[str, set[TopicPartition]]:
        """Drop the deleted topics' offsets that open transactions hold, and return them by group: those
        TxnOffsetCommit wrote in this run (the transaction coordinator's `pending_offsets`) and those a
        restart's replay handed back with no marker yet (`open_txn_offsets`)."""
        by_group: dict[str, set[TopicPartition]] = {}
        transactions = self.broker.transactions_if_built
        if transactions is not None:
            for groups in transactions.pending_offsets.values():
                for group_id, offsets in groups.items():
                    for key in [k for k in offsets if k[0] in topics]:
                        del offsets[key]
                        by_group.setdefault(group_id, set()).add(key)
        for producers in self.broker.offsets_topic.open_txn_offsets.values():
            for producer_id, records in producers.items():
                kept = []
                for r in records:
                    if isinstance(r, OffsetCommitRecord) and r.topic in topics:
                        by_group.setdefault(r.group, set()).add((r.topic, r.partition))
                    else:
                        kept.append(r)
                if len(kept) < len(records):
                    producers[producer_id] = kept
        return by_group
