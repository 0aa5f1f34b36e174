"""DescribeConfigs (32), v1-v4: topic and broker resources.

Topic resources list every topic config LogConfig knows, with its value and source: an override is
DYNAMIC_TOPIC_CONFIG (1), anything else DEFAULT_CONFIG (5) since the broker has no log.* settings of
its own. Synonyms (when asked) follow Kafka's order: the topic override first, then the broker-level
name that would supply the default (Kafka names only the first, and only when it has a value: no
`log.retention.hours` under `retention.ms`). Broker resources (name = this node id as a string) list
the broker settings that have a Kafka name: STATIC_BROKER_CONFIG (4) when set by flag, environment
or file, DEFAULT_CONFIG otherwise (a static one names its default as a second synonym, as Kafka's
does), all read-only because dynamic broker configs are not supported, each documented by its help
text. Sensitive ones (passwords) are described without their value. The empty broker name
(cluster-wide dynamic defaults) is empty.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from ..config import BrokerConfig
from ..storage.log.config import ConfigEntry, LogConfig, default_of
from .repeats import charge, distinct, in_request_order
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_configs_request import DescribeConfigsRequest
from ...protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 32
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
VERSIONS = (0, 4)

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# ConfigSource
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCES = {"DYNAMIC_TOPIC_CONFIG": SOURCE_DYNAMIC_TOPIC, "DEFAULT_CONFIG": SOURCE_DEFAULT,
           "STATIC_BROKER_CONFIG": SOURCE_STATIC_BROKER}

# ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9

DEFAULT, HOURS = "<default>", "<default in hours>"  # markers, resolved below

# topic config -> (type, documentation, broker synonyms with the default Kafka gives them: DEFAULT
# for the topic config's own (storage/log/config.py owns them), HOURS for it in hours, None when the
# broker name has no default of its own; the first is the one DescribeConfigs names)
_TOPIC_CONFIGS: dict[str, tuple[int, str, tuple[tuple[str, str | None], ...]]] = {
    "cleanup.policy": (LIST, "Whether old segments are deleted, compacted by key, or both.",
                       (("log.cleanup.policy", DEFAULT),)),
    "compression.gzip.level": (INT, "The gzip level for compression.type=gzip (1-9, or -1 for the codec's default).",
                               (("compression.gzip.level", DEFAULT),)),
    "compression.lz4.level": (INT, "The lz4 level for compression.type=lz4 (1-17).", (("compression.lz4.level", DEFAULT),)),
    "compression.type": (STRING, "Compression codec the topic stores batches with; 'producer' keeps the producer's.",
                         (("compression.type", DEFAULT),)),
    "compression.zstd.level": (INT, "The zstd level for compression.type=zstd (-131072 to 22).",
                               (("compression.zstd.level", DEFAULT),)),
    "delete.retention.ms": (LONG, "How long tombstones stay readable in a compacted topic.",
                            (("log.cleaner.delete.retention.ms", DEFAULT),)),
    "file.delete.delay.ms": (LONG, "Delay before a deleted segment file is removed from disk.",
                             (("log.segment.delete.delay.ms", DEFAULT),)),
    "flush.messages": (LONG, "Records appended between forced fsyncs.",
                       (("log.flush.interval.messages", DEFAULT),)),
    "flush.ms": (LONG, "Milliseconds between forced fsyncs.",
                 (("log.flush.interval.ms", None), ("log.flush.scheduler.interval.ms", DEFAULT))),
    "index.interval.bytes": (INT, "Bytes of records between two offset-index entries.",
                             (("log.index.interval.bytes", DEFAULT),)),
    "max.compaction.lag.ms": (LONG, "Longest time a record may stay uncompacted.",
                              (("log.cleaner.max.compaction.lag.ms", DEFAULT),)),
    "max.message.bytes": (INT, "Largest record batch the topic accepts, in bytes.",
                          (("message.max.bytes", DEFAULT),)),
    "message.timestamp.after.max.ms": (LONG, "How far in the future a CreateTime timestamp may be.",
                                       (("log.message.timestamp.after.max.ms", DEFAULT),)),
    "message.timestamp.before.max.ms": (LONG, "How far in the past a CreateTime timestamp may be.",
                                        (("log.message.timestamp.before.max.ms", DEFAULT),)),
    "message.timestamp.type": (STRING, "CreateTime keeps the producer's timestamps; LogAppendTime uses the broker's.",
                               (("log.message.timestamp.type", DEFAULT),)),
    "min.cleanable.dirty.ratio": (DOUBLE, "Share of uncompacted log that makes a compacted topic eligible for cleaning.",
                                  (("log.cleaner.min.cleanable.ratio", DEFAULT),)),
    "min.compaction.lag.ms": (LONG, "Shortest time a record stays uncompacted.",
                              (("log.cleaner.min.compaction.lag.ms", DEFAULT),)),
    "min.insync.replicas": (INT, "Replicas that must acknowledge an acks=all write.",
                            (("min.insync.replicas", DEFAULT),)),
    "preallocate": (BOOLEAN, "Whether segment files are preallocated.", (("log.preallocate", DEFAULT),)),
    "retention.bytes": (LONG, "Size a partition may grow to before old segments are deleted; -1 for no limit.",
                        (("log.retention.bytes", DEFAULT),)),
    "retention.ms": (LONG, "Age after which segments are deleted; -1 for no limit.",
                     (("log.retention.ms", None), ("log.retention.minutes", None), ("log.retention.hours", HOURS))),
    "segment.bytes": (INT, "Size at which the active segment is rolled.", (("log.segment.bytes", DEFAULT),)),
    "segment.index.bytes": (INT, "Size of a segment's offset index.", (("log.index.size.max.bytes", DEFAULT),)),
    "segment.jitter.ms": (LONG, "Random jitter subtracted from segment.ms.",
                          (("log.roll.jitter.ms", None), ("log.roll.jitter.hours", HOURS))),
    "segment.ms": (LONG, "Age at which the active segment is rolled.",
                   (("log.roll.ms", None), ("log.roll.hours", HOURS))),
    "unclean.leader.election.enable": (BOOLEAN, "Whether an out-of-sync replica may become leader.",
                                       (("unclean.leader.election.enable", DEFAULT),)),
}



def _resolved(topic: str, value: str | None) -> str | None:
    if value == DEFAULT:
        return default_of(topic)
    if value == HOURS:
        return str(int(default_of(topic)) // 3_600_000)
    return value


TOPIC_CONFIGS = {topic: (kind, doc, tuple((name, _resolved(topic, value)) for name, value in synonyms))
                 for topic, (kind, doc, synonyms) in _TOPIC_CONFIGS.items()}

# The broker-level synonyms whose type is not their topic config's (hours where the topic has ms).
SYNONYM_TYPES = {"log.retention.hours": INT, "log.retention.minutes": INT, "log.roll.hours": INT,
                 "log.roll.jitter.hours": INT}

# BrokerConfig field -> (Kafka name, type). Only settings Kafka has; kbroker-only ones stay out.
BROKER_CONFIGS: tuple[tuple[str, str, int], ...] = (
    ("node_id", "node.id", INT),
    ("node_id", "broker.id", INT),
    ("listeners", "listeners", LIST),
    ("advertised_listeners", "advertised.listeners", LIST),
    ("listener_security_protocol_map", "listener.security.protocol.map", STRING),
    ("data_dir", "log.dirs", LIST),
    ("auto_create_topics_enable", "auto.create.topics.enable", BOOLEAN),
    ("num_partitions", "num.partitions", INT),
    ("socket_request_max_bytes", "socket.request.max.bytes", INT),
    ("group_initial_rebalance_delay_ms", "group.initial.rebalance.delay.ms", INT),
    ("group_min_session_timeout_ms", "group.min.session.timeout.ms", INT),
    ("group_max_session_timeout_ms", "group.max.session.timeout.ms", INT),
    ("group_max_size", "group.max.size", INT),
    ("offsets_topic_num_partitions", "offsets.topic.num.partitions", INT),
    ("offsets_retention_minutes", "offsets.retention.minutes", INT),
    ("offsets_retention_check_interval_ms", "offsets.retention.check.interval.ms", LONG),
    ("offset_metadata_max_bytes", "offset.metadata.max.bytes", INT),
    ("log_retention_check_interval_ms", "log.retention.check.interval.ms", LONG),
    ("connections_max_idle_ms", "connections.max.idle.ms", LONG),
    ("connections_max_reauth_ms", "connections.max.reauth.ms", LONG),
    ("max_connections", "max.connections", INT),
    ("max_connections_per_ip", "max.connections.per.ip", INT),
    ("fetch_max_bytes", "fetch.max.bytes", INT),
    ("group_consumer_session_timeout_ms", "group.consumer.session.timeout.ms", INT),
    ("group_consumer_min_session_timeout_ms", "group.consumer.min.session.timeout.ms", INT),
    ("group_consumer_max_session_timeout_ms", "group.consumer.max.session.timeout.ms", INT),
    ("group_consumer_heartbeat_interval_ms", "group.consumer.heartbeat.interval.ms", INT),
    ("group_consumer_min_heartbeat_interval_ms", "group.consumer.min.heartbeat.interval.ms", INT),
    ("group_consumer_max_heartbeat_interval_ms", "group.consumer.max.heartbeat.interval.ms", INT),
    ("group_consumer_max_size", "group.consumer.max.size", INT),
    ("group_consumer_assignors", "group.consumer.assignors", LIST),
    ("group_consumer_migration_policy", "group.consumer.migration.policy", STRING),
    ("transaction_max_timeout_ms", "transaction.max.timeout.ms", INT),
    ("transaction_state_log_num_partitions", "transaction.state.log.num.partitions", INT),
    ("transaction_abort_timed_out_transaction_cleanup_interval_ms",
     "transaction.abort.timed.out.transaction.cleanup.interval.ms", INT),
    ("transactional_id_expiration_ms", "transactional.id.expiration.ms", INT),
    ("sasl_enabled_mechanisms", "sasl.enabled.mechanisms", LIST),
    ("sasl_server_max_receive_size", "sasl.server.max.receive.size", INT),
    ("sasl_oauthbearer_jwks_endpoint_url", "sasl.oauthbearer.jwks.endpoint.url", STRING),
    ("sasl_oauthbearer_jwks_endpoint_refresh_ms", "sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG),
    ("sasl_oauthbearer_jwks_endpoint_retry_backoff_ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG),
    ("sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
     LONG),
    ("sasl_oauthbearer_expected_audience", "sasl.oauthbearer.expected.audience", LIST),
    ("sasl_oauthbearer_expected_issuer", "sasl.oauthbearer.expected.issuer", STRING),
    ("sasl_oauthbearer_allow_unverified_audience", "sasl.oauthbearer.allow.unverified.audience", BOOLEAN),
    ("sasl_oauthbearer_allow_unverified_issuer", "sasl.oauthbearer.allow.unverified.issuer", BOOLEAN),
    ("sasl_oauthbearer_clock_skew_seconds", "sasl.oauthbearer.clock.skew.seconds", INT),
    ("sasl_oauthbearer_sub_claim_name", "sasl.oauthbearer.sub.claim.name", STRING),
    ("sasl_oauthbearer_scope_claim_name", "sasl.oauthbearer.scope.claim.name", STRING),
    ("connection_failed_authentication_delay_ms", "connection.failed.authentication.delay.ms", INT),
    ("ssl_keystore_location", "ssl.keystore.location", STRING),
    ("ssl_key_password", "ssl.key.password", PASSWORD),
    ("ssl_truststore_location", "ssl.truststore.location", STRING),
    ("ssl_client_auth", "ssl.client.auth", STRING),
    ("ssl_principal_mapping_rules", "ssl.principal.mapping.rules", STRING),
    ("authorizer_class_name", "authorizer.class.name", STRING),
)
# Settings Kafka reports as null when unset (no default value); kbroker's empty string stands for that.
NULL_WHEN_EMPTY = frozenset({"ssl.keystore.location", "ssl.key.password", "ssl.truststore.location",
                             "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.issuer"})
# Fixed facts of a single-node broker, reported with Kafka's names: (name, value, type, documentation).
BROKER_FIXED: tuple[tuple[str, str, int, str], ...] = (
    ("default.replication.factor", "1", INT, "Replicas of automatically created topics: one, on this single node."),
    ("delete.topic.enable", "true", BOOLEAN, "Topics can be deleted (DeleteTopics)."),
    ("offsets.topic.replication.factor", "1", SHORT, "Replicas of __consumer_offsets: one, on this single node."),
    ("offsets.topic.segment.bytes", "104857600", INT, "Segment size of __consumer_offsets."),
    ("offsets.topic.compression.codec", "0", INT, "Compression of the group coordinator's records: none."),
    ("transaction.state.log.replication.factor", "1", SHORT,
     "Replicas of __transaction_state: one, on this single node."),
    ("transaction.state.log.min.isr", "1", INT, "In-sync replicas __transaction_state needs: this node."),
    ("transaction.state.log.segment.bytes", "104857600", INT, "Segment size of __transaction_state."),
    ("log.cleaner.enable", "true", BOOLEAN, "Compacted topics are cleaned (at the log retention check)."),
    ("max.incremental.fetch.session.cache.slots", "1000", INT, "Incremental fetch sessions kept at once (KIP-227)."),
    ("producer.id.expiration.ms", "86400000", INT,
     "How long an idle producer id's state is kept when it has no transaction open."),
    ("group.coordinator.rebalance.protocols", "classic,consumer", LIST,
     "The group protocols the coordinator serves: classic and KIP-848's consumer protocol."),
)


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_config_rows(config: LogConfig) -> list[ConfigEntry]:
    """LogConfig.describe(), sorted by name like Kafka's output."""
    return sorted(config.describe(), key=lambda e: e.name)


