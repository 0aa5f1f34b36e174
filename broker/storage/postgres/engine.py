"""The `LogEngine` (broker/storage/api.py) of a node of a cluster over PostgreSQL (issue 44).

The database is the truth; this node keeps an image of it, refreshed when the database notifies a change
and every --cluster-poll-ms (`refresh`, called by broker/postgres_node.py):
the topics with their configs, and per partition its replicas, leader and leader epoch; the brokers
whose lease is live with their endpoints; the controller. A partition the database says this node
leads is opened (log.py reads it) before the image says so, and deposed as soon as the image says
another node leads it, so the data path (which asks the catalogue who leads, then the engine for the
store) never appends to a partition it has not opened. Changes of leader are told to
`leader_listeners` (the coordinators load and unload their partitions on them).

Topic creation is the database's (one transaction, metadata.create_topic); a synchronous creation
(Metadata's auto-creation) is started in the background and answered LEADER_NOT_AVAILABLE, which
clients retry, as Kafka answers a topic it is creating. CreatePartitions, config changes and DeleteTopics
are too (topics.py), through the port's asynchronous calls; the refresh brings every node's image to
them (a topic's new partition count and overrides; a topic gone, or created again with a new id, closes
the partitions opened here, and `deletion_listeners` are told). Retention runs at the broker's retention check (retention.py), compaction
at the cleaner's cadence (compaction.py).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, Callable

import structlog

from ....protocol.errors import ErrorCode, KafkaError
from ....protocol.topic_names import validate_topic_name
from ..log.config import LogConfig
from ..log.topic_files import TopicInfo
from . import metadata, topics
from .log import PostgresLog
from .membership import LiveBroker, live_brokers
from .compaction import compact_store, needs_cleaning
from .retention import apply_retention

if TYPE_CHECKING:
    from ....purgatory.clock import Clock
    from .store import PostgresPartitionStore

log = structlog.get_logger("kbroker.storage.postgres")

NO_LEADER = -1
# (topic, partition, old leader, new leader, new epoch)
LeaderListener = Callable[[str, int, int, int, int], None]
# the topics the image no longer has (deleted, or deleted and created again with a new id): name -> old id
DeletionListener = Callable[[dict[str, uuid.UUID]], None]


class PostgresEngine:
    def __init__(self, pool: Any, plog: PostgresLog, node_id: int, default_config: LogConfig, clock: Clock) -> None:
        self.pool = pool  # metadata queries and reads of old batches (the log writes on its own connection)
        self.plog = plog
        plog.reader = pool
        self.node_id = node_id
        self.clock = clock
        self.default_config = default_config
        self.high_watermark_listener: Callable[[str, int], object] | None = None
        self.topics_version = 0
        self._topics: dict[str, TopicInfo] = {}
        self.brokers: list[LiveBroker] = []
        self.controller = NO_LEADER
        self.leader_listeners: list[LeaderListener] = []
        self.deletion_listeners: list[DeletionListener] = []
        self._creating: dict[str, asyncio.Task[Any]] = {}
        self._refreshing = asyncio.Lock()
        self._wake_cleaner = asyncio.Event()

    # --- the image ------------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the cluster's state and bring the image (and the partitions opened here) up to it."""
        async with self._refreshing:
            # One snapshot, so the image is a state the database went through, in its commit order: a topic
            # deleted and created again between two of these reads would otherwise be seen under its old id
            # with the new topic's partitions (served before the old one's deletion is applied).
            async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                brokers = await live_brokers(conn)
                controller = await conn.fetchval(
                    "SELECT node_id FROM controller_lease WHERE lease_expires > statement_timestamp()")
                topics = await conn.fetch("SELECT name, topic_id, num_partitions FROM topics")
                configs = await conn.fetch("SELECT topic, key, value FROM topic_configs")
                partitions = await conn.fetch("SELECT topic, partition, leader, leader_epoch, replicas FROM partitions")
            overrides: dict[str, dict[str, str]] = {}
            for row in configs:
                overrides.setdefault(row["topic"], {})[row["key"]] = row["value"]
            rows_of: dict[str, list[Any]] = {}
            for row in partitions:
                rows_of.setdefault(row["topic"], []).append(row)
            new: dict[str, TopicInfo] = {}
            deleted: dict[str, uuid.UUID] = {}
            changes: list[tuple[str, int, int, int, int]] = []
            altered = False  # a topic's partition count or configs
            for row in topics:
                name = row["name"]
                old = self._topics.get(name)
                if old is not None and old.topic_id == row["topic_id"]:
                    info = old
                    if self._follow(info, row["num_partitions"], overrides.get(name, {})):
                        altered = True
                else:
                    if old is not None:  # deleted and created again under its name: another topic
                        self._close_stores(name)
                        deleted[name] = old.topic_id
                    config = LogConfig.from_topic_configs(overrides.get(name, {}), self.default_config,
                                                          allow_internal=True)
                    info = TopicInfo(name, row["topic_id"], row["num_partitions"], config, config.override_dict())
                    old = None
                for prow in rows_of.get(name, []):
                    p, leader, epoch = prow["partition"], prow["leader"], prow["leader_epoch"]
                    info.replicas[p] = list(prow["replicas"])
                    was = info.leaders.get(p, NO_LEADER) if old is not None else NO_LEADER
                    was_epoch = info.leader_epochs.get(p, -1) if old is not None else -1
                    reopened = False
                    if leader == self.node_id:
                        store = self.plog.store(name, p)
                        if store is None or store.closed or store.offline is not None or store.leader_epoch != epoch:
                            # a store taken offline (a failed round) is opened again from the database;
                            # its coordinator reloads with it (a change, though leader and epoch are the same)
                            reopened = store is not None and store.offline is not None
                            try:
                                async with self.pool.acquire() as conn:
                                    await self.plog.open_partition(name, p, info.config, conn, info.topic_id)
                            except KafkaError as exc:  # moved again meanwhile: the next refresh sees it
                                log.warning("partition_open_failed", topic=name, partition=p, error=str(exc))
                                continue
                    else:
                        store = self.plog.stores.pop((name, p), None)
                        if store is not None:
                            store.depose(KafkaError(f"node {leader} leads {name}-{p} in epoch {epoch}",
                                                    ErrorCode.NOT_LEADER_OR_FOLLOWER))
                    info.leaders[p] = leader
                    info.leader_epochs[p] = epoch
                    if (was, was_epoch) != (leader, epoch) or reopened:
                        changes.append((name, p, was, leader, epoch))
                new[name] = info
            for name in set(self._topics) - set(new):
                self._close_stores(name)
                deleted[name] = self._topics[name].topic_id
            changed = bool(changes) or altered or set(new) != set(self._topics) or \
                [b.node_id for b in brokers] != [b.node_id for b in self.brokers] or controller != self.controller
            self._topics = new
            self.brokers = brokers
            self.controller = NO_LEADER if controller is None else controller
            if changed:
                self.topics_version += 1
            if deleted:  # before the leader changes: a new topic's partitions load after the old one's offsets went
                for deletion_listener in list(self.deletion_listeners):
                    deletion_listener(dict(sorted(deleted.items())))
            for change in changes:
                for listener in list(self.leader_listeners):
                    listener(*change)

    def _follow(self, info: TopicInfo, num_partitions: int, overrides: dict[str, str]) -> bool:
        """Bring a known topic's image to the database's partition count and overrides (another node's
        CreatePartitions or config change); True if either changed."""
        altered = info.num_partitions != num_partitions
        info.num_partitions = num_partitions
        if overrides != info.overrides:
            config = LogConfig.from_topic_configs(overrides, self.default_config, allow_internal=True)
            info.config, info.overrides = config, config.override_dict()
            for (topic, _), store in self.plog.stores.items():
                if topic == info.name:
                    store.config = config
            altered = True
        return altered

    def _close_stores(self, name: str) -> None:
        """The topic is gone (deleted, or deleted and created again): its open partitions close, their
        uncommitted appends answered NOT_LEADER_OR_FOLLOWER."""
        for (topic, p), store in list(self.plog.stores.items()):
            if topic == name:
                del self.plog.stores[(topic, p)]
                store.depose(None)

    # --- partitions -----------------------------------------------------------------------------------

    def store(self, topic: str, partition: int) -> PostgresPartitionStore | None:
        store = self.plog.store(topic, partition)
        return None if store is None or store.closed else store

    loaded_store = store

    def has_partition(self, topic: str, partition: int) -> bool:
        info = self._topics.get(topic)
        return info is not None and 0 <= partition < info.num_partitions

    def partition_size(self, topic: str, partition: int) -> int | None:
        if not self.has_partition(topic, partition):
            return None
        store = self.store(topic, partition)
        return store.size_bytes if store is not None else 0

    async def run_maintenance(self, now_ms: int) -> int:
        """Retention of the partitions this node leads (retention.py): how many moved their log start."""
        if self.plog.fenced():
            return 0
        return apply_retention(list(self.plog.stores.values()), now_ms)

    async def compact_dirty(self, now_ms: int) -> int:
        """Compaction of the partitions this node leads that need it (compaction.py): how many batches
        changed."""
        done = 0
        for store in list(self.plog.stores.values()):
            if store.config.compact and not store.resident and not store.closed:
                # made compact while this node leads it: its log is read back whole first
                try:
                    await store.hold_whole()
                except Exception as exc:  # noqa: BLE001 - the database's: tried again at the next pass
                    log.warning("partition_read_back_failed", topic=store.topic, partition=store.partition,
                                error=repr(exc))
                    continue
            if not self.plog.fenced() and needs_cleaning(store, now_ms):
                done += await compact_store(store, now_ms)
        return done

    def wake_cleaner(self) -> None:
        self._wake_cleaner.set()

    async def run_cleaner(self, backoff_ms: Callable[[], int]) -> None:
        """The cleaner's loop: compact what needs it, then sleep the backoff (read each round: a
        dynamic broker config) or until woken."""
        while True:
            try:
                await self.compact_dirty(self.clock.wall_ms())
            except Exception:
                log.exception("log_cleaner_failed")
            self._wake_cleaner.clear()
            try:
                await asyncio.wait_for(self._wake_cleaner.wait(), backoff_ms() / 1000)
            except TimeoutError:
                pass

    def set_default_config(self, default: LogConfig) -> None:
        """New broker-wide topic defaults: each topic's config is its overrides over them (the storage
        port's: the dynamic broker configs the database holds changed, broker/postgres_node.py)."""
        self.default_config = default
        for info in self._topics.values():
            info.config = LogConfig.from_topic_configs(info.overrides, default, allow_internal=True)
        for (topic, _), store in self.plog.stores.items():
            store.config = self._topics[topic].config if topic in self._topics else store.config
        self.topics_version += 1

    def close(self) -> None:
        pass  # the node's wiring closes the writer and the pool (asynchronously)

    def logs(self) -> list[Any]:
        return []  # no segment logs (the metrics and the transactions' recovery ask)

    def dormant_partitions(self) -> dict[Any, Any]:
        return {}

    # --- the topic records ----------------------------------------------------------------------------

    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def _new_topic(self, name: str, num_partitions: int, configs: dict[str, str], allow_internal: bool) -> LogConfig:
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        if num_partitions < 1:
            raise KafkaError(f"number of partitions must be at least 1, not {num_partitions}",
                             ErrorCode.INVALID_PARTITIONS)
        return LogConfig.from_topic_configs(configs, self.default_config, allow_internal=allow_internal)

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None = None,
                     *, validate_only: bool = False, allow_internal_configs: bool = False,
                     replicas: dict[int, list[int]] | None = None) -> TopicInfo:
        """Started in the background: LEADER_NOT_AVAILABLE until the image has it."""
        self._new_topic(name, num_partitions, configs, allow_internal_configs)
        if name not in self._creating:
            task = asyncio.get_running_loop().create_task(
                self.create_topic_async(name, num_partitions, configs, topic_id, replicas=replicas))
            self._creating[name] = task
            task.add_done_callback(lambda t: (self._creating.pop(name, None), t.cancelled() or t.exception()))
        raise KafkaError(f"topic {name!r} is being created", ErrorCode.LEADER_NOT_AVAILABLE)

    async def create_topic_async(self, name: str, num_partitions: int, configs: dict[str, str],
                                 topic_id: uuid.UUID | None = None, *, validate_only: bool = False,
                                 replicas: dict[int, list[int]] | None = None) -> TopicInfo:
        import asyncpg

        config = self._new_topic(name, num_partitions, configs, allow_internal=name.startswith("__"))
        placed = replicas or {p: [self.node_id] for p in range(num_partitions)}
        if validate_only:
            return TopicInfo(name, topic_id or uuid.uuid4(), num_partitions, config, config.override_dict(),
                             replicas=placed)
        try:
            async with self.pool.acquire() as conn:
                await metadata.create_topic(conn, name, placed, config.override_dict(),
                                            None if topic_id is None or topic_id.int == 0 else topic_id)
        except asyncpg.UniqueViolationError:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS) from None
        log.info("topic_created", topic=name, partitions=num_partitions, configs=config.override_dict())
        await self.refresh()
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(f"topic {name!r} was deleted meanwhile", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return info

    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return info

    async def add_partitions_async(self, name: str, new_total: int, *, validate_only: bool = False,
                                   replicas: dict[int, list[int]] | None = None) -> TopicInfo:
        """CreatePartitions: `replicas`, the catalogue's placement of the new partitions (as the
        controller places a new topic's), stored in one transaction (topics.py)."""
        info = self._require(name)
        old_total = info.num_partitions
        if new_total <= old_total:
            raise KafkaError(f"Topic currently has {old_total} partitions, which is higher than the requested "
                             f"{new_total}.", ErrorCode.INVALID_PARTITIONS)
        placed = replicas or {p: [self.node_id] for p in range(old_total, new_total)}
        if validate_only:
            return info
        async with self.pool.acquire() as conn:
            await topics.add_partitions(conn, name, info.topic_id, old_total, placed)
        log.info("partitions_added", topic=name, partitions=new_total)
        await self.refresh()
        return self._require(name)

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> TopicInfo:
        raise KafkaError("topic configs change asynchronously over PostgreSQL", ErrorCode.POLICY_VIOLATION)

    async def alter_topic_configs_async(self, name: str, configs: dict[str, str], *,
                                        validate_only: bool = False) -> TopicInfo:
        """Replace the topic's overrides with `configs`, validated as on one node (LogConfig); every
        node's DescribeConfigs reports them once its image has them."""
        info = self._require(name)
        config = LogConfig.from_topic_configs(configs, self.default_config,
                                              allow_internal="internal.segment.bytes" in info.overrides)
        if validate_only:
            return info
        async with self.pool.acquire() as conn:
            await topics.replace_configs(conn, name, info.topic_id, config.override_dict())
        log.info("topic_configs_altered", topic=name, configs=config.override_dict())
        await self.refresh()
        return self._require(name)

    def delete_topic(self, name: str) -> None:
        raise KafkaError("topics are deleted asynchronously over PostgreSQL", ErrorCode.POLICY_VIOLATION)

    async def delete_topic_async(self, name: str) -> None:
        """The topic's row, placement, configs and batches in one transaction (topics.py); its
        partitions close here now and on the other nodes at their next refresh."""
        info = self._require(name)
        async with self.pool.acquire() as conn:
            await topics.delete_topic(conn, name, info.topic_id)
        log.info("topic_deleted", topic=name, topic_id=str(info.topic_id))
        await self.refresh()

    def write_topic_record(self, info: TopicInfo) -> None:
        raise KafkaError("leaders move by the controller's elections in the database",
                         ErrorCode.POLICY_VIOLATION)
