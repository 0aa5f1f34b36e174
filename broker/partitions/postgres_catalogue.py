"""The topic catalogue of one node of a cluster over PostgreSQL (issue 44, `kbroker serve --cluster`).

What it answers is the engine's image of the database (broker/storage/postgres/engine.py): the
brokers whose lease is live, the controller that holds the controller lease, and per partition its
replicas, leader and leader epoch. Leaders move only by the controller's elections in the database,
never here. The in-sync replicas are the leader alone: the log has one copy, PostgreSQL's (what its
own replication keeps is the operator's), so `min.insync.replicas` above 1 is not met by any node.

This node leads a partition only once its store is open and its lease is not fenced: until then,
and after, the data path answers NOT_LEADER_OR_FOLLOWER and the coordinator routes NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.topic_names import INTERNAL_TOPICS
from .catalogue import NO_LEADER, Leadership, TopicCatalogue, TopicInfo
from .cluster_catalogue import INTERNAL_REPLICATION_FACTOR, LeaderListener

if TYPE_CHECKING:
    from ..storage.postgres.engine import PostgresEngine


class PostgresCatalogue(TopicCatalogue):
    clustered = True

    def __init__(self, engine: PostgresEngine, node_id: int, allocate_producer_id: Callable[[], int],
                 fenced: Callable[[], bool], *, default_replication_factor: int = 1) -> None:
        super().__init__(engine, node_id, None)
        self._pg = engine
        self._allocate = allocate_producer_id
        self._fenced = fenced
        self._default_rf = default_replication_factor
        self.leader_listeners: list[LeaderListener] = engine.leader_listeners
        # A deletion is told by the engine's refresh, on every node (this one's DeleteTopics included):
        # name -> what the listeners started, for this node's DeleteTopics to wait for.
        self._settling: dict[str, asyncio.Future[Any]] = {}
        engine.deletion_listeners.append(self._deleted_in_database)

    def _deleted_in_database(self, deleted: dict[str, uuid.UUID]) -> None:
        started = self.topics_deleted(deleted)
        if not started:
            return
        both = asyncio.gather(*started, return_exceptions=True)
        for name in deleted:
            self._settling[name] = both
        both.add_done_callback(lambda done: [self._settling.pop(n) for n in deleted if self._settling.get(n) is done])

    def _after_deletion(self, name: str, topic_id: uuid.UUID) -> list[asyncio.Future[Any]]:
        settling = self._settling.get(name)
        return [] if settling is None else [settling]

    # --- nodes --------------------------------------------------------------------------------------

    @property
    def nodes(self) -> list[int]:
        return [b.node_id for b in self._pg.brokers]

    @property
    def live_nodes(self) -> list[int]:
        return [b.node_id for b in self._pg.brokers]

    @property
    def controller(self) -> int:
        """The holder of the controller lease if it is live, else this node: every node serves the
        controller's requests, and a client told of none (-1: from a node's start to its first refresh
        after an election) may wait for a metadata change it never asks for (librdkafka's admin
        client's CreateTopics hung). Kafka's brokers name a live broker, never -1."""
        holder = self._pg.controller
        return holder if holder in self.live_nodes else self.node_id

    def default_replication_factor(self, topic: str) -> int:
        if topic in INTERNAL_TOPICS:
            return max(1, min(INTERNAL_REPLICATION_FACTOR, len(self.live_nodes)))
        return self._default_rf

    def place(self, topic: str, num_partitions: int, replication_factor: int,
              assignments: dict[int, list[int]] | None = None, *, first_partition: int = 0) -> dict[int, list[int]]:
        from .placement import assign, check_assignment

        live = self.live_nodes
        if not live:
            raise KafkaError("no broker is up", ErrorCode.INVALID_REPLICATION_FACTOR)
        if assignments:
            rf = None if first_partition == 0 else replication_factor
            for partition, replicas in sorted(assignments.items()):
                check_assignment(partition, replicas, live, rf)
                rf = len(replicas)
            return dict(assignments)
        rf = self.default_replication_factor(topic) if replication_factor == -1 else replication_factor
        return assign(sorted(live), num_partitions, rf, first_partition=first_partition)

    # --- leadership ---------------------------------------------------------------------------------

    def replicas(self, info: TopicInfo, partition: int) -> list[int]:
        return info.replicas.get(partition) or []

    def leader(self, info: TopicInfo, partition: int) -> int:
        return info.leaders.get(partition, NO_LEADER)

    def leadership(self, topic: str, partition: int) -> Leadership | None:
        info = self._pg.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        replicas = self.replicas(info, partition)
        live = self.live_nodes
        leader = self.leader(info, partition)
        if leader not in live:
            leader = NO_LEADER
        return Leadership(leader, info.leader_epochs.get(partition, 0), replicas,
                          [leader] if leader != NO_LEADER else [], [r for r in replicas if r not in live])

    def leader_epoch(self, info: TopicInfo, partition: int) -> int:
        return info.leader_epochs.get(partition, 0)

    def leads(self, info: TopicInfo, partition: int, node: int | None) -> bool:
        """Only this node's leadership counts here (node None: the coordinators', which run for this
        node alone), and only with its store open and its lease not fenced."""
        if node is not None and node != self.node_id:
            return self.leader(info, partition) == node
        return (self.leader(info, partition) == self.node_id and not self._fenced()
                and self._pg.store(info.name, partition) is not None)

    def isr_size(self, info: TopicInfo, partition: int) -> int:
        return 1 if self.leader(info, partition) in self.live_nodes else 0

    def elect(self, topic: str, partition: int, leader: int | None = None) -> int:
        raise KafkaError("leaders move by the controller's elections in the database", ErrorCode.POLICY_VIOLATION)

    def partitions(self) -> Iterator[tuple[TopicInfo, int]]:
        for info in list(self.topics().values()):
            for partition in range(info.num_partitions):
                yield info, partition

    def shuffle(self, rng: random.Random | None = None) -> list[tuple[str, int, int]]:
        raise KafkaError("leaders move by the controller's elections in the database", ErrorCode.POLICY_VIOLATION)

    # --- producer ids -------------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        return self._allocate()