def _synonyms(entry: ConfigEntry) -> list[DescribeConfigsSynonym]:
    out = []
    if entry.source == "DYNAMIC_TOPIC_CONFIG":
        out.append(DescribeConfigsSynonym(entry.name, entry.value, SOURCE_DYNAMIC_TOPIC))
    meta = TOPIC_CONFIGS.get(entry.name)
    if meta is not None and meta[2]:
        name, default = meta[2][0]
        if default is not None:
            out.append(DescribeConfigsSynonym(name, default, SOURCE_DEFAULT))
    return out


def _topic_result(entry: ConfigEntry, synonyms: bool, docs: bool) -> DescribeConfigsResourceResult:
    meta = TOPIC_CONFIGS.get(entry.name)
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=False,
        config_source=SOURCES.get(entry.source, 0),
        is_sensitive=False,
        synonyms=_synonyms(entry) if synonyms else [],
        config_type=meta[0] if meta else 0,
        documentation=(meta[1] if meta else None) if docs else None,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerRow:
    """One broker config as DescribeConfigs describes it; `default` is the value of the DEFAULT_CONFIG
    synonym a static setting also names (None: it has no default)."""

    name: str
    value: str | None
    source: int
    kind: int
    default: str | None
    documentation: str

    @property
    def sensitive(self) -> bool:
        return self.kind == PASSWORD


