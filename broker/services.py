"""What a request handler may use of the broker: `RequestContext.broker` is a `BrokerServices`.

The broker (`app.Broker`) provides all of it, and mypy checks that it does (`app.py` hands itself
over as one). Handlers see only this list, by its types, so a renamed or removed attribute fails
`make typecheck`, not a client in production. Every member always exists: a handler never needs
`getattr(broker, name, None)`. Add a member here when a handler starts to use one more service.

Types only: the imports below are for the type checker, so this module costs nothing at run time
and creates no import cycle between the handlers and what they use.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..coordinator.groups.service import GroupCoordinatorService
    from ..purgatory.clock import Clock
    from ..purgatory.delayed_fetch import FetchPurgatory
    from .config import BrokerConfig
    from ..protocol.kafka_releases import KafkaRelease
    from .apis.fetch_sessions import FetchSessionManager
    from .partitions.catalogue import TopicCatalogue, TopicInfo
    from .partitions.service import PartitionService
    from .operations.client_telemetry import ClientTelemetry
    from .operations.observe import Observations
    from .operations.features import FinalizedFeatures
    from .operations.quotas import ClientQuotas
    from .network.router import Router
    from .security.service import Security
    from .operations.test_controls import PartitionFaults
    from .coordinators.transactions import TransactionService
    from .coordinators.share_partitions import SharePartitionManager
    from .coordinators.share_state import ShareStateLog
    from .group_configs import GroupConfigStore
    from .dynamic_configs import DynamicBrokerConfigs
    from .network.unread_answers import UnreadAnswers


class BrokerServices(Protocol):
    # who this broker is
    config: BrokerConfig
    node_id: int
    cluster_id: str
    data_dir: Path
    clock: Clock  # the broker's time: timers, produce timestamps, segment ages, fetch sessions
    router: Router  # ApiVersions lists what it serves; the ACL checks wrap its handlers
    kafka_release: KafkaRelease  # the Kafka release it answers as (--kafka-version; else the newest)
    # the data path: handlers see the topics and the partitions, never a storage engine
    catalogue: TopicCatalogue  # topics, configs, leaders and leader epochs; producer ids
    partitions: PartitionService  # the one append path and the one read path
    fetch_sessions: FetchSessionManager
    fetch_purgatory: FetchPurgatory
    unread_answers: UnreadAnswers  # Fetch answers not yet taken by their clients, bounded in all
    disconnect_listeners: list[Callable[[str], None]]  # told of each closed connection's id
    quotas: ClientQuotas
    # the coordinators
    @property
    def coordinator(self) -> GroupCoordinatorService: ...  # built with its first use
    @property
    def transactions(self) -> TransactionService: ...  # built with its first use
    @property
    def transactions_if_built(self) -> TransactionService | None: ...
    @property
    def group_configs(self) -> GroupConfigStore: ...  # groups' dynamic config overrides
    @property
    def features(self) -> FinalizedFeatures: ...  # the finalized feature levels (UpdateFeatures changes some)
    @property
    def share_partitions(self) -> SharePartitionManager: ...  # share groups' delivery state, built with its first use
    @property
    def share_partitions_if_built(self) -> SharePartitionManager | None: ...
    @property
    def share_state(self) -> ShareStateLog: ...  # the share coordinator (`__share_group_state`), loaded at start
    # credentials, ACLs and TLS/SASL per listener: built at start with a TLS or SASL listener or an
    # authorizer, otherwise with its first use; `security_if_built` is None until then (no authorizer)
    @property
    def security(self) -> Security: ...
    @property
    def security_if_built(self) -> Security | None: ...
    # metrics and test controls
    observations: Observations
    client_telemetry: ClientTelemetry | None  # the clients' pushed metrics (KIP-714), with --client-metrics
    partition_faults: PartitionFaults | None  # only with --test-controls

    explicit_settings: frozenset[str]  # the settings a flag, variable or file set (not defaults)
    dynamic_configs: DynamicBrokerConfigs  # the dynamic broker configs' layers over `config`

    # change one layer of dynamic broker configs (`cluster_default`: the empty name's) and apply it
    async def alter_broker_configs(self, cluster_default: bool, change: Callable[[dict[str, str]], dict[str, str]],
                                   validate_only: bool, names: Sequence[str] = ()) -> None: ...

    def advertised(self, listener: str) -> tuple[str, int]: ...

    # the brokers a client on `listener` is told of: (node id, host, port) of each node that is up
    def brokers(self, listener: str) -> list[tuple[int, str, int]]: ...

    def node_endpoint(self, node: int, listener: str) -> tuple[str, int] | None: ...  # None: no such node up

    def http_endpoint(self, listener: str) -> str | None: ...  # --metrics-listen as `listener`'s clients reach it

    async def auto_create_topic(self, name: str) -> TopicInfo: ...
