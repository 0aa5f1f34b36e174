"""Broker configuration: flags win over `KBROKER_*` environment variables, which win over `KAFKA_*`
ones (Kafka's names, as the apache/kafka and cp-kafka images read them), which win over a file
(TOML, or Kafka's server.properties), which wins over the defaults (Kafka's where Kafka has the
setting). broker/config_sources.py reads them; broker/kafka_names.py knows Kafka's names.

Every value is checked before the broker touches anything, and a bad one is reported in one line
naming where it came from: the flag (`--num-partitions`), the variable (`KBROKER_NUM_PARTITIONS`,
`KAFKA_NUM_PARTITIONS`) or the key and file (`num.partitions in kbroker.toml`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config_sources import ConfigError, Sources
from .listeners import DEFAULT_SECURITY_PROTOCOL_MAP, ListenerError, Listeners, resolve

__all__ = ["BrokerConfig", "ConfigError", "Sources", "load_config", "load_config_with_sources", "parse_host_port",
           "validate"]


def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [::1]:9092
        host, _, rest = text[1:].partition("]")
        return host, int(rest.lstrip(":") or default_port)
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    return host or "0.0.0.0", int(port)


def _topic_default(what: str, metavar: str = "N") -> Any:
    """A broker-wide topic default: unset (None) means Kafka's default."""
    return field(default=None, metadata={"metavar": metavar, "help": f"broker default of the topic config {what} "
                                                                      "(default: Kafka's)"})