def broker_config_rows(config: BrokerConfig) -> list[BrokerRow]:
    """Every broker setting with a Kafka name, sorted by name."""
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    rows = []
    for attr, name, kind in BROKER_CONFIGS:
        value, default = getattr(config, attr), fields[attr].default
        source = SOURCE_DEFAULT if value == default else SOURCE_STATIC_BROKER
        if name in ("listeners", "advertised.listeners"):
            listeners = config.listener_set()
            value = listeners.describe("listeners" if name == "listeners" else "advertised")
            if attr == "listeners" and config.listen != fields["listen"].default:
                source = SOURCE_STATIC_BROKER
            if attr == "advertised_listeners" and config.advertised_listener:
                source = SOURCE_STATIC_BROKER
            # advertised.listeners follows listeners when not set: no default of its own
            default = f"PLAINTEXT://{fields['listen'].default}" if name == "listeners" else None
        if name in NULL_WHEN_EMPTY and default == "":
            default = None
        shown = None if name in NULL_WHEN_EMPTY and value == "" else _render(value)
        rows.append(BrokerRow(name, shown, source, kind, None if default is None else _render(default),
                              fields[attr].metadata.get("help", "")))
    for name, value, kind, doc in BROKER_FIXED:
        rows.append(BrokerRow(name, value, SOURCE_DEFAULT, kind, value, doc))
    seen = {r.name for r in rows}
    for topic_name, (kind, doc, synonyms) in TOPIC_CONFIGS.items():
        for name, default in synonyms:
            if default is not None and name not in seen:
                seen.add(name)
                rows.append(BrokerRow(name, default, SOURCE_DEFAULT, SYNONYM_TYPES.get(name, kind), default,
                                      f"The default of the topic config {topic_name}: {doc}"))
    return sorted(rows, key=lambda r: r.name)


