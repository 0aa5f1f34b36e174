"""The topic catalogue: the one owner of what topics there are (names, ids, partition counts, configs)
and, per partition, who leads it (leader, replicas, ISR) in which leader epoch (Kafka: the metadata
image its controller publishes, `MetadataCache` on every broker).

Handlers and coordinators ask it, never the storage engine; the engine keeps its records for it
(broker/storage/log/topic_files.py on the segment engine), and the partition service
(service.py) asks it who leads a partition before it appends or reads.

On one node it says what kbroker always said: this node leads every partition, alone in its
replicas and ISR, in epoch 0. An election (`elect`: on one node the same leader in a new term; with
several nodes, issue 41, another one) bumps the partition's epoch, persisted in its topic's record,
and opens the new term in the partition's epoch history (broker/storage/log/epochs.py), so
OffsetForLeaderEpoch, Metadata, DescribeTopicPartitions, ListOffsets and Fetch all answer with the
catalogue's epoch and fence clients that name an old one. "Who leads" is always a question to the
catalogue (`leads`), never an assumption, so several nodes in one process can share it.

A deleted topic is told to `deletion_listeners` (the group coordinator tombstones its committed
offsets, the share coordinator its share-partition states: broker/coordinators/deleted_topics.py), as
Kafka's metadata image tells its coordinators:
DeleteTopics answers once what they started is done (bounded by DELETION_SETTLE_S), so a consumer
that asks at once, or the topic created again under its name, finds no offset of the old topic.

A topic whose record the engine could not trust is listed fenced (`damaged`): its partitions have
no leader (Metadata answers LEADER_NOT_AVAILABLE, the data path KAFKA_STORAGE_ERROR) until an
operator deletes it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import structlog

from . import internal_topics
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.topic_names import INTERNAL_TOPICS, InvalidTopicError, is_internal_topic, validate_topic_name
from ..storage.log.config import (INTERNAL_TOPIC_CONFIGS, ConfigEntry, InvalidConfigError, LogConfig, check_known_in,
                                  default_of, known_in)
from ..storage.log.topic_files import TopicInfo

if TYPE_CHECKING:
    from ..storage.api import LogEngine
    from ..storage.producer_state import ProducerIdAllocator

log = structlog.get_logger("kbroker.catalogue")

NO_LEADER = -1
# Told the topics just deleted (name -> topic id); returns what it started (a future), or None.
DeletionListener = Callable[[dict[str, uuid.UUID]], "asyncio.Future[Any] | None"]
# How long DeleteTopics waits for what the deletion listeners started (their writes go on past it).
DELETION_SETTLE_S = 10.0

# What the handlers use of the topics' model, from here rather than from the engine.
__all__ = ["ConfigEntry", "INTERNAL_TOPICS", "INTERNAL_TOPIC_CONFIGS", "InvalidConfigError", "InvalidTopicError",
           "Leadership", "LogConfig", "NO_LEADER", "TopicCatalogue", "TopicInfo", "check_known_in", "default_of",
           "is_internal_topic", "known_in", "validate_topic_name"]


@dataclass(frozen=True, slots=True)
class Leadership:
    """A partition's placement as Metadata reports it (the lists are shared: read, never changed)."""

    leader: int  # NO_LEADER when none
    epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


