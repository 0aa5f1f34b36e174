"""DescribeConfigs (32), v1-v4: topic and broker resources, answered as Kafka 4.4 answers them.

Topic resources list every topic config LogConfig knows, with its value and source: an override is
DYNAMIC_TOPIC_CONFIG (1); otherwise the broker-wide default (broker/topic_defaults.py) is
STATIC_BROKER_CONFIG (4) when a broker setting of the config's synonym chain gives it, DEFAULT_CONFIG
(5) when Kafka's default does, with the synonyms (when asked) in Kafka 4.4's order and quirks (a
topic config names its chain from the first broker name on, so `retention.ms` at its default names no
`log.retention.hours`). Broker resources (name = this node id as a string) list the broker settings
that have a Kafka name, kbroker's own under Kafka's where Kafka has one (`connections.max.reauth.ms`,
`group.consumer.*`, `transaction.*`, `sasl.*`, `ssl.*`, ...), and a few fixed facts of a single node:
DYNAMIC_BROKER_CONFIG (2) or DYNAMIC_DEFAULT_BROKER_CONFIG (3) when a dynamic broker config sets it
(broker/dynamic_configs.py), STATIC_BROKER_CONFIG when set by flag, environment or file,
DEFAULT_CONFIG otherwise, each source down the chain a synonym as in Kafka (a static one names its
default as a second synonym); read-only unless Kafka can change it at run time; each documented by
its help text. Sensitive ones (passwords) are described without their value. kbroker adds its HTTP
endpoint (`kbroker.http.endpoint`) for the admin CLI. The empty broker name lists the cluster-wide
dynamic defaults that are set, as Kafka does.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from .. import topic_defaults
from ..config import BrokerConfig
from ..dynamic_configs import (DYNAMIC_DEFAULT, KEPT_DEFAULTS, DynamicBrokerConfigs, applied, base_name, is_dynamic,
                               sensitive)
from ..kafka_settings import KAFKA_BROKER_LISTS, KAFKA_BROKER_SETTINGS
from ..partitions.catalogue import ConfigEntry, LogConfig, known_in
from ...coordinator.groups.group_configs import GROUP_CONFIGS, validate_group_name
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
RESOURCE_GROUP = 32
SOURCE_GROUP = 8  # GROUP_CONFIG

# ConfigSource
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCES = {"DYNAMIC_TOPIC_CONFIG": SOURCE_DYNAMIC_TOPIC, "DEFAULT_CONFIG": SOURCE_DEFAULT,
           "STATIC_BROKER_CONFIG": SOURCE_STATIC_BROKER, "DYNAMIC_BROKER_CONFIG": SOURCE_DYNAMIC_BROKER,
           "DYNAMIC_DEFAULT_BROKER_CONFIG": SOURCE_DYNAMIC_DEFAULT}

# ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
_JAVA_TYPES = {"STRING": STRING, "INT": INT, "LONG": LONG, "DOUBLE": DOUBLE, "LIST": LIST}

# topic config -> (type, documentation); its broker synonyms are broker/topic_defaults.py's
TOPIC_CONFIGS: dict[str, tuple[int, str]] = {
    "cleanup.policy": (LIST, "Whether old segments are deleted, compacted by key, or both."),
    "compression.gzip.level": (INT, "The gzip level for compression.type=gzip (1-9, or -1 for the codec's default)."),
    "compression.lz4.level": (INT, "The lz4 level for compression.type=lz4 (1-17)."),
    "compression.type": (STRING, "Compression codec the topic stores batches with; 'producer' keeps the producer's."),
    "compression.zstd.level": (INT, "The zstd level for compression.type=zstd (-131072 to 22)."),
    "delete.retention.ms": (LONG, "How long tombstones stay readable in a compacted topic."),
    "file.delete.delay.ms": (LONG, "Delay before a deleted segment file is removed from disk."),
    "flush.messages": (LONG, "Records appended between forced fsyncs."),
    "flush.ms": (LONG, "Milliseconds between forced fsyncs."),
    "index.interval.bytes": (INT, "Bytes of records between two offset-index entries."),
    "max.compaction.lag.ms": (LONG, "Longest time a record may stay uncompacted."),
    "max.message.bytes": (INT, "Largest record batch the topic accepts, in bytes."),
    "message.timestamp.after.max.ms": (LONG, "How far in the future a CreateTime timestamp may be."),
    "message.timestamp.before.max.ms": (LONG, "How far in the past a CreateTime timestamp may be."),
    "message.timestamp.type": (STRING, "CreateTime keeps the producer's timestamps; LogAppendTime uses the broker's."),
    "min.cleanable.dirty.ratio": (DOUBLE,
                                 "Share of uncompacted log that makes a compacted topic eligible for cleaning."),
    "min.compaction.lag.ms": (LONG, "Shortest time a record stays uncompacted."),
    "min.insync.replicas": (INT, "Replicas that must acknowledge an acks=all write."),
    "preallocate": (BOOLEAN, "Whether segment files are preallocated."),
    "retention.bytes": (LONG, "Size a partition may grow to before old segments are deleted; -1 for no limit."),
    "retention.ms": (LONG, "Age after which segments are deleted; -1 for no limit."),
    "segment.bytes": (INT, "Size at which the active segment is rolled."),
    "segment.index.bytes": (INT, "Size of a segment's offset index."),
    "segment.jitter.ms": (LONG, "Random jitter subtracted from segment.ms."),
    "segment.ms": (LONG, "Age at which the active segment is rolled."),
    "unclean.leader.election.enable": (BOOLEAN, "Whether an out-of-sync replica may become leader."),
}

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
    ("controller_listener_names", "controller.listener.names", LIST),
    ("data_dir", "log.dirs", LIST),
    ("auto_create_topics_enable", "auto.create.topics.enable", BOOLEAN),
    ("num_partitions", "num.partitions", INT),
    ("default_replication_factor", "default.replication.factor", INT),
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
    ("log_cleaner_backoff_ms", "log.cleaner.backoff.ms", LONG),
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
                             "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.issuer",
                             "controller.listener.names"})
# Fixed facts of a single-node broker, reported with Kafka's names: (name, value, type, documentation).
BROKER_FIXED: tuple[tuple[str, str, int, str], ...] = (
    ("delete.topic.enable", "true", BOOLEAN, "Topics can be deleted (DeleteTopics)."),
    ("offsets.topic.replication.factor", "1", SHORT, "Replicas of __consumer_offsets: one, on this single node."),
    ("offsets.topic.segment.bytes", "104857600", INT, "Segment size of __consumer_offsets."),
    ("offsets.topic.compression.codec", "0", INT, "Compression of the group coordinator's records: none."),
    ("transaction.state.log.replication.factor", "1", SHORT,
     "Replicas of __transaction_state: one, on this single node."),
    ("transaction.state.log.min.isr", "1", INT, "In-sync replicas __transaction_state needs: this node."),
    ("transaction.state.log.segment.bytes", "104857600", INT, "Segment size of __transaction_state."),
    ("log.cleaner.enable", "true", BOOLEAN,
     "Compacted topics are cleaned by the log cleaner (every log.cleaner.backoff.ms when none is dirty enough)."),
    ("max.incremental.fetch.session.cache.slots", "1000", INT, "Incremental fetch sessions kept at once (KIP-227)."),
    ("producer.id.expiration.ms", "86400000", INT,
     "How long an idle producer id's state is kept when it has no transaction open."),
    ("group.coordinator.rebalance.protocols", "classic,consumer", LIST,
     "The group protocols the coordinator serves: classic and KIP-848's consumer protocol."),
)


# kbroker's own row: where its HTTP endpoint (--metrics-listen) answers, for the admin CLI.
HTTP_ENDPOINT = "kbroker.http.endpoint"
_HTTP_ENDPOINT_DOC = ("kbroker's HTTP endpoint (--metrics-listen: metrics, health, the admin API) as this "
                      "listener's clients reach it")


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_config_rows(config: LogConfig) -> list[ConfigEntry]:
    """LogConfig.describe(), sorted by name like Kafka's output."""
    return sorted(config.describe(), key=lambda e: e.name)