@dataclass(slots=True)
class BrokerConfig:
    """Every setting, with the help text `kbroker --help` prints and its Kafka name where one exists."""

    listeners: str = field(
        default="",
        metadata={"help": "Kafka's listeners: NAME://HOST:PORT,... e.g. PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:29092 "
                          "(default: one PLAINTEXT listener on --listen)"},
    )
    advertised_listeners: str = field(
        default="",
        metadata={"help": "Kafka's advertised.listeners: the NAME://HOST:PORT clients on each listener are told "
                          "(default: --listeners)"},
    )
    listener_security_protocol_map: str = field(
        default=DEFAULT_SECURITY_PROTOCOL_MAP,
        metadata={"help": "listener name -> security protocol (listener.security.protocol.map): PLAINTEXT, SSL, "
                          "SASL_PLAINTEXT or SASL_SSL"},
    )
    listen: str = field(default="127.0.0.1:9092",
                        metadata={"help": "HOST:PORT of one PLAINTEXT listener (the short form of --listeners)"})
    advertised_listener: str = field(
        default="", metadata={"help": "HOST:PORT clients of --listen are told (default: the listen address)"}
    )
    data_dir: str = field(default="./data", metadata={"help": "directory holding the logs and cluster metadata"})
    node_id: int = field(default=1, metadata={"help": "this broker's node id (Kafka node.id); with --nodes N the "
                                                      "first of N ids"})
    nodes: int = field(default=1, metadata={"metavar": "N", "help": "serve a cluster of N brokers in this one process "
                                                               "(node k: id --node-id + k, each listener's port + k); "
                                                               "see docs/cluster.md"})
    cluster: str = field(default="", metadata={
        "metavar": "URL", "help": "postgresql://USER:PASSWORD@HOST:PORT/DB: a node of a cluster over one PostgreSQL "
                                  "(issue 44; see docs/postgres-cluster.md)"})
    cluster_poll_ms: int = field(default=500, metadata={
        "metavar": "MS", "help": "with --cluster: how often the node reads the cluster's metadata from the database "
                                 "besides being notified of changes (LISTEN/NOTIFY; a notification is lost while "
                                 "disconnected)"})
    postgres_tail_bytes: int = field(default=8 * 1024 * 1024, metadata={
        "metavar": "BYTES", "help": "with --cluster: the newest bytes of a partition's log its leader keeps in memory; "
                                    "older batches are read from the database (docs/postgres-cluster.md)"})
    postgres_memory_bytes: int = field(default=256 * 1024 * 1024, metadata={
        "metavar": "BYTES", "help": "with --cluster: the bytes of all the partitions' tails a node keeps in memory, "
                                    "shared equally by the partitions it leads (compacted and coordinator "
                                    "partitions are kept whole, outside it)"})
    postgres_read_cache_bytes: int = field(default=64 * 1024 * 1024, metadata={
        "metavar": "BYTES", "help": "with --cluster: the node's cache of batches read from the database for readers "
                                    "of old offsets (least recently used out first)"})
    log_format: str = field(
        default="auto", metadata={"help": "console, json, or auto (console on a terminal, json otherwise)"}
    )
    log_level: str = field(default="info", metadata={"help": "debug, info, warning or error"})
    log_requests: bool = field(
        default=False, metadata={"help": "log one `request` line (level debug, whatever --log-level) per answered "
                                         "request, as Kafka's kafka.request.logger at DEBUG: api, client, principal, "
                                         "listener, times, size, error codes (docs/operations.md)"}
    )
    socket_request_max_bytes: int = field(
        default=104857600, metadata={"help": "largest request frame accepted (socket.request.max.bytes)"}
    )
    connections_max_idle_ms: int = field(
        default=600000, metadata={"help": "close a connection with no traffic for this long (connections.max.idle.ms)"}
    )
    max_connections: int = field(
        default=2147483647, metadata={"help": "connections accepted in all; more are closed (max.connections)"}
    )
    max_connections_per_ip: int = field(
        default=2147483647, metadata={"metavar": "N", "help": "connections accepted from one address (max.connections.per.ip)"}
    )
    fetch_max_bytes: int = field(
        default=57671680, metadata={"help": "largest Fetch response, whatever the request asks (fetch.max.bytes); "
                                          "past 4 times it in answers not yet taken by their clients, "
                                          "a Fetch gets less"}
    )
    max_inflated_batch_bytes: int = field(
        default=67108864,
        metadata={"help": "largest decompressed size of one produced batch; beyond it MESSAGE_TOO_LARGE "
                          "(kbroker's own bound: Kafka has none)"},
    )
    flush: str = field(
        default="always",
        metadata={"help": "always (group commit: ack after fsync), interval:MS, or never"},
    )
    auto_create_topics_enable: bool = field(
        default=True, metadata={"help": "create unknown topics a Metadata request names (auto.create.topics.enable)"}
    )
    num_partitions: int = field(default=1, metadata={"help": "partitions of auto-created topics (num.partitions)"})
    default_replication_factor: int = field(
        default=1, metadata={"help": "replicas of a topic created without a count: one node holds one "
                                     "(default.replication.factor)"})
    auto_leader_rebalance_enable: bool = field(
        default=True, metadata={"help": "with --nodes N or --cluster: every leader-imbalance check moves each "
                                        "partition back to its preferred (first) replica where that one is up "
                                        "(auto.leader.rebalance.enable)"})
    leader_imbalance_check_interval_seconds: int = field(
        default=300, metadata={"help": "seconds between the leader-imbalance checks "
                                       "(leader.imbalance.check.interval.seconds)"})
    controller_listener_names: str = field(
        default="", metadata={"help": "KRaft's controller listeners (controller.listener.names): named in "
                                      "--listeners, not served (kbroker needs no controller quorum)"})
    # --- broker-wide topic defaults, Kafka's broker names: a topic's own config wins (broker/topic_defaults.py)
    log_retention_hours: int | None = _topic_default("retention.ms in hours")
    log_retention_minutes: int | None = _topic_default("retention.ms in minutes; wins over hours")
    log_retention_ms: int | None = _topic_default("retention.ms; wins over minutes and hours; -1: no limit")
    log_retention_bytes: int | None = _topic_default("retention.bytes; -1: no limit")
    log_segment_bytes: int | None = _topic_default("segment.bytes")
    log_roll_hours: int | None = _topic_default("segment.ms in hours")
    log_roll_ms: int | None = _topic_default("segment.ms; wins over hours")
    log_roll_jitter_hours: int | None = _topic_default("segment.jitter.ms in hours")
    log_roll_jitter_ms: int | None = _topic_default("segment.jitter.ms; wins over hours")
    log_cleanup_policy: str | None = _topic_default("cleanup.policy: delete, compact or both", "POLICY")
    log_cleaner_delete_retention_ms: int | None = _topic_default("delete.retention.ms")
    log_cleaner_min_compaction_lag_ms: int | None = _topic_default("min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int | None = _topic_default("max.compaction.lag.ms")
    log_cleaner_min_cleanable_ratio: float | None = _topic_default("min.cleanable.dirty.ratio", "RATIO")
    log_index_interval_bytes: int | None = _topic_default("index.interval.bytes")
    log_index_size_max_bytes: int | None = _topic_default("segment.index.bytes")
    log_segment_delete_delay_ms: int | None = _topic_default("file.delete.delay.ms")
    log_message_timestamp_type: str | None = _topic_default("message.timestamp.type", "TYPE")
    log_message_timestamp_before_max_ms: int | None = _topic_default("message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int | None = _topic_default("message.timestamp.after.max.ms")
    log_preallocate: bool | None = _topic_default("preallocate")
    log_flush_interval_messages: int | None = _topic_default("flush.messages (reported; --flush decides)")
    log_flush_interval_ms: int | None = _topic_default("flush.ms (reported; --flush decides)")
    log_flush_scheduler_interval_ms: int | None = _topic_default("flush.ms when log.flush.interval.ms is unset")
    message_max_bytes: int | None = _topic_default("max.message.bytes")
    compression_type: str | None = _topic_default("compression.type", "TYPE")
    compression_gzip_level: int | None = _topic_default("compression.gzip.level")
    compression_lz4_level: int | None = _topic_default("compression.lz4.level")
    compression_zstd_level: int | None = _topic_default("compression.zstd.level")
    min_insync_replicas: int | None = _topic_default("min.insync.replicas")
    unclean_leader_election_enable: bool | None = _topic_default("unclean.leader.election.enable")
    shutdown_timeout_s: float = field(default=4.0, metadata={"help": "seconds to finish in-flight requests on SIGTERM"})
    group_initial_rebalance_delay_ms: int = field(
        default=3000, metadata={"help": "group.initial.rebalance.delay.ms"}
    )
    group_min_session_timeout_ms: int = field(default=6000, metadata={"help": "group.min.session.timeout.ms"})
    group_max_session_timeout_ms: int = field(default=1800000, metadata={"help": "group.max.session.timeout.ms"})
    group_max_size: int = field(default=2147483647, metadata={"help": "group.max.size"})
    group_consumer_session_timeout_ms: int = field(default=45000, metadata={"help": "group.consumer.session.timeout.ms"})
    group_consumer_min_session_timeout_ms: int = field(
        default=45000, metadata={"help": "group.consumer.min.session.timeout.ms"})
    group_consumer_max_session_timeout_ms: int = field(
        default=60000, metadata={"help": "group.consumer.max.session.timeout.ms"})
    group_consumer_heartbeat_interval_ms: int = field(
        default=5000, metadata={"help": "group.consumer.heartbeat.interval.ms"})
    group_consumer_min_heartbeat_interval_ms: int = field(
        default=5000, metadata={"help": "group.consumer.min.heartbeat.interval.ms"})
    group_consumer_max_heartbeat_interval_ms: int = field(
        default=15000, metadata={"help": "group.consumer.max.heartbeat.interval.ms"})
    group_consumer_max_size: int = field(default=2147483647, metadata={"help": "group.consumer.max.size"})
    group_consumer_assignors: str = field(
        default="uniform,range", metadata={"help": "group.consumer.assignors (the first is the default)"})
    group_consumer_migration_policy: str = field(
        default="bidirectional", metadata={"help": "group.consumer.migration.policy"})
    group_streams_session_timeout_ms: int = field(default=45000, metadata={"help": "group.streams.session.timeout.ms"})
    group_streams_heartbeat_interval_ms: int = field(
        default=5000, metadata={"help": "group.streams.heartbeat.interval.ms"})
    group_streams_max_size: int = field(default=2147483647, metadata={"help": "group.streams.max.size"})
    group_streams_num_standby_replicas: int = field(
        default=0, metadata={"help": "group.streams.num.standby.replicas"})
    group_streams_initial_rebalance_delay_ms: int = field(
        default=3000, metadata={"help": "group.streams.initial.rebalance.delay.ms"})
    group_streams_assignment_interval_ms: int = field(
        default=1000, metadata={"help": "group.streams.assignment.interval.ms"})
    group_streams_num_warmup_replicas: int = field(default=2, metadata={"help": "group.streams.num.warmup.replicas"})
    group_streams_acceptable_recovery_lag: int = field(
        default=10000, metadata={"help": "group.streams.acceptable.recovery.lag"})
    group_streams_task_offset_interval_ms: int = field(
        default=60000, metadata={"help": "group.streams.task.offset.interval.ms"})
    group_share_session_timeout_ms: int = field(default=45000, metadata={"help": "group.share.session.timeout.ms"})
    group_share_heartbeat_interval_ms: int = field(
        default=5000, metadata={"help": "group.share.heartbeat.interval.ms"})
    group_share_max_size: int = field(default=200, metadata={"help": "group.share.max.size"})
    group_share_record_lock_duration_ms: int = field(
        default=30000, metadata={"help": "group.share.record.lock.duration.ms"})
    group_share_delivery_count_limit: int = field(default=5, metadata={"help": "group.share.delivery.count.limit"})
    group_share_partition_max_record_locks: int = field(
        default=2000, metadata={"help": "group.share.partition.max.record.locks"})
    errors_deadletterqueue_auto_create_topics_enable: bool = field(default=False, metadata={
        "help": "create a share group's missing dead letter queue topic (errors.deadletterqueue.auto.create.topics.enable)"})
    errors_deadletterqueue_topic_name_prefix: str = field(default="dlq.", metadata={
        "help": "the prefix share groups' DLQ topics must have; empty: any (errors.deadletterqueue.topic.name.prefix)"})
    offsets_topic_num_partitions: int = field(default=50, metadata={"help": "offsets.topic.num.partitions"})
    share_coordinator_state_topic_num_partitions: int = field(
        default=50, metadata={"help": "share.coordinator.state.topic.num.partitions"})
    offsets_retention_minutes: int = field(default=10080, metadata={"help": "offsets.retention.minutes"})
    offsets_retention_check_interval_ms: int = field(
        default=600000, metadata={"help": "offsets.retention.check.interval.ms"}
    )
    offset_metadata_max_bytes: int = field(default=4096, metadata={"help": "offset.metadata.max.bytes"})
    log_retention_check_interval_ms: int = field(
        default=300000, metadata={"help": "log.retention.check.interval.ms"}
    )
    log_cleaner_backoff_ms: int = field(
        default=15000, metadata={"help": "log.cleaner.backoff.ms: how long the log cleaner sleeps when no "
                                         "compacted log is dirty enough to clean"}
    )
    transaction_max_timeout_ms: int = field(default=900000, metadata={"help": "transaction.max.timeout.ms"})
    transaction_state_log_num_partitions: int = field(
        default=50, metadata={"help": "transaction.state.log.num.partitions"}
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = field(
        default=10000, metadata={"help": "transaction.abort.timed.out.transaction.cleanup.interval.ms"}
    )
    transactional_id_expiration_ms: int = field(default=604800000, metadata={"help": "transactional.id.expiration.ms"})
    cluster_id: str = field(default="", metadata={"help": "cluster id to create the data dir with (default: random)"})
    create_topics: str = field(
        default="",
        metadata={"help": "topics to create at start-up, NAME:PARTITIONS[:compact|delete],... e.g. "
                          "orders:3,payments:6:compact (existing topics are left as they are)"},
    )
    max_partitions: int = field(
        default=10000,
        metadata={"help": "partitions this broker holds at most; CreateTopics/CreatePartitions beyond it get "
                          "POLICY_VIOLATION (no Kafka equivalent)"},
    )
    log_max_open_files: int = field(
        default=0,
        metadata={"help": "segment and index files kept open at once (0: a quarter of the fd limit)"},
    )
    metrics_listen: str = field(
        default="", metadata={"help": "HOST:PORT of the HTTP endpoint for /metrics, /health, /ready, group history "
                                      "and test controls (off when empty)"}
    )
    test_controls: bool = field(
        default=False, metadata={"help": "serve the test controls (POST /v1/test/...) on --metrics-listen "
                                         "(127.0.0.1:9644 when unset); never in production"}
    )
    test_controls_token: str = field(
        default="", metadata={"metavar": "TOKEN", "help": "the bearer token test controls require (default: a random "
                                                        "one, printed at start and written to "
                                                        "<data-dir>/test-controls.token, owner-readable only)"}
    )
    metrics_allowed_hosts: str = field(
        default="", metadata={"metavar": "NAMES", "help": "host names the HTTP endpoint answers to besides its own "
                                                        "addresses (its Host check against DNS rebinding); * for any"}
    )
    test_controls_remote: bool = field(
        default=False, metadata={"help": "allow --test-controls on a non-loopback --metrics-listen address"}
    )
    profile: str = field(
        default="", metadata={"help": "'test': the settings test suites copy by hand (no initial rebalance "
                                      "delay, 1 s minimum session timeout, --flush never)"}
    )
    kafka_version: str = field(
        default="", metadata={"metavar": "X.Y", "help": "answer as this Apache Kafka release does (3.6 ... 4.4): "
                                                      "its APIs, versions and features, and its refusals "
                                                      "(default: advertise 4.4.0's table and still serve the "
                                                      "older versions clients send without asking)"})
    client_metrics: bool = field(
        default=False, metadata={"help": "client telemetry (KIP-714): advertise GetTelemetrySubscriptions and "
                                         "PushTelemetry, subscribe every client to all its metrics and show them "
                                         "on /metrics per client instance (off, as in Kafka without a plugin)"})
    client_metrics_interval_ms: int = field(
        default=30000, metadata={"metavar": "MS", "help": "how often clients push their metrics with "
                                                        "--client-metrics (a subscription's interval.ms)"})
    telemetry_max_bytes: int = field(
        default=1048576, metadata={"help": "largest PushTelemetry payload, as sent (telemetry.max.bytes)"})
    # --- security (issue 14): Kafka's names; see broker/security/ ---
    sasl_enabled_mechanisms: str = field(
        default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        metadata={"help": "SASL mechanisms SASL listeners accept (sasl.enabled.mechanisms); each default one checks "
                          "credentials you created; OAUTHBEARER only when named, with a JWKS to check tokens against"},
    )
    sasl_oauthbearer_jwks_endpoint_url: str = field(
        default="", metadata={"metavar": "URL", "help": "https:// or file: URL of the JSON Web Key Set OAUTHBEARER "
                                                      "tokens are verified with (sasl.oauthbearer.jwks.endpoint.url)"})
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = field(
        default=3600000, metadata={"help": "how often the JWKS is fetched again "
                                           "(sasl.oauthbearer.jwks.endpoint.refresh.ms)"})
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = field(
        default=100, metadata={"help": "first wait after a failed JWKS fetch "
                                       "(sasl.oauthbearer.jwks.endpoint.retry.backoff.ms)"})
    sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = field(
        default=10000, metadata={"help": "longest wait between JWKS fetch attempts "
                                         "(sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms)"})
    sasl_oauthbearer_expected_audience: str = field(
        default="", metadata={"metavar": "AUDIENCES", "help": "comma-separated; a token's aud must name one "
                                                            "(sasl.oauthbearer.expected.audience)"})
    sasl_oauthbearer_expected_issuer: str = field(
        default="", metadata={"metavar": "ISSUER", "help": "a token's iss must be this "
                                                         "(sasl.oauthbearer.expected.issuer)"})
    sasl_oauthbearer_allow_unverified_audience: bool = field(
        default=False, metadata={"help": "accept tokens whatever their aud when no audience is expected "
                                         "(sasl.oauthbearer.allow.unverified.audience)"})
    sasl_oauthbearer_allow_unverified_issuer: bool = field(
        default=False, metadata={"help": "accept tokens whatever their iss when no issuer is expected "
                                         "(sasl.oauthbearer.allow.unverified.issuer)"})
    sasl_oauthbearer_clock_skew_seconds: int = field(
        default=30, metadata={"metavar": "SECONDS", "help": "leeway on exp, nbf and iat "
                                                          "(sasl.oauthbearer.clock.skew.seconds)"})
    sasl_oauthbearer_sub_claim_name: str = field(
        default="sub", metadata={"metavar": "CLAIM", "help": "claim naming the principal "
                                                           "(sasl.oauthbearer.sub.claim.name)"})
    sasl_oauthbearer_scope_claim_name: str = field(
        default="scope", metadata={"metavar": "CLAIM", "help": "claim holding the scopes "
                                                             "(sasl.oauthbearer.scope.claim.name)"})
    dev_unsecured_oauthbearer: bool = field(
        default=False, metadata={"help": "FOR TESTS ONLY: OAUTHBEARER accepts unsigned tokens (alg none) naming any "
                                         "principal, as Kafka's unsecured validator; warns at every start"})
    sasl_plain_users_file: str = field(default="", metadata={"help": "file of NAME=PASSWORD lines for SASL/PLAIN"})
    sasl_server_max_receive_size: int = field(
        default=524288, metadata={"help": "largest frame before authentication (sasl.server.max.receive.size)"}
    )
    connections_max_reauth_ms: int = field(
        default=0, metadata={"help": "SASL session lifetime; clients re-authenticate (connections.max.reauth.ms)"}
    )
    connection_failed_authentication_delay_ms: int = field(
        default=100, metadata={"help": "a failed authentication is answered (and its connection closed) this much "
                                       "later (connection.failed.authentication.delay.ms)"}
    )
    ssl_keystore_location: str = field(
        default="", metadata={"help": "PEM file: the broker's certificate chain and key (ssl.keystore.location)"}
    )
    ssl_key_password: str = field(default="", metadata={"help": "password of the PEM private key (ssl.key.password)"})
    ssl_truststore_location: str = field(
        default="", metadata={"help": "PEM file of CAs client certificates must chain to (ssl.truststore.location)"}
    )
    ssl_client_auth: str = field(default="none", metadata={"help": "required, requested or none (ssl.client.auth)"})
    ssl_principal_mapping_rules: str = field(
        default="DEFAULT", metadata={"help": "certificate subject to principal (ssl.principal.mapping.rules)"}
    )
    ssl_handshake_timeout_ms: int = field(default=10000, metadata={"help": "a TLS handshake's time limit"})
    authorizer_class_name: str = field(
        default="",
        metadata={"help": "org.apache.kafka.metadata.authorizer.StandardAuthorizer enables ACLs (authorizer.class.name)"},
    )
    super_users: str = field(default="", metadata={"help": "User:a;User:b may do anything (super.users)"})
    allow_everyone_if_no_acl_found: bool = field(
        default=False, metadata={"help": "allow when no ACL matches a resource (allow.everyone.if.no.acl.found)"}
    )
    dev_security: str = field(
        default="",
        metadata={"metavar": "DIR", "help": "DIR: make a throwaway CA, certificates, SCRAM users and client configs in DIR and serve "
                          "SASL_SSL and SSL listeners beside PLAINTEXT"},
    )

    def listener_set(self, sources: Sources | None = None) -> Listeners:
        """The listeners to bind and what each one advertises (see broker/listeners.py). Without
        `--listeners`, `--listen` and `--advertised-listener` are one PLAINTEXT listener. KRaft's
        controller listeners (`controller.listener.names`) are checked and left out."""
        src = sources or Sources()
        options = {name: src.label(name) for name in ("listeners", "advertised_listeners",
                                                      "listener_security_protocol_map")}
        listeners, advertised = self.listeners, self.advertised_listeners
        legacy = not listeners.strip()
        listen_port = 9092
        if legacy:
            endpoint = _legacy_endpoint(self.listen, src.label("listen"), 9092)
            listen_port = int(endpoint.rsplit(":", 1)[1])
            listeners = "PLAINTEXT://" + endpoint
            options["listeners"] = src.label("listen")
        if not advertised.strip() and self.advertised_listener.strip():
            # a host alone advertises the port it listens on
            advertised = "PLAINTEXT://" + _legacy_endpoint(self.advertised_listener, src.label("advertised_listener"),
                                                           listen_port)
            options["advertised_listeners"] = src.label("advertised_listener")
        controllers = frozenset(n.strip().upper() for n in self.controller_listener_names.split(",") if n.strip())
        try:
            return resolve(listeners, advertised, self.listener_security_protocol_map, options=options,
                           legacy_loopback=legacy and not advertised.strip(), skip=controllers)
        except ListenerError as e:
            raise ConfigError(str(e)) from None


def _legacy_endpoint(text: str, label: str, default_port: int) -> str:
    """HOST:PORT of the short forms; `PLAINTEXT://HOST:PORT` is taken too (it is what they mean)."""
    scheme, sep, rest = text.strip().partition("://")
    if sep:
        if scheme.upper() != "PLAINTEXT":
            raise ConfigError(f"{label}: {text!r}: the short form is one PLAINTEXT listener; for a {scheme} listener "
                              f"use --listeners {text} (and --listener-security-protocol-map)")
        text = rest
    try:
        host, port = parse_host_port(text, default_port)
    except ValueError:
        raise ConfigError(f"{label}: {text!r} is not HOST:PORT") from None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def load_config(flags: dict[str, Any], config_file: str | None = None, env: Mapping[str, str] | None = None,
                image_paths: Sequence[str] | None = None) -> BrokerConfig:
    """The broker's settings from flags, `KBROKER_*` and `KAFKA_*` variables and a file (in falling
    priority; broker/config_sources.py), checked."""
    return load_config_with_sources(flags, config_file, env, image_paths)[0]


def load_config_with_sources(flags: dict[str, Any], config_file: str | None = None,
                             env: Mapping[str, str] | None = None,
                             image_paths: Sequence[str] | None = None) -> tuple[BrokerConfig, Sources]:
    """As load_config, with where each explicitly set value came from and the notices to log.
    `image_paths`: the files read without --config (default: the apache/kafka image's paths)."""
    from .config_sources import gather
    from .kafka_names import IMAGE_CONFIG_PATHS

    env = os.environ if env is None else env
    values, sources = gather(dataclasses.fields(BrokerConfig), flags, config_file, env,
                             IMAGE_CONFIG_PATHS if image_paths is None else image_paths)
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    for new, old in (("listeners", "listen"), ("advertised_listeners", "advertised_listener")):
        _pick(values, sources, new, old, fields)
    if values.get("profile") == "test":
        for name, value in TEST_PROFILE.items():
            values.setdefault(name, value)  # what the user set explicitly wins over the profile
    if values.get("test_controls") and not values.get("metrics_listen"):
        values["metrics_listen"] = DEFAULT_ADMIN_LISTEN
    cfg = BrokerConfig(**values)
    validate(cfg, sources)
    return cfg, sources


def _pick(values: dict[str, Any], sources: Sources, new: str, old: str, fields: dict) -> None:
    """Kafka's form and the short form of one setting: the one set at the higher priority wins;
    both at the same level is a mistake to report, not to guess about."""
    if new not in sources.levels or old not in sources.levels:
        return
    if sources.levels[new] == sources.levels[old]:
        raise ConfigError(f"{sources.label(old)} and {sources.label(new)} are both set: keep "
                          f"{sources.label(new)} alone")
    loser = old if sources.levels[new] > sources.levels[old] else new
    values[loser] = fields[loser].default
    sources.drop(loser)


_LOG_LEVELS = ("debug", "info", "warning", "error")
# (field, lowest value): counts and sizes must be positive, times and delays may be zero.
_MINIMUM = {
    "node_id": 0, "nodes": 1, "cluster_poll_ms": 1, "postgres_tail_bytes": 0, "postgres_memory_bytes": 0,
    "postgres_read_cache_bytes": 0, "socket_request_max_bytes": 1, "num_partitions": 1, "shutdown_timeout_s": 0,
    "group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 0, "group_max_session_timeout_ms": 0,
    "group_max_size": 1, "offsets_topic_num_partitions": 1, "share_coordinator_state_topic_num_partitions": 1, "offsets_retention_minutes": 1,
    "offsets_retention_check_interval_ms": 1, "offset_metadata_max_bytes": 0, "log_retention_check_interval_ms": 1,
    "log_cleaner_backoff_ms": 0,
    "connections_max_idle_ms": 1, "max_connections": 1, "max_connections_per_ip": 1, "fetch_max_bytes": 1,
    "max_inflated_batch_bytes": 1, "default_replication_factor": 1, "leader_imbalance_check_interval_seconds": 1, "connection_failed_authentication_delay_ms": 0,
    "sasl_oauthbearer_jwks_endpoint_refresh_ms": 1, "sasl_oauthbearer_jwks_endpoint_retry_backoff_ms": 1,
    "sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms": 1, "sasl_oauthbearer_clock_skew_seconds": 0,
    "client_metrics_interval_ms": 1, "telemetry_max_bytes": 1,
}
_INT32_MAX = 2**31 - 1


DEFAULT_ADMIN_LISTEN = "127.0.0.1:9644"
MAX_NODES = 64
# `--profile test`: what every test set-up copies by hand. Explicit settings win.
TEST_PROFILE: dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 1000,
    "flush": "never",
}


def validate(cfg: BrokerConfig, sources: Sources | None = None) -> None:
    src = sources or Sources()
    if cfg.log_format not in ("auto", "console", "json"):
        raise ConfigError(f"{src.label('log_format')}: must be console, json or auto, not {cfg.log_format!r}")
    if cfg.log_level.lower() not in _LOG_LEVELS:
        raise ConfigError(f"{src.label('log_level')}: must be one of {', '.join(_LOG_LEVELS)}, not {cfg.log_level!r}")
    flush_ok = cfg.flush in ("always", "never")
    if cfg.flush.startswith("interval:"):
        ms = cfg.flush.split(":", 1)[1]
        flush_ok = ms.isdigit() and int(ms) > 0
    if not flush_ok:
        raise ConfigError(f"{src.label('flush')}: must be always, never or interval:MS (MS > 0), not {cfg.flush!r}")
    for name, low in _MINIMUM.items():
        value = getattr(cfg, name)
        if value < low:
            raise ConfigError(f"{src.label(name)}: {value!r} is below the minimum {low}")
        if isinstance(value, int) and value > _INT32_MAX:
            raise ConfigError(f"{src.label(name)}: {value!r} is above the maximum {_INT32_MAX}")
    if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
        raise ConfigError(f"{src.label('group_min_session_timeout_ms')}: {cfg.group_min_session_timeout_ms} is above "
                          f"{src.label('group_max_session_timeout_ms')} ({cfg.group_max_session_timeout_ms})")
    if not cfg.data_dir.strip():
        raise ConfigError(f"{src.label('data_dir')}: empty path")
    if cfg.listeners.strip() and cfg.advertised_listener.strip() and not cfg.advertised_listeners.strip():
        raise ConfigError(f"{src.label('advertised_listener')} goes with {src.label('listen')}; with "
                          f"{src.label('listeners')} set {src.label('advertised_listeners')}")
    listeners = cfg.listener_set(src)
    tls = [e.name for e in listeners.bind if e.security_protocol in ("SSL", "SASL_SSL")]
    if tls and not cfg.ssl_keystore_location and not cfg.dev_security:
        raise ConfigError(f"{src.label('ssl_keystore_location')}: listener {tls[0]} uses TLS and needs a PEM file "
                          "with the broker's certificate and key (or --dev-security DIR)")
    if tls and not cfg.dev_security:
        for name in ("ssl_keystore_location", "ssl_truststore_location"):
            path = getattr(cfg, name)
            if path and not os.path.isfile(path):
                raise ConfigError(f"{src.label(name)}: {path} is not a file")
        from .security.tls import server_context

        try:  # a keystore that does not load is a start-up mistake, not a traceback
            server_context(cfg.ssl_keystore_location, cfg.ssl_truststore_location, cfg.ssl_client_auth,
                           cfg.ssl_key_password)
        except (OSError, ValueError) as e:
            raise ConfigError(f"{src.label('ssl_keystore_location')}: cannot load {cfg.ssl_keystore_location}: "
                              f"{e}") from None
    if cfg.cluster and cfg.nodes > 1:
        raise ConfigError(f"{src.label('cluster')} and {src.label('nodes')}: a node of a cluster over PostgreSQL is "
                          f"one broker per process; use one or the other")
    if cfg.default_replication_factor > cfg.nodes:
        raise ConfigError(f"{src.label('default_replication_factor')}: {cfg.default_replication_factor} replicas "
                          f"need as many brokers; this broker serves "
                          f"{'one node' if cfg.nodes == 1 else f'{cfg.nodes} nodes'}, so a topic has at most "
                          f"{cfg.nodes}: set 1{'' if cfg.nodes == 1 else f' to {cfg.nodes}'}, or serve more nodes "
                          f"with {src.label('nodes')}")
    if cfg.nodes > MAX_NODES:
        raise ConfigError(f"{src.label('nodes')}: {cfg.nodes} is above the maximum {MAX_NODES}")
    for endpoint in listeners.bind:
        if endpoint.port + cfg.nodes - 1 > 65535:
            raise ConfigError(f"{src.label('nodes')}: {cfg.nodes} nodes need ports {endpoint.port}.."
                              f"{endpoint.port + cfg.nodes - 1} for listener {endpoint.name}, past 65535")
    _check_topic_defaults(cfg, src)
    from .partitions.startup_topics import parse_create_topics

    parse_create_topics(cfg.create_topics, src.label("create_topics"))
    from ..coordinator.config import GroupConfig

    try:
        GroupConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(GroupConfig)}).validate_consumer()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.profile not in ("", "test"):
        raise ConfigError(f"{src.label('profile')}: must be test (or empty), not {cfg.profile!r}")
    if cfg.metrics_listen:
        try:
            host, _ = parse_host_port(cfg.metrics_listen)
        except ValueError as e:
            raise ConfigError(f"{src.label('metrics_listen')}: {e}") from None
        if cfg.test_controls and not cfg.test_controls_remote and host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigError(f"{src.label('test_controls')} on {cfg.metrics_listen} would let anyone who reaches "
                              f"it delete every topic; bind {src.label('metrics_listen')} to loopback or add "
                              f"--test-controls-remote")
    if cfg.kafka_version:
        from ..protocol.kafka_releases import kafka_release

        try:
            kafka_release(cfg.kafka_version)
        except ValueError as e:
            raise ConfigError(f"{src.label('kafka_version')}: {e}") from None
    if cfg.ssl_client_auth not in ("required", "requested", "none"):
        raise ConfigError(f"{src.label('ssl_client_auth')}: must be required, requested or none, "
                          f"not {cfg.ssl_client_auth!r}")
    _check_security_settings(cfg, src)


