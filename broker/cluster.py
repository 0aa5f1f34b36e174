"""Several brokers in one process (issue 41, `kbroker serve --nodes N`): the nodes, and the
controls that stop, start and move them.

Node k has id `--node-id` + k and its own listeners, each on its port + k (advertised likewise);
its handlers see a `Node` as their broker: the process's services, with the node's id, its
addresses and a partition service answering for it (NOT_LEADER_OR_FOLLOWER where another node
leads). The data is the one local log; who leads what is the catalogue's
(broker/partitions/cluster_catalogue.py), the coordinator check is broker/apis/coordinator_routes.py.

`Cluster` is the controls' one owner (the Python API for tests; the HTTP test controls and
`kbroker test cluster ...` call it): stop a node (its listeners close, its connections drop, its
leaderships move to an in-sync replica with an epoch bump, ISRs shrink), start it again (the same
ports; ISRs grow back; leaderless partitions get their leader back), move a partition's leader,
shuffle every leader, move a group's coordinator. Each is one `cluster_control` event. When a
`__consumer_offsets` partition changes leader its groups move as in a coordinator failover: the
partition is unloaded (parked requests answer NOT_COORDINATOR, timers stop) and loaded again by
replaying its log, which re-arms the members' session timers, before the new node serves it. A
`__transaction_state` partition's transactional ids move the same way (unloaded, replayed; the
markers of a transaction left prepared are sent again by the new shard).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import structlog

from . import cluster_meta
from .coordinators.offsets_topic import TOPIC as OFFSETS_TOPIC
from .network.server import KafkaServer
from .partitions.catalogue import NO_LEADER

if TYPE_CHECKING:
    from .app import Broker
    from .partitions.cluster_catalogue import ClusterCatalogue

log = structlog.get_logger("kbroker.cluster")
TRANSACTION_STATE_TOPIC = "__transaction_state"  # coordinators/transactions.TOPIC, not imported before its first use


class Node:
    """What the handlers of one node see as their broker (broker/services.py's BrokerServices)."""

    def __init__(self, broker: Broker, index: int) -> None:
        self._broker = broker
        self.index = index
        self.node_id = broker.node_id + index
        self.listeners = broker.listeners.for_node(index)
        # shared by every node
        self.config = broker.config
        self.cluster_id = broker.cluster_id
        self.data_dir = broker.data_dir
        self.clock = broker.clock
        self.router = broker.router
        self.catalogue = broker.catalogue
        self.fetch_sessions = broker.fetch_sessions
        self.fetch_purgatory = broker.fetch_purgatory
        self.unread_answers = broker.unread_answers
        self.quotas = broker.quotas
        self.observations = broker.observations
        self.partition_faults = broker.partition_faults
        self.explicit_settings = broker.explicit_settings
        # this node's own
        self.partitions = broker.partitions.for_node(self.node_id)
        self.servers: list[KafkaServer] = []
        self.requests: Counter[int] = Counter()  # API key -> requests this node was sent
        self.cut_off: set[str] = set()  # client ids whose connections to this node close

    def __getattr__(self, name: str) -> Any:
        # Everything not named above is the process's, shared by every node (the Kafka release a
        # --kafka-version answers as, client telemetry, and what later services add): a service added
        # to BrokerServices reaches every node without an edit here; what is a node's own is set above.
        return getattr(self._broker, name)

    def watch(self, api_key: int, client_id: str | None) -> bool:
        """Each request of this node's servers: counted; True when its client is cut off from this node."""
        self.requests[api_key] += 1
        return bool(self.cut_off) and (client_id or "") in self.cut_off

    @property
    def coordinator(self) -> Any:
        return self._broker.coordinator

    @property
    def transactions(self) -> Any:
        return self._broker.transactions

    @property
    def security(self) -> Any:
        return self._broker.security

    @property
    def security_if_built(self) -> Any:
        return self._broker.security_if_built

    @property
    def up(self) -> bool:
        return self.node_id in self.catalogue.live_nodes

    def advertised(self, listener: str) -> tuple[str, int]:
        endpoint = self.listeners.advertised_for(listener)
        return endpoint.host, endpoint.port

    def http_endpoint(self, listener: str) -> str | None:
        return self._broker.http_endpoint(listener)

    def brokers(self, listener: str) -> list[tuple[int, str, int]]:
        return self._broker.brokers(listener)

    def node_endpoint(self, node: int, listener: str) -> tuple[str, int] | None:
        return self._broker.node_endpoint(node, listener)

    async def auto_create_topic(self, name: str) -> Any:
        return await self._broker.auto_create_topic(name)


class Cluster:
    """The nodes of one process and the controls over them."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.catalogue: ClusterCatalogue = broker.catalogue  # type: ignore[assignment]
        self.nodes = [Node(broker, k) for k in range(broker.config.nodes)]
        self._by_id = {node.node_id: node for node in self.nodes}
        # (coordinator topic, partition) -> the task moving its coordinator (unload, then reload)
        self._moves: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.catalogue.leader_listeners.append(self._on_leader_change)

    def node(self, node_id: int) -> Node:
        node = self._by_id.get(node_id)
        if node is None:
            raise ClusterControlError(f"no node {node_id} (nodes {sorted(self._by_id)})")
        return node

    # --- what clients are told ----------------------------------------------------------------------

    def brokers(self, listener: str) -> list[tuple[int, str, int]]:
        live = self.catalogue.live_nodes
        return [(node.node_id, *node.advertised(listener)) for node in self.nodes if node.node_id in live]

    def node_endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        node = self._by_id.get(node_id)
        if node is None or node_id not in self.catalogue.live_nodes:
            return None
        return node.advertised(listener)

    # --- leaders moving -----------------------------------------------------------------------------

    def _on_leader_change(self, topic: str, partition: int, old: int, new: int, epoch: int) -> None:
        # a parked fetch of the partition answers now (NOT_LEADER_OR_FOLLOWER on the old leader)
        self.broker.fetch_purgatory.notify(topic, partition)
        if old == new:
            return
        if topic == OFFSETS_TOPIC and self.broker.coordinator_if_built is not None:
            move = self._move_groups
        elif topic == TRANSACTION_STATE_TOPIC and self.broker.transactions_if_built is not None:
            move = self._move_transactions
        else:
            return
        previous = self._moves.get((topic, partition))
        self._moves[(topic, partition)] = asyncio.get_running_loop().create_task(
            after_previous(previous, move(partition, new), topic, partition, new),
            name=f"coordinator-move-{topic}-{partition}")

    async def _move_groups(self, partition: int, new: int) -> None:
        await move_groups(self.broker, partition, led=new != NO_LEADER)

    async def _move_transactions(self, partition: int, new: int) -> None:
        """The same for a __transaction_state partition (broker/coordinators/transactions.py)."""
        transactions = self.broker.transactions_if_built
        if transactions is not None:
            await transactions.move_partition(partition, led=new != NO_LEADER)

    async def settled(self) -> None:
        """Return once every coordinator move under way has loaded."""
        while self._moves:
            tasks = list(self._moves.values())
            await asyncio.gather(*tasks, return_exceptions=True)
            for partition, task in list(self._moves.items()):
                if task.done():
                    del self._moves[partition]

    # --- the controls -------------------------------------------------------------------------------

    async def stop_node(self, node_id: int) -> dict:
        node = self.node(node_id)
        if not node.up:
            return _event("stop_node", node=node_id, detail=f"node {node_id} is already down")
        if len(self.catalogue.live_nodes) == 1:
            raise ClusterControlError(f"node {node_id} is the last node up")
        moved = self.catalogue.stop_node(node_id)
        await asyncio.gather(*(server.shutdown(0.0) for server in node.servers))
        await self.settled()
        return _event("stop_node", node=node_id, leaders_moved=len(moved),
                      detail=f"node {node_id} stopped; {len(moved)} leadership(s) moved")

    async def start_node(self, node_id: int) -> dict:
        node = self.node(node_id)
        if node.up:
            return _event("start_node", node=node_id, detail=f"node {node_id} is already up")
        for server in node.servers:
            await server.restart()
        moved = self.catalogue.start_node(node_id)
        await self.settled()
        return _event("start_node", node=node_id, leaders_moved=len(moved),
                      detail=f"node {node_id} started; {len(moved)} leaderless partition(s) led again")

    async def move_leader(self, topic: str, partition: int, node_id: int | None = None) -> dict:
        """The partition's leader moves to `node_id` (None: the next in-sync replica)."""
        info = self.catalogue.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            raise ClusterControlError(f"no partition {topic}-{partition}")
        old = self.catalogue.leader(info, partition)
        if node_id is None:
            isr = [r for r in self.catalogue.replicas(info, partition) if r in self.catalogue.live_nodes]
            others = [r for r in isr if r != old]
            if not others:
                raise ClusterControlError(f"{topic}-{partition} has no other in-sync replica (ISR {isr})")
            node_id = others[0]
        epoch = self.catalogue.elect(topic, partition, node_id)
        await self.settled()
        return _event("move_leader", topic=topic, partition=partition, leader=node_id, previous_leader=old,
                      leader_epoch=epoch, detail=f"{topic}-{partition} led by node {node_id} in epoch {epoch}")

    async def shuffle(self, seed: int | None = None) -> dict:
        moved = self.catalogue.shuffle(random.Random(seed))
        await self.settled()
        return _event("shuffle", leaders_moved=len(moved), detail=f"{len(moved)} leadership(s) moved")

    async def elect_preferred(self) -> dict:
        moved = self.catalogue.elect_preferred()
        await self.settled()
        return _event("elect_preferred", leaders_moved=len(moved),
                      detail=f"{len(moved)} partition(s) back to their preferred leader")

    async def rebalance_leaders(self, interval_s: float) -> None:
        """auto.leader.rebalance.enable: every `interval_s` (leader.imbalance.check.interval.seconds),
        each partition whose preferred replica is in sync but does not lead goes back to it, as Kafka's
        controller balances them (QuorumController's maybeBalancePartitionLeaders), so leaders return
        to a node that stopped and started again. One `leader_rebalance` event per check that moved any."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                if self.catalogue.imbalanced():
                    moved = self.catalogue.elect_preferred()
                    log.info("leader_rebalance", leaders_moved=len(moved),
                             partitions=[f"{t}-{p}" for t, p, _ in moved][:50])
                    await self.settled()
            except Exception:
                log.exception("leader_rebalance_failed")

    async def move_coordinator(self, group_id: str, node_id: int | None = None) -> dict:
        """The group's coordinator moves: its __consumer_offsets partition's leader does (every group
        of that partition moves with it, as in Kafka)."""
        from ..coordinator.partitioning import partition_for

        info = self.catalogue.topic(OFFSETS_TOPIC)
        if info is None:
            raise ClusterControlError(f"{OFFSETS_TOPIC} does not exist yet")
        partition = partition_for(group_id, info.num_partitions)
        result = await self.move_leader(OFFSETS_TOPIC, partition, node_id)
        return _event("move_coordinator", group=group_id, partition=partition, coordinator=result["leader"],
                      leader_epoch=result["leader_epoch"],
                      detail=f"group {group_id} coordinated by node {result['leader']}")

    async def add_node(self) -> dict:
        """A new node, id and ports one past the last (Kafka's new broker joining): up at once, in
        Metadata and placements from now on, holding no replica until a topic is placed or reassigned
        on it. Kept in the data directory (cluster_meta.NODES_FILE): a restart serves it again."""
        index = len(self.nodes)
        node = Node(self.broker, index)
        node.servers = self.broker.node_servers(node)
        template = self.nodes[0].servers
        started: list[KafkaServer] = []
        try:
            for server, like in zip(node.servers, template):
                server.observer, server.slots, server.unread = like.observer, like.slots, like.unread
                server.disconnect_listeners = like.disconnect_listeners
                await server.start()
                started.append(server)
        except OSError as e:
            for server in started:
                await server.shutdown(0.0)
            raise ClusterControlError(f"node {node.node_id} cannot listen: {e}") from None
        self.nodes.append(node)
        self._by_id[node.node_id] = node
        self.broker.servers += node.servers
        self.catalogue.add_node(node.node_id)
        cluster_meta.store_node_count(self.broker.data_dir, len(self.nodes))
        listeners = {e.name: f"{e.host}:{e.port}" for e in node.listeners.bind}
        return _event("add_node", node=node.node_id, listeners=listeners,
                      detail=f"node {node.node_id} added on {', '.join(listeners.values())}")

    def cut_off(self, node_id: int, client_id: str, cut: bool = True) -> dict:
        """Cut one client (by client id) off from one node, as a network partition between them: its
        connections to the node close now and every request it sends there closes the connection;
        `cut=False` mends it. Other clients and other nodes are untouched."""
        node = self.node(node_id)
        if not cut:
            node.cut_off.discard(client_id)
            return _event("restore_client", node=node_id, client_id=client_id,
                          detail=f"client {client_id!r} reaches node {node_id} again")
        node.cut_off.add(client_id)
        dropped = sum(server.drop_connections(client_id) for server in node.servers)
        return _event("cut_off_client", node=node_id, client_id=client_id, connections_closed=dropped,
                      detail=f"client {client_id!r} cut off from node {node_id}")

    def request_counts(self) -> dict:
        """Per node, the requests it was sent by API (as kfake's ObserveRequests would see them)."""
        from ..protocol.messages import MODULES

        names = {key: name.removesuffix("Request") for _, name, kind, key in MODULES if kind == "request"}
        return {"nodes": [{"node_id": node.node_id, "total": sum(node.requests.values()),
                           "requests": {names.get(k, str(k)): n for k, n in sorted(node.requests.items())}}
                          for node in self.nodes]}

    def describe(self) -> dict:
        live = self.catalogue.live_nodes
        return {"controller": self.catalogue.controller, "nodes": [
            {"node_id": node.node_id, "up": node.node_id in live, "requests": sum(node.requests.values()),
             "cut_off_clients": sorted(node.cut_off),
             "listeners": {e.name: f"{e.host}:{e.port}" for e in node.listeners.bind},
             "leaders": sum(1 for info, p in self.catalogue.partitions()
                            if self.catalogue.leader(info, p) == node.node_id)}
            for node in self.nodes]}


async def after_previous(previous: asyncio.Task[None] | None, move: Any, topic: str, partition: int,
                         new: int) -> None:
    """One coordinator move, after the partition's previous one (here and broker/postgres_node.py)."""
    if previous is not None:
        await asyncio.gather(previous, return_exceptions=True)
    started = time.monotonic()
    await move
    log.info("coordinator_moved", topic=topic, partition=partition, node=new,
             took_ms=round(1000 * (time.monotonic() - started), 1))


async def move_groups(broker: Broker, partition: int, led: bool) -> None:
    """The coordinator failover of one __consumer_offsets partition: unloaded, then (if `led`: this
    process's coordinator answers for its new leader) replayed from its log."""
    coordinator = broker.coordinator
    await coordinator.unload(partition)
    if led:
        coordinator.mark_loading([partition])
        await broker.offsets_topic.load_partition(coordinator, partition)


class ClusterControlError(ValueError):
    """A control that cannot apply (no such node, the last node up, no other in-sync replica): the
    HTTP controls answer it 400 (operations/test_controls.py takes any ValueError so)."""


def _event(control: str, **fields: Any) -> dict:
    log.info("cluster_control", control=control, **fields)
    return {"ok": True, "control": control, **fields}