def _synonym_rows(rows: list[tuple[str, str | None, str]]) -> list[DescribeConfigsSynonym]:
    return [DescribeConfigsSynonym(name, value, SOURCES[source]) for name, value, source in rows]


def _topic_result(entry: ConfigEntry, broker_values: dict[str, str], config: BrokerConfig, synonyms: bool,
                  docs: bool, dynamic: DynamicBrokerConfigs | None = None) -> DescribeConfigsResourceResult:
    """A topic config: its override, else the broker-wide default with Kafka's source for it."""
    meta = TOPIC_CONFIGS.get(entry.name)
    chain = topic_defaults.topic_synonyms(config, entry.name, dynamic.synonyms if dynamic is not None else None)
    if entry.source == "DYNAMIC_TOPIC_CONFIG":
        value, source = entry.value, SOURCE_DYNAMIC_TOPIC
        chain = [(entry.name, entry.value, "DYNAMIC_TOPIC_CONFIG"), *chain]
    else:
        value = broker_values.get(entry.name, entry.value)
        source = SOURCES[chain[0][2]] if chain else SOURCE_DEFAULT
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=value,
        read_only=False,
        config_source=source,
        is_sensitive=False,
        synonyms=_synonym_rows(chain) if synonyms else [],
        config_type=meta[0] if meta else 0,
        documentation=(meta[1] if meta else None) if docs else None,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerRow:
    """One broker config as DescribeConfigs describes it, with its synonyms (name, value, source)."""

    name: str
    value: str | None
    source: int
    kind: int
    synonyms: tuple[tuple[str, str | None, int], ...]
    documentation: str

    @property
    def sensitive(self) -> bool:
        return self.kind == PASSWORD

    def hidden(self) -> BrokerRow:
        """Kafka never shows a password's value, nor its synonyms'."""
        return dataclasses.replace(self, value=None, synonyms=tuple((n, None, s) for n, _, s in self.synonyms))