def _broker_synonyms(row: BrokerRow) -> list[DescribeConfigsSynonym]:
    """The setting where it was set, then its default, most specific first; a setting without a
    default and not set has none (Kafka's null defaults)."""
    out = []
    if row.source != SOURCE_DEFAULT:
        out.append(DescribeConfigsSynonym(row.name, row.value, row.source))
    if row.default is not None:
        out.append(DescribeConfigsSynonym(row.name, row.default, SOURCE_DEFAULT))
    return out


def java_int(text: str) -> int | None:
    """Java's Integer.parseInt: a sign and ASCII digits, no spaces or underscores (Python's int()
    takes " 1" and "1_0"), within 32 bits; None where it throws."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


def broker_resource_error(broker: BrokerServices, resource_name: str) -> tuple[ErrorCode, str] | None:
    """Kafka accepts this node's id or the empty name (cluster defaults); anything else is invalid."""
    if resource_name == "":
        return None
    node = java_int(resource_name)
    if node is None:
        return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {resource_name}"
    if node != broker.node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} or empty string, but received {resource_name}"
    return None


def failed_response(_ctx: RequestContext, request: DescribeConfigsRequest, error: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        DescribeConfigsResult(error_code=error, error_message=None, resource_type=r.resource_type,
                              resource_name=r.resource_name, configs=[])
        for r in request.resources
    ])


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker = ctx.broker
    synonyms = request.include_synonyms
    docs = request.include_documentation and ctx.api_version >= 3
    # A resource named more than once (with the same keys) is described once, its entry standing
    # in each place.
    keys = [(res.resource_type, res.resource_name,
             None if res.configuration_keys is None else tuple(res.configuration_keys)) for res in request.resources]
    # One broker has many spellings ("1", "01", "+1"): each is answered in its own name, and
    # counts as a repeat of the first.
    answers: dict[tuple, DescribeConfigsResult] = {}
    described: set[tuple] = set()
    added = 0
    for key in distinct(keys):
        answer = answers[key] = _describe(broker, *key, synonyms, docs)
        node = java_int(key[1]) if key[0] == RESOURCE_BROKER else None
        same = key if node is None else (key[0], node, key[2])
        if same in described:
            added = charge(added, answer)
        described.add(same)
    results = in_request_order(keys, answers, added)
    if ctx.api_version == 0:  # v0 has IsDefault where later versions have ConfigSource
        for result in answers.values():
            for config in result.configs:
                config.is_default = config.config_source == SOURCE_DEFAULT
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe(broker: BrokerServices, resource_type: int, resource_name: str, wanted: tuple[str, ...] | None,
              synonyms: bool, docs: bool) -> DescribeConfigsResult:
    keys = None if wanted is None else set(wanted)
    result = DescribeConfigsResult(error_code=ErrorCode.NONE, error_message=None, resource_type=resource_type,
                                   resource_name=resource_name, configs=[])
    if resource_type == RESOURCE_TOPIC:
        info = broker.logs.topics().get(resource_name)
        if info is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = ""  # as Kafka 4.4 answers (clients then show the code's own message)
            return result
        for entry in topic_config_rows(info.config):
            if keys is None or entry.name in keys:
                result.configs.append(_topic_result(entry, synonyms, docs))
    elif resource_type == RESOURCE_BROKER:
        error = broker_resource_error(broker, resource_name)
        if error is not None:
            result.error_code, result.error_message = error
            return result
        if resource_name == "":
            return result  # no dynamic cluster-wide defaults exist
        for row in broker_config_rows(broker.config):
            if keys is not None and row.name not in keys:
                continue
            if row.sensitive:  # Kafka never shows a password's value, nor its default's
                row = dataclasses.replace(row, value=None, default=None)
            result.configs.append(DescribeConfigsResourceResult(
                name=row.name, value=row.value, read_only=True, config_source=row.source,
                is_sensitive=row.sensitive, synonyms=_broker_synonyms(row) if synonyms else [],
                config_type=row.kind, documentation=row.documentation if docs else None,
            ))
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type: {resource_type}"
    return result
