"""One node of a cluster over PostgreSQL (issue 44, `kbroker serve --cluster URL --node-id N`): the
wiring between the database and the broker of this process.

It opens the database (schema checked, broker registered with its lease), and runs three loops:
* the lease's renewal every RENEW_EVERY_S (the node fences itself by its own clock past the lease:
  membership.BrokerLease);
* the controller's: take or renew the controller lease, and while held, move the partitions of
  brokers whose lease expired (membership.move_lost_leaders) and, every
  leader.imbalance.check.interval.seconds with auto.leader.rebalance.enable, each partition back to
  its preferred replica where that one is live (membership.move_to_preferred), so a node that
  restarts leads again what it was given;
* the image's refresh (engine.PostgresEngine.refresh) when the database notifies a change of metadata
  (storage/postgres/notify.py) and every --cluster-poll-ms besides, which opens and deposes this node's partitions
  and tells the coordinators of leaders that moved: a `__consumer_offsets`, `__transaction_state` or
  `__share_group_state` partition is unloaded and, if this node leads it now, replayed from its log, as
  broker/cluster.py moves the first two for several nodes in one process (whose one share coordinator
  serves every node's); a data partition this node no longer leads drops its share-partitions here;
  and, in the same pass, the dynamic broker configs (this node's layer and the cluster-wide defaults in
  `broker_configs`, whose writes notify as well), adopted and applied when another node changed them,
  and the finalized feature levels (storage/postgres/features.py), adopted when their epoch moved.
Producer ids come from the database's blocks, a block fetched ahead so that InitProducerId (which asks
synchronously) finds one.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import structlog

from ..protocol.errors import ErrorCode, KafkaError
from .cluster import after_previous, move_groups
from .partitions.placement import preferred_leader_moves
from .storage.postgres import schema
from .storage.postgres.engine import PostgresEngine
from .storage.postgres.features import DatabaseLevels
from .storage.postgres.log import PostgresLog
from .storage.postgres.membership import (LEASE_MS, PRODUCER_ID_BLOCK, RENEW_EVERY_S, BrokerLease, ControllerLease, NodeIdTaken,
                                          leaderships, move_lost_leaders, move_to_preferred, take_producer_id_block)
from .storage.postgres.memory import ReadCache, TailBudget
from .storage.postgres.notify import MetadataListener, notify

if TYPE_CHECKING:
    from ..purgatory.clock import Clock
    from .config import BrokerConfig
    from .storage.log.config import LogConfig

log = structlog.get_logger("kbroker.cluster")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
CLUSTER_DEFAULT = -1  # broker_configs.node_id of the cluster-wide dynamic defaults


class PostgresNode:
    def __init__(self, config: BrokerConfig, cluster_id: str, lease: BrokerLease, engine: PostgresEngine,
                 pool: Any) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.node_id = config.node_id
        self.lease = lease
        self.engine = engine
        self.pool = pool
        self.controller = ControllerLease(pool, config.node_id)
        self._ids: deque[int] = deque()
        self._refilling: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._moves: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._changed = asyncio.Event()  # the metadata changed: read it now
        self._fence_lifted = False
        # auto.leader.rebalance.enable: the controller's next preferred-leader check (monotonic clock)
        self._next_balance = time.monotonic() + config.leader_imbalance_check_interval_seconds
        name = schema.application_name(config.node_id)
        self.listener = MetadataListener(lambda: schema.connect(config.cluster, name=name), self._changed.set)
        self.broker: Any = None
        # the dynamic broker configs (this node's layer, the cluster-wide defaults) as the database holds them
        self.broker_configs: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self._configs_lock = asyncio.Lock()
        self.feature_levels = DatabaseLevels(pool, ({}, 1))  # the cluster's, read at open and in each image pass

    @classmethod
    async def open(cls, config: BrokerConfig, endpoints: dict[str, str], default_config: LogConfig,
                   clock: Clock) -> PostgresNode:
        """Connect, check the schema, register; schema.ClusterDatabaseError (one line) when it cannot."""
        import asyncpg

        name = schema.application_name(config.node_id)  # the controller ends these sessions if we are lost
        lease_conn, cluster_id = await schema.open_cluster_database(config.cluster, name)
        try:
            log_conn = await schema.connect(config.cluster, name=name)
            pool = await asyncpg.create_pool(config.cluster, min_size=1, max_size=6, server_settings={
                "synchronous_commit": "on", "application_name": name})
        except BaseException:
            await lease_conn.close()
            raise
        lease = BrokerLease(lease_conn, config.node_id, endpoints)
        try:
            await lease.register()
        except NodeIdTaken as e:
            await lease_conn.close()
            await log_conn.close()
            await pool.close()
            raise schema.ClusterDatabaseError(str(e)) from None
        plog = PostgresLog(log_conn, config.node_id, fenced=lambda: lease.fenced,
                           reconnect=lambda: schema.connect(config.cluster, name=name),
                           budget=TailBudget(config.postgres_tail_bytes, config.postgres_memory_bytes),
                           cache=ReadCache(config.postgres_read_cache_bytes))
        engine = PostgresEngine(pool, plog, config.node_id, default_config, clock)
        node = cls(config, cluster_id, lease, engine, pool)
        node.broker_configs = await node._read_broker_configs()
        await node.feature_levels.read()
        await node._refill()
        await engine.refresh()
        return node

    # --- producer ids ---------------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        if len(self._ids) < PRODUCER_ID_BLOCK // 2 and self._refilling is None:
            self._refilling = asyncio.get_running_loop().create_task(self._refill(), name="producer-ids")
        if not self._ids:
            raise KafkaError("fetching a block of producer ids", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return self._ids.popleft()

    async def _refill(self) -> None:
        try:
            async with self.pool.acquire() as conn:
                first = await take_producer_id_block(conn, self.node_id)
            self._ids.extend(range(first, first + PRODUCER_ID_BLOCK))
        finally:
            self._refilling = None

    # --- the loops ------------------------------------------------------------------------------------

    def start(self, broker: Any) -> None:
        self.broker = broker
        self.engine.leader_listeners.append(self._on_leader_change)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._every(RENEW_EVERY_S, self._renew), name="broker-lease"),
                       loop.create_task(self._every(RENEW_EVERY_S, self._control), name="controller"),
                       loop.create_task(self._image(), name="cluster-image"),
                       loop.create_task(self._watch_fence(), name="lease-watch"),
                       loop.create_task(self.listener.run(), name="metadata-listener")]

    async def _every(self, interval_s: float, step: Any) -> None:
        while True:
            started = time.monotonic()
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the database away a while: the next turn retries
                log.warning("cluster_loop_failed", step=step.__name__, error=repr(exc))
            await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))

    async def _image(self) -> None:
        """Read the database into the image, and the dynamic broker configs, when told of a change
        (notify.py) and every poll interval (the safety net for a notification lost while not listening)."""
        poll_s = self.config.cluster_poll_ms / 1000
        while True:
            try:
                await asyncio.wait_for(self._changed.wait(), poll_s)
            except asyncio.TimeoutError:
                pass
            self._changed.clear()  # a notification during the refresh brings another one after it
            try:
                await self.engine.refresh()
                await self._follow_broker_configs()
                if self.broker is not None:  # another node's UpdateFeatures: a newer epoch is adopted
                    self.broker.features.follow(await self.feature_levels.read())
                if self._fence_lifted:
                    self._fence_lifted = False
                    self._reload_coordinators()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the database away a while: the next turn retries
                log.warning("cluster_loop_failed", step="refresh", error=repr(exc))
                await asyncio.sleep(min(poll_s, 0.5))

    async def _watch_fence(self, every_s: float = 0.1) -> None:
        """Say when this node fences itself (its lease may have expired by its own clock: it appends and
        leads nothing from then on, the database unreachable or too slow) and when a renewal brings it
        back (it rejoins: the controller gives it partitions again as others go)."""
        fenced = False
        while True:
            if self.lease.fenced != fenced:
                fenced = not fenced
                if fenced:
                    log.warning("broker_fenced", node=self.node_id, lease_ms=self.lease.lease_ms, lost=self.lease.lost)
                else:
                    log.info("broker_unfenced", node=self.node_id)
                    self._fence_lifted = True  # the image read again first, then the coordinators reloaded
                    self._changed.set()
            await asyncio.sleep(every_s)

    def _reload_coordinators(self) -> None:
        """The fence lifted: each `__consumer_offsets`, `__transaction_state` and `__share_group_state`
        partition this node still leads is unloaded and replayed from its log, as on a move. A
        coordinator's write refused while fenced took its partition offline, and with no move (the lease
        renewed before the controller acted: a short pause) nothing else would bring it back."""
        for topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC):
            info = self.engine.topic(topic)
            if info is None:
                continue
            for p, leader in info.leaders.items():
                if leader == self.node_id:
                    self._on_leader_change(topic, p, leader, leader, info.leader_epochs.get(p, 0))

    async def _renew(self) -> None:
        if self.lease.lost:
            return  # released (a controlled shutdown) or taken over: never renewed again
        if self.lease.conn.is_closed():  # the database restarted: a new connection, the same incarnation
            self.lease.conn = await schema.connect(self.config.cluster, name=schema.application_name(self.node_id))
            log.info("postgres_reconnected", node=self.node_id, purpose="lease")
        await self.lease.renew()

    async def _control(self) -> None:
        if self.lease.fenced or not await self.controller.acquire_or_renew():
            return
        async with self.pool.acquire() as conn:
            moved = await move_lost_leaders(conn)
            if not moved and self.config.auto_leader_rebalance_enable and time.monotonic() >= self._next_balance:
                self._next_balance = time.monotonic() + self.config.leader_imbalance_check_interval_seconds
                partitions, live = await leaderships(conn)
                moved = await move_to_preferred(conn, preferred_leader_moves(partitions, live))
        if moved:
            await self.engine.refresh()

    # --- dynamic broker configs -----------------------------------------------------------------------

    async def _read_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        rows = await self.pool.fetch("SELECT node_id, key, value FROM broker_configs WHERE node_id = ANY($1::integer[])",
                                     [self.node_id, CLUSTER_DEFAULT])
        node = {row["key"]: row["value"] for row in rows if row["node_id"] == self.node_id}
        return node, {row["key"]: row["value"] for row in rows if row["node_id"] == CLUSTER_DEFAULT}

    async def store_broker_configs(self, cluster_default: bool, layer: dict[str, str]) -> None:
        """One layer of dynamic broker configs, replaced whole in one transaction (checked by the caller,
        broker/dynamic_configs.py); the other nodes are notified as it commits and follow it at once."""
        owner = CLUSTER_DEFAULT if cluster_default else self.node_id
        async with self._configs_lock, self.pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM broker_configs WHERE node_id = $1", owner)
            await conn.executemany("INSERT INTO broker_configs (node_id, key, value) VALUES ($1, $2, $3)",
                                   [(owner, k, v) for k, v in sorted(layer.items())])
            await notify(conn, f"dynamic broker configs of {'the cluster' if cluster_default else self.node_id} replaced")
            self.broker_configs = (self.broker_configs[0], dict(layer)) if cluster_default else \
                (dict(layer), self.broker_configs[1])

    async def _follow_broker_configs(self) -> None:
        """Another node changed the cluster-wide defaults (or this node's layer, through its id): adopt
        them as this node's dynamic configs and apply them."""
        async with self._configs_lock:  # not a read from before this node's own change
            layers = await self._read_broker_configs()
            if layers == self.broker_configs or self.broker is None:
                return
            self.broker_configs = layers
        try:
            changed = self.broker.dynamic_configs.adopt(*layers)
        except KafkaError as exc:  # a value this node cannot take (another kbroker's): it keeps its own
            log.error("dynamic_broker_configs_not_adopted", error=str(exc))
            return
        if changed:
            self.broker.apply_dynamic_configs()

    def _on_leader_change(self, topic: str, partition: int, old: int, new: int, epoch: int) -> None:
        broker = self.broker
        broker.fetch_purgatory.notify(topic, partition)
        led = new == self.node_id
        # The image names this node from now on, so the coordinator APIs' routing sends it the partition's
        # groups (transactional ids) at once, while the move below waits its turn. Until the move has
        # replayed the partition, the shard this process holds for it (an empty one, or one from an
        # earlier leadership) must not answer: COORDINATOR_LOAD_IN_PROGRESS, which clients retry. A
        # group's committed offsets read -1001 on a new coordinator otherwise (test_postgres_admin.py).
        if topic == OFFSETS_TOPIC and (led or broker.coordinator_if_built is not None):
            # A coordinator not built yet (no group came here) is built now: otherwise its first group
            # request would build it with every partition empty (app.py: the start found nothing to
            # replay), while this partition holds what another node's coordinator wrote.
            coordinator = broker.coordinator
            if led:
                coordinator.mark_loading([partition])
            move = move_groups(broker, partition, led)
        elif topic == TRANSACTION_STATE_TOPIC and (transactions := broker.transactions_if_built) is not None:
            if led:
                transactions.coordinator.mark_loading([partition])
            move = transactions.move_partition(partition, led=led)
        elif topic == SHARE_STATE_TOPIC and (led or broker.share_state_if_built is not None):
            # The share coordinator, built now if need be for the same reason as the group coordinator:
            # built later it would find the topic there and load nothing.
            state = broker.share_state
            state.serve()
            if led:
                state.runtime.mark_loading([partition])
            move = state.move_partition(partition, led=led)
        else:
            if old == self.node_id and not led and (shares := broker.share_partitions_if_built) is not None:
                shares.leadership_lost(topic, partition)  # its share-partitions start again on the new leader
            return
        previous = self._moves.get((topic, partition))
        self._moves[(topic, partition)] = asyncio.get_running_loop().create_task(
            after_previous(previous, move, topic, partition, new), name=f"coordinator-move-{topic}-{partition}")

    async def hand_over(self, timeout_s: float = 2 * LEASE_MS / 1000) -> int:
        """A controlled shutdown (SIGTERM), before the listeners close: this node's broker lease (and the
        controller lease, if held) end now, so it appends nothing more and another node's controller
        moves its partitions at its next pass; returns, within `timeout_s`, once the database shows
        none led here (the partitions left: a node alone keeps them, leaderless until one starts)."""
        started = time.monotonic()
        renewing = self._tasks[:2]  # the lease's and the controller's loops (the image's goes on)
        for task in renewing:
            task.cancel()
        await asyncio.gather(*renewing, return_exceptions=True)
        try:
            await self.lease.release()
            await self.pool.execute("UPDATE controller_lease SET lease_expires = statement_timestamp() "
                                    "WHERE node_id = $1", self.node_id)
            left = -1
            while time.monotonic() - started < timeout_s:
                left = await self.pool.fetchval("SELECT count(*) FROM partitions WHERE leader = $1", self.node_id)
                if left == 0:
                    break
                await asyncio.sleep(0.2)
        except Exception as exc:  # noqa: BLE001 - the database away: the lease expires by itself
            log.warning("controlled_shutdown_failed", error=repr(exc))
            return -1
        log.info("controlled_shutdown", node=self.node_id, partitions_left=left,
                 took_ms=round(1000 * (time.monotonic() - started), 1))
        return left

    def brokers(self, listener: str) -> list[tuple[int, str, int]]:
        out = []
        for broker in self.engine.brokers:
            endpoint = broker.endpoints.get(listener)
            if endpoint is not None:
                host, _, port = endpoint.rpartition(":")
                out.append((broker.node_id, host.strip("[]"), int(port)))
        return out

    def node_endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        return next(((host, port) for n, host, port in self.brokers(listener) if n == node_id), None)

    async def close(self) -> None:
        """A clean stop: the loops end, the round in hand commits, the lease is released (the
        controller moves this node's partitions at once), the connections close."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._moves.values(), return_exceptions=True)
        await self.engine.plog.close()
        if not self.lease.lost:
            try:
                await self.lease.release()
            except Exception as exc:  # noqa: BLE001 - the lease then expires by itself
                log.warning("broker_lease_release_failed", error=repr(exc))
        for conn in (self.engine.plog.conn, self.lease.conn):
            await conn.close()
        await self.pool.close()