def _setting_synonyms(name: str, value: str | None, source: int,
                      default: str | None) -> tuple[tuple[str, str | None, int], ...]:
    """The setting where it was set, then its default (a setting without a default has none, as
    Kafka's null defaults)."""
    out = []
    if source != SOURCE_DEFAULT:
        out.append((name, value, source))
    if default is not None:
        out.append((name, default, SOURCE_DEFAULT))
    return tuple(out)


def _with_dynamic(row: BrokerRow, dynamic: DynamicBrokerConfigs | None) -> BrokerRow:
    """A setting set by a dynamic broker config: that value, its source, and the dynamic entries
    before the static ones among its synonyms."""
    found = dynamic.synonyms([row.name]) if dynamic is not None else []
    if not found:
        return row
    entries = tuple((n, v, SOURCES[src]) for n, v, src in found)
    return dataclasses.replace(row, value=entries[0][1], source=entries[0][2], synonyms=entries + row.synonyms)


def _dynamic_only_rows(dynamic: DynamicBrokerConfigs, known: dict[str, BrokerRow]) -> list[BrokerRow]:
    """Kafka settings a dynamic broker config sets that kbroker does not otherwise describe (its thread
    pools, ...): Kafka describes every setting it has, so these are described with their dynamic value.
    A listener-prefixed one (`listener.name.x.max.connections`) as Kafka describes it: read-only (the
    prefixed name is not among its dynamic settings), undocumented, typed and defaulted as its own name."""
    rows = []
    for name in sorted((set(dynamic.node) | set(dynamic.default)) - set(known)):
        base = known.get(base_name(name)) if name != base_name(name) else None
        if base is not None:
            entries: tuple[tuple[str, str | None, int], ...] = tuple(
                (n, v, SOURCES[src]) for n, v, src in dynamic.synonyms([name]))
            entries += tuple(s for s in base.synonyms if s[2] == SOURCE_DEFAULT)
            rows.append(BrokerRow(name, entries[0][1], entries[0][2], base.kind, entries, ""))
        elif name in KAFKA_BROKER_SETTINGS:
            entries = tuple((n, v, SOURCES[src]) for n, v, src in dynamic.synonyms([name]))
            default, java_type = KEPT_DEFAULTS.get(name) or (
                (KAFKA_BROKER_LISTS[name], "LIST") if name in KAFKA_BROKER_LISTS else (None, "STRING"))
            if default is not None:
                entries += ((name, default, SOURCE_DEFAULT),)
            kind = PASSWORD if sensitive(name) else _JAVA_TYPES[java_type]
            rows.append(BrokerRow(name, entries[0][1], entries[0][2], kind, entries,
                                  "A Kafka setting set as a dynamic broker config; kbroker keeps and reports it "
                                  "but has no use for it." if not applied(name) else
                                  "A Kafka setting set as a dynamic broker config; kbroker applies it."))
    return rows