def _check_topic_defaults(cfg: BrokerConfig, src: Sources) -> None:
    """Each broker-wide topic default as the topic config it becomes (LogConfig's checks), the
    mistake named by the setting that gave it."""
    from .storage.log.config import InvalidConfigError, LogConfig
    from .topic_defaults import field_of, set_values

    for topic, (value, name) in set_values(cfg).items():
        try:
            LogConfig.from_topic_configs({topic: value})
        except InvalidConfigError as e:
            raise ConfigError(f"{src.label(field_of(name))}: {name}={getattr(cfg, field_of(name))} gives topics "
                              f"{topic}={value}: {str(e).split(': ', 1)[-1]}") from None


def _check_security_settings(cfg: BrokerConfig, src: Sources) -> None:
    """SASL mechanisms and principal mapping rules that do not parse stop the start. Kafka's defaults
    parse (tests/unit/test_config.py holds them to it), and checking them would import the security
    package, which a PLAINTEXT broker without an authorizer loads only with its first use."""
    defaults = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}
    if cfg.connection_failed_authentication_delay_ms >= cfg.connections_max_idle_ms:
        raise ConfigError(f"{src.label('connection_failed_authentication_delay_ms')}: must be below "
                          f"{src.label('connections_max_idle_ms')} ({cfg.connections_max_idle_ms}), as in Kafka")
    if (cfg.sasl_enabled_mechanisms == defaults["sasl_enabled_mechanisms"]
            and cfg.ssl_principal_mapping_rules == defaults["ssl_principal_mapping_rules"]):
        if cfg.dev_unsecured_oauthbearer:
            raise ConfigError(f"{src.label('dev_unsecured_oauthbearer')} has no effect without OAUTHBEARER in "
                              f"{src.label('sasl_enabled_mechanisms')}")
        return
    from .security.service import parse_mechanisms
    from .security.tls import PrincipalMapper

    try:
        parse_mechanisms(cfg.sasl_enabled_mechanisms)
    except ValueError as e:
        raise ConfigError(f"{src.label('sasl_enabled_mechanisms')}: {e}") from None
    try:
        PrincipalMapper(cfg.ssl_principal_mapping_rules)
    except ValueError as e:
        raise ConfigError(f"{src.label('ssl_principal_mapping_rules')}: {e}") from None
    oauthbearer = "OAUTHBEARER" in parse_mechanisms(cfg.sasl_enabled_mechanisms)
    if cfg.dev_unsecured_oauthbearer and not oauthbearer:
        raise ConfigError(f"{src.label('dev_unsecured_oauthbearer')} has no effect without OAUTHBEARER in "
                          f"{src.label('sasl_enabled_mechanisms')}")
    if oauthbearer and not cfg.dev_security:
        from .security.oauth import OAuthSettingsError, check_settings

        try:  # --dev-security supplies its own key set (security/dev_security.py configure)
            check_settings(cfg)
        except OAuthSettingsError as e:
            raise ConfigError(f"{src.label(e.setting)}: {e}") from None