class TopicCatalogue:
    clustered = False  # several nodes in this process (cluster_catalogue.py): handlers add what a cluster answers

    def __init__(self, engine: LogEngine, node_id: int, producer_ids: ProducerIdAllocator | None) -> None:
        self._engine = engine
        self.node_id = node_id
        self._producer_ids = producer_ids
        self._this_node = [node_id]
        self._none: list[int] = []
        self._led = {0: Leadership(node_id, 0, self._this_node, self._this_node, self._none)}  # epoch -> shared
        self._names_by_id: tuple[int, dict[uuid.UUID, str]] | None = None
        self.deletion_listeners: list[DeletionListener] = []
        # One topic's info (every request asks it): the engine's own lookup, with no call of ours around it.
        self.topic: Callable[[str], TopicInfo | None] = engine.topic

    # --- topics -------------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Bumped by every change of the topics table, so a reader may keep what it derived from it."""
        return self._engine.topics_version

    @property
    def default_config(self) -> LogConfig:
        return self._engine.default_config

    def topics(self) -> dict[str, TopicInfo]:
        return self._engine.topics()


    def names_by_id(self) -> dict[uuid.UUID, str]:
        """topic id -> name (Produce and Fetch v13+ name topics by id), built once per change."""
        cached = self._names_by_id
        version = self._engine.topics_version
        if cached is None or cached[0] != version:
            cached = self._names_by_id = (version, {info.topic_id: name for name, info in self.topics().items()})
        return cached[1]

    def has_partition(self, topic: str, partition: int) -> bool:
        info = self._engine.topic(topic)
        return info is not None and 0 <= partition < info.num_partitions

    # Every change of a topic passes the internal topics' policy (internal_topics.py) here, whoever asks.

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], *,
                     allow_internal_configs: bool = False, replication_factor: int = -1) -> TopicInfo:
        """Synchronously (start-up, auto-creation): the files are the engine's. Never an internal topic:
        its coordinator makes it (create_internal_topic)."""
        internal_topics.check_creation(name)
        replicas = self.place(name, num_partitions, replication_factor)
        return self._engine.create_topic(name, num_partitions, configs, allow_internal_configs=allow_internal_configs,
                                         replicas=replicas)

    async def create_topic_async(self, name: str, num_partitions: int, configs: dict[str, str],
                                 topic_id: uuid.UUID | None = None, *, validate_only: bool = False,
                                 replication_factor: int = -1,
                                 assignments: dict[int, list[int]] | None = None) -> TopicInfo:
        """CreateTopics: never an internal topic (create_internal_topic_async)."""
        internal_topics.check_creation(name)
        replicas = self.place(name, num_partitions, replication_factor, assignments)
        return await self._engine.create_topic_async(name, num_partitions, configs, topic_id,
                                                     validate_only=validate_only, replicas=replicas)

    def create_internal_topic(self, name: str, num_partitions: int, configs: dict[str, str]) -> TopicInfo:
        """An internal topic, made by its own coordinator, with configs that keep its policy."""
        internal_topics.check_own_creation(name, configs, self.default_config)
        return self._engine.create_topic(name, num_partitions, configs,
                                         replicas=self.place(name, num_partitions, -1))

    async def create_internal_topic_async(self, name: str, num_partitions: int, configs: dict[str, str]) -> TopicInfo:
        """create_internal_topic with the files made in a worker thread, while the broker serves."""
        internal_topics.check_own_creation(name, configs, self.default_config)
        return await self._engine.create_topic_async(name, num_partitions, configs,
                                                     replicas=self.place(name, num_partitions, -1))

    async def add_partitions_async(self, name: str, new_total: int, *, validate_only: bool = False,
                                   assignments: dict[int, list[int]] | None = None) -> TopicInfo:
        internal_topics.check_new_partitions(name)
        info = self._engine.topic(name)
        replicas = None
        if info is not None and new_total > info.num_partitions:
            rf = len(self.leadership(name, 0).replicas) if info.num_partitions else 1  # type: ignore[union-attr]
            replicas = self.place(name, new_total - info.num_partitions, rf, assignments,
                                  first_partition=info.num_partitions)
        return await self._engine.add_partitions_async(name, new_total, validate_only=validate_only,
                                                       replicas=replicas)

    # --- nodes and placement ------------------------------------------------------------------------

    @property
    def nodes(self) -> list[int]:
        """Every node id of the cluster (one here; cluster_catalogue.py for several)."""
        return self._this_node

    @property
    def live_nodes(self) -> list[int]:
        """The nodes that are up (serving their listeners)."""
        return self._this_node

    @property
    def controller(self) -> int:
        return self.node_id

    def default_replication_factor(self, topic: str) -> int:
        return 1

    def place(self, topic: str, num_partitions: int, replication_factor: int,
              assignments: dict[int, list[int]] | None = None, *, first_partition: int = 0) -> dict[int, list[int]]:
        """The replicas of new partitions (first_partition..), checked as Kafka's controller checks
        them (raises KafkaError): on one node each partition is this node's alone, which its record
        does not spell out (an empty map)."""
        from .placement import assign, check_assignment

        if assignments:
            # CreateTopics: the first partition's count is the one the others must have (Kafka's
            # createTopic); CreatePartitions: the topic's.
            rf = None if first_partition == 0 else replication_factor
            for partition, replicas in sorted(assignments.items()):
                check_assignment(partition, replicas, self.live_nodes, rf)
                rf = len(replicas)
            return {} if len(self.nodes) == 1 else dict(assignments)
        rf = self.default_replication_factor(topic) if replication_factor == -1 else replication_factor
        placed = assign(sorted(self.live_nodes), num_partitions, rf, first_partition=first_partition)
        return {} if len(self.nodes) == 1 else placed

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> TopicInfo:
        """Replace the topic's overrides with `configs`, the result of the whole change."""
        internal_topics.check_configs(name, configs, self.default_config)
        return self._engine.alter_topic_configs(name, configs, validate_only=validate_only)

    async def alter_topic_configs_async(self, name: str, configs: dict[str, str], *,
                                        validate_only: bool = False) -> TopicInfo:
        """AlterConfigs and IncrementalAlterConfigs: alter_topic_configs, awaiting an engine whose
        records are a database's (a cluster over PostgreSQL)."""
        internal_topics.check_configs(name, configs, self.default_config)
        return await self._engine.alter_topic_configs_async(name, configs, validate_only=validate_only)

    def set_default_config(self, default: LogConfig) -> None:
        """New broker-wide topic defaults (a dynamic broker config changed): every topic without its
        own value of a config takes the new one."""
        self._engine.set_default_config(default)

    def delete_topic(self, name: str) -> None:
        internal_topics.check_deletion(name)
        info = self._engine.topic(name)
        self._engine.delete_topic(name)
        if info is not None:
            self.topics_deleted({name: info.topic_id})

    async def delete_topic_async(self, name: str) -> None:
        """DeleteTopics: delete_topic, awaiting an engine whose records are a database's, then what the
        deletion listeners started."""
        internal_topics.check_deletion(name)
        info = self._engine.topic(name)
        await self._engine.delete_topic_async(name)
        if info is not None:
            await settle(self._after_deletion(name, info.topic_id))

    def topics_deleted(self, deleted: dict[str, uuid.UUID]) -> list[asyncio.Future[Any]]:
        """Tell the deletion listeners; what they started, to await. The topic is gone whatever a
        listener does: one that fails is logged, not raised (DeleteTopics succeeded; a refresh goes on)."""
        started = []
        for listener in list(self.deletion_listeners):
            try:
                future = listener(deleted)
            except Exception as exc:  # noqa: BLE001 - the deletion stands; what the listener keeps is logged
                log.error("topic_deletion_listener_failed", topics=sorted(deleted), error=repr(exc), exc_info=True)
                continue
            if future is not None:
                started.append(future)
        return started

    def _after_deletion(self, name: str, topic_id: uuid.UUID) -> list[asyncio.Future[Any]]:
        """What DeleteTopics of `name` waits for (this catalogue tells the listeners itself)."""
        return self.topics_deleted({name: topic_id})

    # --- leadership ---------------------------------------------------------------------------------

    def leadership(self, topic: str, partition: int) -> Leadership | None:
        """None: no such partition."""
        info = self._engine.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        if info.damaged is not None:
            return Leadership(NO_LEADER, info.leader_epochs.get(partition, 0), self._this_node, self._none,
                              self._this_node)
        return self._led_in(info.leader_epochs.get(partition, 0))

    def _led_in(self, epoch: int) -> Leadership:
        led = self._led.get(epoch)
        if led is None:
            led = self._led[epoch] = Leadership(self.node_id, epoch, self._this_node, self._this_node, self._none)
        return led

    def leader_epoch(self, info: TopicInfo, partition: int) -> int:
        return info.leader_epochs.get(partition, 0) if info.leader_epochs else 0

    def leads(self, info: TopicInfo, partition: int, node: int | None) -> bool:
        """Whether `node` leads the partition (the caller knows it exists; None: whichever node leads
        it, for the coordinators, which this process runs for every node). One node leads all of
        its intact topics; a fenced topic has no leader."""
        return info.damaged is None

    def isr_size(self, info: TopicInfo, partition: int) -> int:
        return 1

    def elect(self, topic: str, partition: int, leader: int | None = None) -> int:
        """A new leadership term for the partition, led by this node (on one node, the same leader: a
        re-election, as after a controller fenced and unfenced it). Persists the new epoch in the topic's
        record and opens the term in the partition's epoch history; returns the new epoch."""
        info = self._engine.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            raise KafkaError(f"unknown partition {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if info.damaged is not None:
            raise KafkaError(f"topic {topic!r} is fenced: {info.damaged}", ErrorCode.KAFKA_STORAGE_ERROR)
        epoch = info.leader_epochs.get(partition, 0) + 1
        store = self._engine.store(topic, partition)
        if store is not None:
            store.assign_leader_epoch(epoch)  # the history first: a crash then leaves the old epoch current
        info.leader_epochs[partition] = epoch
        self._engine.write_topic_record(info)
        log.info("leader_elected", topic=topic, partition=partition, leader=self.node_id, leader_epoch=epoch)
        return epoch

    # --- producer ids -------------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, on this cluster (Kafka: a block from the controller)."""
        if self._producer_ids is None:
            raise KafkaError("no producer ids offline", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self._producer_ids.allocate()


async def settle(started: Iterable[asyncio.Future[Any]]) -> None:
    """Wait, bounded, for what deletion listeners started; their failures are theirs to log."""
    pending = list(started)
    if pending:
        await asyncio.wait(pending, timeout=DELETION_SETTLE_S)