def cluster_default_rows(dynamic: DynamicBrokerConfigs, known: dict[str, BrokerRow]) -> list[BrokerRow]:
    """The empty broker name: the cluster-wide dynamic defaults that are set, each with only its
    DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (ConfigHelper.createBrokerConfigEntry, perBrokerConfig=false);
    type and documentation are the node's row's (`known`)."""
    rows = []
    for name, value in sorted(dynamic.default.items()):
        chain = topic_defaults.chain_of(name) or [name]
        entries = tuple((n, v, SOURCES[src]) for n, v, src in dynamic.synonyms(chain) if src == DYNAMIC_DEFAULT)
        while entries and entries[0][0] != name:
            entries = entries[1:]
        row = known.get(name)
        kind = row.kind if row is not None else PASSWORD if sensitive(name) else 0
        rows.append(BrokerRow(name, value, SOURCE_DYNAMIC_DEFAULT, kind, entries,
                              row.documentation if row is not None else ""))
    return rows


def broker_config_rows(config: BrokerConfig, explicit: frozenset[str] = frozenset(),
                       http_endpoint: str | None = None,
                       dynamic: DynamicBrokerConfigs | None = None) -> list[BrokerRow]:
    """Every broker setting with a Kafka name, sorted by name. A setting is STATIC_BROKER_CONFIG when
    set by flag, variable or file (`explicit`) or away from its default; a dynamic broker config
    over it gives its value and source. `config`: the settings as the broker started."""
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    rows = []
    for attr, name, kind in BROKER_CONFIGS:
        value, default = getattr(config, attr), fields[attr].default
        static = attr in explicit or value != default
        if name in ("listeners", "advertised.listeners"):
            value = config.listener_set().describe("listeners" if name == "listeners" else "advertised")
            if name == "listeners":
                static = static or config.listen != fields["listen"].default
                default = f"PLAINTEXT://{fields['listen'].default}"
            else:  # advertised.listeners follows listeners when not set: no default of its own
                static = static or bool(config.advertised_listener)
                default = None
        if name in NULL_WHEN_EMPTY and default == "":
            default = None
        shown = None if name in NULL_WHEN_EMPTY and value == "" else _render(value)
        source = SOURCE_STATIC_BROKER if static else SOURCE_DEFAULT
        rows.append(_with_dynamic(BrokerRow(
            name, shown, source, kind,
            _setting_synonyms(name, shown, source, None if default is None else _render(default)),
            fields[attr].metadata.get("help", "")), dynamic))
    for name, value, kind, doc in BROKER_FIXED:
        rows.append(_with_dynamic(BrokerRow(name, value, SOURCE_DEFAULT, kind, ((name, value, SOURCE_DEFAULT),), doc),
                                  dynamic))
    for topic, chain in topic_defaults.BROKER_SYNONYMS.items():
        for name, _ in chain:
            found = topic_defaults.synonyms(config, name, dynamic.synonyms if dynamic is not None else None)
            own = [v for n, v, _ in found if n == name]
            value = own[0] if own else topic_defaults.kafka_default(name)
            rows.append(BrokerRow(name, value, SOURCES[found[0][2]] if found else SOURCE_DEFAULT,
                                  SYNONYM_TYPES.get(name, TOPIC_CONFIGS[topic][0]),
                                  tuple((n, v, SOURCES[s]) for n, v, s in found),
                                  fields[topic_defaults.field_of(name)].metadata.get("help", "")))
    if dynamic is not None:
        rows += _dynamic_only_rows(dynamic, {row.name: row for row in rows})
    if http_endpoint is not None:
        rows.append(BrokerRow(HTTP_ENDPOINT, http_endpoint, SOURCE_STATIC_BROKER, STRING,
                              ((HTTP_ENDPOINT, http_endpoint, SOURCE_STATIC_BROKER),), _HTTP_ENDPOINT_DOC))
    return sorted(rows, key=lambda r: r.name)


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
        answer = answers[key] = _describe(broker, ctx.listener, *key, synonyms, docs)
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


