"""The broker process: wires configuration, storage, the coordinator and the server together."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence
from pathlib import Path

import structlog

from . import cluster_meta
from .config import BrokerConfig, parse_host_port
from .coordinators.offsets_topic import TOPIC as OFFSETS_TOPIC
from .coordinators.offsets_topic import OffsetsTopic
from ..protocol import compression
from ..protocol.kafka_releases import LATEST, kafka_release
from ..protocol.errors import ErrorCode, KafkaError
from .network.server import KafkaServer
from .routing import CLIENT_TELEMETRY_APIS, build_router
from .startup import Prepared, prepare
from .partitions.internal_topics import Refused, repair_configs
from .partitions.startup_topics import ensure_topics, parse_create_topics

if TYPE_CHECKING:
    from .cluster import Cluster
    from .postgres_node import PostgresNode
    from ..coordinator.groups.service import GroupCoordinatorService
    from .operations.client_telemetry import ClientTelemetry
    from .services import BrokerServices
    from .security.service import Security
    from .coordinators.transactions import TransactionService
    from .coordinators.share_partitions import SharePartitionManager
    from .coordinators.share_state import ShareStateLog
    from .group_configs import GroupConfigStore
    from .operations.features import FinalizedFeatures

log = structlog.get_logger("kbroker.broker")

TRANSACTION_STATE_TOPIC = "__transaction_state"  # transactions.TOPIC, without importing it
CONNECTIONS_SUMMARY_S = 60.0


class Broker:
    def __init__(self, config: BrokerConfig, prepared: Prepared | None = None,
                 explicit_settings: frozenset[str] = frozenset(), postgres: PostgresNode | None = None) -> None:
        from .storage.log.manager import LogManager
        from .topic_defaults import log_config

        if config.dev_security:  # its SSL and SASL_SSL listeners (the module only with the flag)
            from .security.dev_security import configure as configure_dev_security

            config = configure_dev_security(config)
        self.config = config
        self.explicit_settings = explicit_settings  # the settings a flag, variable or file set (DescribeConfigs)
        # the checked data directory, its lock and the bound listener sockets (broker/startup.py)
        self.prepared = prepared if prepared is not None else prepare(config)
        self.listeners = config.listener_set()
        self.data_dir = Path(config.data_dir)
        self.cluster_id, self.node_id = cluster_meta.load_or_create(self.data_dir, config.node_id, config.cluster_id)
        grown = cluster_meta.stored_node_count(self.data_dir)  # nodes added at run time (`kbroker test node-add`)
        if grown is not None and grown > config.nodes:
            log.info("cluster_nodes_restored", nodes=grown, configured=config.nodes,
                     detail=f"{grown - config.nodes} node(s) added at run time are served again")
            config = self.config = dataclasses.replace(config, nodes=grown)
        compression.set_inflated_bound(config.max_inflated_batch_bytes)  # for every reader of batches
        # the Kafka release this broker answers as (--kafka-version; else 4.4's table, older versions served)
        self.kafka_release = kafka_release(config.kafka_version or LATEST)
        # client telemetry (KIP-714, Kafka 3.7+): with --client-metrics only (broker/operations/client_telemetry.py)
        self.client_telemetry: ClientTelemetry | None = None
        advertised = dict(self.kafka_release.apis)
        if config.client_metrics and self.kafka_release.version >= (3, 7):
            from .operations.client_telemetry import ClientTelemetry

            self.client_telemetry = ClientTelemetry(config.client_metrics_interval_ms, config.telemetry_max_bytes)
            advertised.update(CLIENT_TELEMETRY_APIS)
        self.router = build_router(acl_checks=bool(config.authorizer_class_name),
                                   without=frozenset() if self.client_telemetry else frozenset(CLIENT_TELEMETRY_APIS))
        self.router.limit_to(advertised, strict=bool(config.kafka_version))
        from .operations.observe import Observations, all_servers
        from .operations.request_log import RequestLog

        self.observations = Observations()
        from ..purgatory.clock import Clock, SystemClock

        # The broker's one time source: the logs (segment times), the timers and the data-path handlers.
        self.clock: Clock = SystemClock()
        fsync: Callable[[int], None] = self.observations.timed_fsync
        self.fsync_gate = None  # --test-controls can hold the segments' fsyncs (operations/test_controls.py)
        if config.test_controls:
            from .operations.test_controls import FsyncGate

            fsync = self.fsync_gate = FsyncGate(fsync)
        from .dynamic_configs import DynamicBrokerConfigs  # the topics' defaults are the settings with these over
        self.dynamic_configs = DynamicBrokerConfigs(self.data_dir, config,
                                                    layers=postgres.broker_configs if postgres is not None else None)
        # --cluster: a node of a cluster over PostgreSQL (broker/postgres_node.py), whose log is the database's
        self.postgres = postgres
        self.logs: Any = postgres.engine if postgres is not None else LogManager(
            self.data_dir, log_config(self.dynamic_configs.effective()), config.flush,
            max_partitions=config.max_partitions, max_open_files=config.log_max_open_files or None, fsync=fsync,
            clock=self.clock)
        # security: credentials, ACLs, and TLS/SASL per listener (broker/security/); see `security`
        self._security: Security | None = None
        self.dev_security = None
        if config.dev_security:
            from .security.dev_security import DevSecurity

            self.dev_security = DevSecurity.create(config)
        if self.dev_security is not None or config.authorizer_class_name or any(
                e.security_protocol != "PLAINTEXT" for e in self.listeners.bind):
            self._build_security()
        self.cluster: Cluster | None = None  # several nodes (--nodes N): built below with the catalogue
        self.servers = self._servers(self, self.listeners, "") if config.nodes == 1 else []
        if self._security is not None:  # a TLS listener's keystore, reloaded by a dynamic broker config
            self.dynamic_configs.add_reconfigurable(self._security.keystores.prepare)
        from .network.fd_budget import ConnectionSlots, connection_limit
        from .storage.log.files import FILES

        from .network.unread_answers import UnreadAnswers

        self.connection_slots = ConnectionSlots(connection_limit(FILES.capacity))
        self.unread_answers = UnreadAnswers(config.fetch_max_bytes)
        self.admin_http = None
        self.admin_port: int | None = None
        self.partition_faults = None  # test controls only (broker/operations/test_controls.py)
        if config.test_controls:
            from .operations.test_controls import PartitionFaults

            self.partition_faults = PartitionFaults()
        if config.metrics_listen:
            from .operations.admin_http import AdminHttpServer
            from .security.http_guard import HttpGuard

            admin_host, admin_port = parse_host_port(config.metrics_listen)
            self.admin_http = AdminHttpServer(self, admin_host, admin_port, test_controls=config.test_controls,
                                              guard=HttpGuard(admin_host, config.metrics_allowed_hosts,
                                                              self._test_controls_token()))
        self._background: list[asyncio.Task] = []
        self._topics_image_cache: tuple[int, Any] | None = None  # (topics_version, image): see _topics_image
        # data path: the broker's one timer driver, long-poll fetches, fetch sessions, idempotent producers
        from .apis.fetch_sessions import FetchSessionManager
        from .storage.producer_state import ProducerStateManager
        from ..purgatory.delayed_fetch import FetchPurgatory
        from ..purgatory.timers import KeyedTimers

        self.timers = KeyedTimers(self.clock)
        self.fetch_purgatory = FetchPurgatory(self.timers)
        self.fetch_sessions = FetchSessionManager()
        # the storage engine's producer snapshots and producer-id blocks (its files; handlers see neither)
        self.producer_states: ProducerStateManager | None = None
        if isinstance(self.logs, LogManager):
            self.producer_states = ProducerStateManager(self.logs, self.data_dir, clock=self.clock,
                                                        expiration_ms=self.dynamic_configs.producer_id_expiration_ms)
        # what handlers and coordinators see of the data: the topics, and the partitions' one append
        # and read path (broker/partitions/)
        from .partitions.catalogue import TopicCatalogue
        from .partitions.service import PartitionService

        self.catalogue: TopicCatalogue
        if postgres is not None:
            from .partitions.postgres_catalogue import PostgresCatalogue

            self.catalogue = PostgresCatalogue(postgres.engine, self.node_id, postgres.allocate_producer_id,
                                               lambda: postgres.lease.fenced,
                                               default_replication_factor=config.default_replication_factor)
            if postgres.broker_configs != ({}, {}):  # the topics' defaults with the database's dynamic configs
                self.apply_dynamic_configs()
        elif config.nodes == 1:
            assert self.producer_states is not None
            self.catalogue = TopicCatalogue(self.logs, self.node_id, self.producer_states.ids)
        else:
            from .partitions.cluster_catalogue import ClusterCatalogue

            assert self.producer_states is not None
            self.catalogue = ClusterCatalogue(self.logs, [self.node_id + k for k in range(config.nodes)],
                                              self.producer_states.ids,
                                              default_replication_factor=config.default_replication_factor)
        repair_configs(self.catalogue)  # before retention first runs: an older kbroker let them lose their policy
        # the coordinators' path (node None: they write as whichever node leads their partition)
        self.partitions = PartitionService(self.logs, self.catalogue, purgatory=self.fetch_purgatory,
                                           observations=self.observations, clock=self.clock,
                                           faults=self.partition_faults)
        from .operations.quotas import ClientQuotas

        self.quotas = ClientQuotas(self.data_dir)
        if config.nodes > 1:
            self._build_cluster()
        elif postgres is not None:  # the coordinator check on the routes, as for several nodes
            from .apis import coordinator_routes

            self.router.wrap_routes(coordinator_routes.checked)
        # told of each closed connection (the share sessions' end): every listener's server shares this list
        self.disconnect_listeners: list[Callable[[str], None]] = []
        request_log = RequestLog() if config.log_requests else None  # Kafka's kafka.request.logger at DEBUG
        for server in all_servers(self):
            server.observer = self.observations
            server.request_log = request_log
            server.slots = self.connection_slots
            server.unread = self.unread_answers
            server.disconnect_listeners = self.disconnect_listeners
        # the group coordinator: per-group actors over pure state machines, persisted in __consumer_offsets;
        # built with its first use (the `coordinator` property)
        self.offsets_topic = OffsetsTopic(self.partitions, config.offsets_topic_num_partitions)
        self.offsets_topic.adopt_existing()  # a first start creates it in start(), while serving
        self.seed_topics = parse_create_topics(config.create_topics, "--create-topics")
        ensure_topics(self.catalogue, self.seed_topics)
        self._coordinator: GroupCoordinatorService | None = None
        self._started = False
        # Set when the start-up load found nothing stored in __consumer_offsets: a coordinator built
        # later has nothing to replay and serves at once.
        self._offsets_hold_nothing = False
        from .operations.history_file import RebalanceHistoryFile

        self.history_file = RebalanceHistoryFile(self.data_dir)
        # the transaction coordinator, persisted in __transaction_state: built with the first use
        # (the `transactions` property), or at start() when that topic exists
        self._transactions: TransactionService | None = None
        self._share_partitions: SharePartitionManager | None = None
        self._share_state: ShareStateLog | None = None
        self._group_configs: GroupConfigStore | None = None
        self._features: FinalizedFeatures | None = None
        self._serving = False

    def _servers(self, node: Any, listeners: Any, suffix: str) -> list[KafkaServer]:
        """One server per listener of `node` (the broker itself, or a node of several)."""
        config = self.config
        return [
            KafkaServer(node, self.router, e.host, e.port, config.socket_request_max_bytes, listener=e.name,
                        sock=self.prepared.sockets.get(e.name + suffix),
                        security=None if e.security_protocol == "PLAINTEXT" else
                        self.security.for_listener(e.security_protocol, e.name))
            for e in listeners.bind
        ]

    def _build_cluster(self) -> None:
        """--nodes N: the nodes, each with its servers, and the coordinator check on the routes."""
        from .apis import coordinator_routes
        from .cluster import Cluster

        cluster = self.cluster = Cluster(self)
        for node in cluster.nodes:
            node.servers = self.node_servers(node)
            self.servers += node.servers
        self.router.wrap_routes(coordinator_routes.checked)

    def node_servers(self, node: Any) -> list[KafkaServer]:
        """The servers of one node of several: each request counted, cut-off clients closed (node.watch)."""
        servers = self._servers(node, node.listeners, f"@{node.index}" if node.index else "")
        for server in servers:
            server.node_watch = node.watch
        return servers

    def brokers(self, listener: str) -> list[tuple[int, str, int]]:
        if self.cluster is not None:
            return self.cluster.brokers(listener)
        if self.postgres is not None:
            return self.postgres.brokers(listener)
        return [(self.node_id, *self.advertised(listener))]

    def node_endpoint(self, node: int, listener: str) -> tuple[str, int] | None:
        if self.cluster is not None:
            return self.cluster.node_endpoint(node, listener)
        if self.postgres is not None:
            return self.postgres.node_endpoint(node, listener)
        return self.advertised(listener) if node == self.node_id else None

    def _test_controls_token(self) -> str | None:
        """The bearer token of the test controls, written to <data-dir>/test-controls.token (0600) for
        `kbroker test ...`; printed here when the broker made it up."""
        if not self.config.test_controls:
            return None
        from .security.http_guard import test_controls_token

        token, path = test_controls_token(self.data_dir, self.config.test_controls_token)
        log.warning("test_controls_enabled", token_file=str(path),
                    token=None if self.config.test_controls_token else token,
                    detail="POST /v1/test/... can delete every topic; it needs Authorization: Bearer <token>")
        return token

    def advertised(self, listener: str) -> tuple[str, int]:
        """The host and port a client that came in on `listener` is told to use (Kafka answers with
        the endpoints of the listener the request arrived on)."""
        endpoint = self.listeners.advertised_for(listener)
        return endpoint.host, endpoint.port

    async def alter_broker_configs(self, cluster_default: bool, change: Callable[[dict[str, str]], dict[str, str]],
                                   validate_only: bool, names: Sequence[str] = ()) -> None:
        """Change a layer of dynamic broker configs and apply it: the topics' defaults, the cleaner's pause.
        A node of a cluster over PostgreSQL stores the layer in the database first (every node follows).
        `names`: those the request names (a TLS keystore named again is reloaded when its file changed)."""
        if self.postgres is None:
            if self.dynamic_configs.alter(cluster_default, change, validate_only, names):
                self.apply_dynamic_configs()
            return
        new = self.dynamic_configs.prepare(cluster_default, change, validate_only, names)
        if new is None:
            if not validate_only:  # unchanged: what the names ask to reload still is
                self.dynamic_configs.reconfigure(names)
            return
        await self.postgres.store_broker_configs(cluster_default, new)
        dynamic = self.dynamic_configs
        if dynamic.adopt(*((dynamic.node, new) if cluster_default else (new, dynamic.default)), names=names):
            self.apply_dynamic_configs()

    def apply_dynamic_configs(self) -> None:
        """The dynamic broker configs changed: the topics' defaults follow, the cleaner wakes."""
        from .topic_defaults import log_config
        self.catalogue.set_default_config(log_config(self.dynamic_configs.effective()))
        self.logs.wake_cleaner()

    def http_endpoint(self, listener: str) -> str | None:
        """The URL of the HTTP endpoint (--metrics-listen) as a client of `listener` reaches it: the
        bound host, or for a wildcard the host that client was told for this broker."""
        if self.admin_http is None or self.admin_port is None:
            return None
        host = self.config.metrics_listen.rsplit(":", 1)[0].strip("[]")
        if host in ("", "0.0.0.0", "::"):
            host = self.advertised(listener)[0]
        return f"http://[{host}]:{self.admin_port}" if ":" in host else f"http://{host}:{self.admin_port}"

    async def start(self) -> None:
        if self.producer_states is not None:
            self.producer_states.load_all()
        if self.postgres is not None:
            self.postgres.start(self)
        if self.catalogue.topic(TRANSACTION_STATE_TOPIC) is not None:
            loading = self._build_transactions().loading
            if loading is not None:
                await loading  # replayed before the server listens, as Kafka loads it
        self._background.append(asyncio.create_task(self.timers.run(), name="timers"))
        if self.producer_states is not None:
            self._background.append(asyncio.create_task(self.producer_states.run_snapshots(),
                                                        name="producer-snapshots"))
        if self._security is not None:  # the OAUTHBEARER key set's refresh, when fetched over HTTPS
            self._background += [asyncio.create_task(c, name="security") for c in self._security.background()]
        self._started = True
        if self._coordinator is not None:
            self._coordinator.start_now()
        if self.catalogue.topic("__share_group_state") is not None:
            self.share_state.start()  # replayed by the share coordinator's loader while the broker serves
        # Serve at once; groups of partitions not yet replayed answer COORDINATOR_LOAD_IN_PROGRESS.
        for server in self.servers:
            await server.start()
        self._serving = True
        if self.admin_http is not None:
            self.admin_port = await self.admin_http.start()
            self._background.append(asyncio.create_task(self.observations.watch_event_loop(), name="loop-watch"))
        if self.dev_security is not None:
            self.dev_security.write_client_configs(
                [(e.security_protocol, "%s:%d" % self.advertised(e.name)) for e in self.listeners.bind])
        # A first start creates __consumer_offsets here, its files made in worker threads while the
        # broker already answers (Kafka too creates it after start-up); __transaction_state comes with
        # the first use of transactions (_build_transactions).
        self._background.append(asyncio.create_task(self._create_and_load_offsets(), name="offsets-load"))
        self._background.append(asyncio.create_task(self._retention_loop(), name="log-retention"))
        def backoff_ms() -> int:  # a dynamic broker config: read every round
            return self.dynamic_configs.effective().log_cleaner_backoff_ms

        # the segment engine's cleaner (its I/O held to log.cleaner.io.max.bytes.per.second), or the
        # database's engine's (broker/storage/postgres/compaction.py)
        self._background.append(asyncio.create_task(
            self.logs.cleaner.run(backoff_ms, self.dynamic_configs.cleaner_io_max_bytes_per_s)
            if self.postgres is None else self.logs.run_cleaner(backoff_ms), name="log-cleaner"))
        self._background.append(asyncio.create_task(self._connections_summary_loop(), name="connections-summary"))
        if self.cluster is not None and self.config.auto_leader_rebalance_enable:
            self._background.append(asyncio.create_task(
                self.cluster.rebalance_leaders(self.config.leader_imbalance_check_interval_seconds),
                name="leader-rebalance"))

    async def stop(self) -> None:
        if self.fsync_gate is not None:
            self.fsync_gate.release()  # the final flushes must not wait for a test's hold
        self.fetch_purgatory.shutdown()
        if self.admin_http is not None:
            await self.admin_http.stop()
        if self.postgres is not None:  # a controlled shutdown: the partitions move before the listeners close
            await self.postgres.hand_over()
        # Close the listener first, then let the coordinator answer its parked JoinGroup/SyncGroup
        # requests (NOT_COORDINATOR makes clients look for the next coordinator), so the server's
        # wait for in-flight requests does not sit out rebalance timeouts.
        server_down = asyncio.gather(*(s.shutdown(self.config.shutdown_timeout_s) for s in self.servers))
        await asyncio.sleep(0)
        if self._transactions is not None:
            await self._transactions.stop()
        if self._coordinator is not None:
            await self._coordinator.stop()
        if self._share_state is not None:
            await self._share_state.stop()
        await server_down
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.producer_states is not None:
            self.producer_states.snapshot_all()
        self.history_file.close()
        self.logs.close()
        if self.postgres is not None:
            await self.postgres.close()
        self.prepared.close()  # releases the data directory's lock last

    @property
    def coordinator(self) -> GroupCoordinatorService:
        """The group coordinator, built with its first use: a group request (FindCoordinator
        included), groups stored in __consumer_offsets to replay, the admin endpoints. A broker that
        stores no group and serves none never imports it (most of an empty start-up's imports)."""
        coordinator = self._coordinator
        if coordinator is None:
            coordinator = self._build_coordinator()
        return coordinator

    @property
    def coordinator_if_built(self) -> GroupCoordinatorService | None:
        return self._coordinator

    @property
    def security(self) -> Security:
        """Credentials, ACLs and TLS/SASL per listener. Built at start when a listener has TLS or SASL
        or an authorizer is configured; otherwise with its first use (a SCRAM or ACL admin request, a
        client asking for KIP-430's authorized operations): a PLAINTEXT broker without an authorizer
        authorizes everything without it (`security_if_built` is None) and never imports it."""
        security = self._security
        if security is None:
            security = self._build_security()
        return security

    @property
    def security_if_built(self) -> Security | None:
        return self._security

    def _build_security(self) -> Security:
        from .security.service import Security

        security = self._security = Security(self.config, self.data_dir)
        if self.dev_security is not None:
            self.dev_security.add_users(security.credentials)
        return security

    def _build_coordinator(self) -> GroupCoordinatorService:
        from ..coordinator.groups.service import GroupCoordinatorService
        from ..coordinator.config import GroupConfig

        config = self.config
        coordinator = self._coordinator = GroupCoordinatorService(
            writer=self.offsets_topic,
            config=GroupConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(GroupConfig)}),
            timers=self.timers,
            num_partitions=self.offsets_topic.num_partitions,
            topics=self._topics_image,
            max_batch_bytes=self.offsets_topic.max_batch_bytes,
            group_config=self._group_config_override,
        )
        coordinator.history.subscribe(self.observations.rebalance)
        coordinator.event_listeners.append(self._share_member_gone)
        from .coordinators.deleted_topics import DeletedTopicOffsets  # a deleted topic's offsets go with it

        self.catalogue.deletion_listeners.append(DeletedTopicOffsets(self))
        coordinator.history.subscribe(self.history_file)
        if self._started:
            coordinator.start_now()  # else start() starts it
        partitions = range(self.offsets_topic.num_partitions)
        if self._offsets_hold_nothing:
            coordinator.load_empty(partitions)
        else:
            coordinator.mark_loading(partitions)  # until the start-up load replays them into it
        return coordinator

    def offsets_partitions_loaded(self) -> int:
        coordinator = self._coordinator
        if coordinator is None:
            return self.offsets_topic.num_partitions if self._offsets_hold_nothing else 0
        return coordinator.loaded_partitions

    def _topics_image(self):
        """name -> TopicImage, what consumer groups (KIP-848) assign from. Every ConsumerGroupHeartbeat
        reads it, so it is built once per change of the topics table: the same object until then
        (the coordinator's steady-heartbeat memo keys on that identity)."""
        version = self.catalogue.version
        cached = self._topics_image_cache
        if cached is not None and cached[0] == version:
            return cached[1]
        from ..coordinator.groups.consumer.consumer_group import TopicImage

        image = {name: TopicImage(name, info.topic_id, info.num_partitions)
                 for name, info in self.catalogue.topics().items()}
        self._topics_image_cache = (version, image)
        return image

    @property
    def transactions_if_built(self) -> TransactionService | None:
        return self._transactions

    @property
    def share_partitions(self) -> SharePartitionManager:
        """Share groups' share-partitions and share sessions (broker/coordinators/share_partitions.py),
        built with the first ShareFetch or ShareAcknowledge."""
        if self._share_partitions is None:
            from .coordinators.share_partitions import SharePartitionManager

            self._share_partitions = SharePartitionManager(self)
        return self._share_partitions

    @property
    def share_partitions_if_built(self) -> SharePartitionManager | None:
        return self._share_partitions

    @property
    def share_state_if_built(self) -> ShareStateLog | None:
        return self._share_state

    @property
    def share_state(self) -> ShareStateLog:
        """The share coordinator (`__share_group_state`, broker/coordinators/share_state.py): built at
        start when its topic exists (and loaded then), else with the first share group's fetch."""
        if self._share_state is None:
            from .coordinators.share_state import ShareStateLog

            state = self._share_state = ShareStateLog(
                self.partitions, self.config.share_coordinator_state_topic_num_partitions, timers=self.timers)
            if self._started:
                state.start()
        return self._share_state

    def _share_member_gone(self, event: object) -> None:
        """A share group member left or was fenced: what it holds is released at once (Kafka does)."""
        from ..coordinator.groups.events import ShareMemberGone

        if isinstance(event, ShareMemberGone) and self._share_partitions is not None:
            self._share_partitions.member_gone(event.group_id, event.member_id, left=event.left)

    def _group_config_override(self, group_id: str, name: str) -> str | None:
        """A group's override of a group config (IncrementalAlterConfigs on the GROUP resource), for the
        coordinator; None: the broker's `group.*` default holds."""
        return self.group_configs.overrides.get(group_id, {}).get(name)

    @property
    def group_configs(self) -> GroupConfigStore:
        """Groups' dynamic config overrides (broker/group_configs.py), read with their first use."""
        if self._group_configs is None:
            from .group_configs import GroupConfigStore

            self._group_configs = GroupConfigStore(self.data_dir, self.config)
        return self._group_configs

    @property
    def features(self) -> FinalizedFeatures:
        """The finalized feature levels (broker/operations/features.py), read with their first use."""
        if self._features is None:
            from .operations.features import for_broker

            self._features = for_broker(self, self.postgres.feature_levels if self.postgres else None)  # the cluster's
        return self._features

    @property
    def transactions(self) -> TransactionService:
        """The transaction coordinator (broker/coordinators/transactions.py), built with its first use: a broker
        nobody sends a transaction to never imports it nor creates `__transaction_state`."""
        if self._transactions is None:
            return self._build_transactions()
        return self._transactions

    def _build_transactions(self) -> TransactionService:
        """The transaction coordinator, serving at once; an existing `__transaction_state` is replayed
        in a task (`loading`, which start() awaits)."""
        from .coordinators.transactions import TOPIC, TransactionService

        assert TOPIC == TRANSACTION_STATE_TOPIC
        service = self._transactions = TransactionService(self, self.config)
        service.start()
        if service.topic_ready.is_set():
            service.loading = service.load()
        else:
            service.load_nothing()
            # the first use: made in worker threads; a transit to write waits for it (Kafka creates
            # the topic on the first FindCoordinator of a transactional id and answers
            # COORDINATOR_NOT_AVAILABLE meanwhile)
            self._background.append(asyncio.get_running_loop().create_task(service.create_topic(),
                                                                          name="txn-topic-create"))
        return service

    async def _create_and_load_offsets(self) -> None:
        delay = 1.0
        while True:
            try:
                await self.offsets_topic.create()
                break
            except Exception as exc:  # noqa: BLE001 - a full disk, --max-partitions: groups stay loading
                log.error("offsets_topic_create_failed", error=repr(exc), retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        if self._coordinator is None and self.offsets_topic.holds_nothing():
            self._offsets_hold_nothing = True  # the coordinator, when built, loads every partition empty
            self.offsets_topic.loaded_nothing()
            return
        await self.offsets_topic.load_all(self.coordinator)

    async def auto_create_topic(self, name: str):
        """Create a topic with the broker defaults (Metadata auto-creation)."""
        if name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
            # Made with its own settings, never the defaults: __consumer_offsets by a first start(),
            # __transaction_state with the transaction coordinator (asked for it here, as Kafka's
            # auto-creation does). Meanwhile LEADER_NOT_AVAILABLE, as Kafka answers a topic it is
            # creating; clients retry.
            if name == TRANSACTION_STATE_TOPIC:
                self.transactions  # noqa: B018 - builds the coordinator, which creates its topic
            raise KafkaError(f"{name} is being created", ErrorCode.LEADER_NOT_AVAILABLE)
        try:
            info = self.catalogue.create_topic(name, self.config.num_partitions, {})
        except Refused as e:
            # __cluster_metadata: Kafka 4.4 answers UNKNOWN_TOPIC_OR_PARTITION and never makes it.
            # __share_group_state: Kafka makes it with its share coordinator's settings; this broker
            # runs no share coordinator yet, and the broker defaults would let retention delete it.
            raise Refused(f"{name} cannot be created: {e}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        log.info("topic_auto_created", topic=name, partitions=self.config.num_partitions)
        return info

    def readiness_problems(self) -> list[str]:
        """What `/ready` waits for; empty once every __consumer_offsets partition is loaded and every
        --create-topics topic exists."""
        problems = []
        total = self.offsets_topic.num_partitions
        loaded = self.offsets_partitions_loaded()
        coordinator = self._coordinator
        if (coordinator is not None and coordinator.is_loading) or loaded < total:
            problems.append(f"__consumer_offsets: {loaded} of {total} partitions loaded")
        if self._transactions is not None and not self._transactions.topic_ready.is_set():
            problems.append(f"{TRANSACTION_STATE_TOPIC}: being created")
        elif self._transactions is not None and self._transactions.coordinator.is_loading:
            problems.append(f"{TRANSACTION_STATE_TOPIC}: loading")
        topics = self.catalogue.topics()
        problems += [f"topic {spec.name} does not exist" for spec in self.seed_topics if spec.name not in topics]
        return problems

    async def _connections_summary_loop(self, interval_s: float = CONNECTIONS_SUMMARY_S) -> None:
        """One info line a minute about connections (each one's open and close are debug lines)."""
        while True:
            await asyncio.sleep(interval_s)
            fields = self.observations.summary.take({s.listener: s.open_connections() for s in self.servers})
            if fields is not None:
                log.info("connections_summary", interval_s=interval_s, **fields)

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await (self.logs.run_maintenance if self.postgres else self.logs.run_retention)(self.clock.wall_ms())
            except Exception:
                log.exception("retention_failed")


if TYPE_CHECKING:
    def _handlers_may_use(broker: Broker) -> BrokerServices:
        return broker  # checked by mypy: the broker provides everything a handler's context names