def _describe(broker: BrokerServices, listener: str, resource_type: int, resource_name: str,
              wanted: tuple[str, ...] | None, synonyms: bool, docs: bool) -> DescribeConfigsResult:
    keys = None if wanted is None else set(wanted)
    # Kafka answers "" as the message of a resource described (and of a topic it does not know)
    result = DescribeConfigsResult(error_code=ErrorCode.NONE, error_message="", resource_type=resource_type,
                                   resource_name=resource_name, configs=[])
    if resource_type == RESOURCE_TOPIC:
        info = broker.catalogue.topics().get(resource_name)
        if info is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return result
        broker_values = topic_defaults.topic_values(broker.dynamic_configs.effective())
        for entry in known_in(broker.kafka_release.version, topic_config_rows(info.config)):
            if keys is None or entry.name in keys:
                result.configs.append(_topic_result(entry, broker_values, broker.config, synonyms, docs,
                                                    broker.dynamic_configs))
    elif resource_type == RESOURCE_BROKER:
        error = broker_resource_error(broker, resource_name)
        if error is not None:
            result.error_code, result.error_message = error
            return result
        rows = broker_config_rows(broker.config, broker.explicit_settings, broker.http_endpoint(listener),
                                  broker.dynamic_configs)
        if resource_name == "":
            rows = cluster_default_rows(broker.dynamic_configs, {row.name: row for row in rows})
        for row in rows:
            if keys is not None and row.name not in keys:
                continue
            if row.sensitive:
                row = row.hidden()
            result.configs.append(DescribeConfigsResourceResult(
                name=row.name, value=row.value, read_only=not is_dynamic(row.name), config_source=row.source,
                is_sensitive=row.sensitive,
                synonyms=[DescribeConfigsSynonym(*synonym) for synonym in row.synonyms] if synonyms else [],
                config_type=row.kind, documentation=row.documentation if docs else None,
            ))
    elif resource_type == RESOURCE_GROUP:
        _describe_group(broker, resource_name, keys, synonyms, result)
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type: {resource_type}"
    return result


def _describe_group(broker: BrokerServices, name: str, keys: set[str] | None, synonyms: bool,
                    result: DescribeConfigsResult) -> None:
    """A group's configs, described for any group id (Kafka does not ask whether the group exists):
    its override (GROUP_CONFIG) over the broker's default (DEFAULT_CONFIG), as Kafka 4.4 lists them."""
    message = validate_group_name(name)
    if message is not None:
        result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, message
        return
    store = broker.group_configs
    overrides = store.overrides.get(name, {})
    # Kafka's internal group configs (warm-ups) are described only where the group sets them, before the rest.
    ordered = [d for d in GROUP_CONFIGS if d.internal and d.name in overrides]
    ordered += [d for d in GROUP_CONFIGS if not d.internal]
    for definition in ordered:
        if keys is not None and definition.name not in keys:
            continue
        default = store.defaults[definition.name]
        found = [DescribeConfigsSynonym(definition.synonym, default, SOURCE_DEFAULT)]
        value, source = default, SOURCE_DEFAULT
        if definition.name in overrides:
            value, source = overrides[definition.name], SOURCE_GROUP
            found.insert(0, DescribeConfigsSynonym(definition.name, value, SOURCE_GROUP))
        result.configs.append(DescribeConfigsResourceResult(
            name=definition.name, value=value, read_only=False, config_source=source, is_sensitive=False,
            synonyms=found if synonyms else [], config_type=definition.kind, documentation=None))
