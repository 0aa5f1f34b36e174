"""DescribeConfigs (32), v1-v4: topic and broker resources.

Topic resources list every topic config LogConfig knows, with its value and source: an override is
DYNAMIC_TOPIC_CONFIG (1); otherwise the broker-wide default (broker/topic_defaults.py) is
STATIC_BROKER_CONFIG (4) when a broker setting of the config's synonym chain gives it, DEFAULT_CONFIG
(5) when Kafka's default does, with the synonyms (when asked) in Kafka 4.4's order and quirks. Broker
resources (name = this node id as a string) list the broker settings that have a Kafka name:
STATIC_BROKER_CONFIG when set by flag, environment or file, DEFAULT_CONFIG otherwise, and all
read-only because dynamic broker configs are not supported; kbroker adds its HTTP endpoint
(`kbroker.http.endpoint`) for the admin CLI. The empty broker name (cluster-wide dynamic defaults) is empty.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from .. import topic_defaults
from ..config import BrokerConfig
from ..partitions.catalogue import ConfigEntry, LogConfig, default_of
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
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7

# topic config -> (type, documentation); its broker synonyms are broker/topic_defaults.py's
TOPIC_CONFIGS: dict[str, tuple[int, str]] = {
    "cleanup.policy": (LIST, "Whether old segments are deleted, compacted by key, or both."),
    "compression.type": (STRING, "Compression codec the topic stores batches with; 'producer' keeps the producer's."),
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


# BrokerConfig field -> (Kafka name, type). Only settings Kafka has; kbroker-only ones stay out.
BROKER_CONFIGS: tuple[tuple[str, str, int], ...] = (
    ("node_id", "node.id", INT),
    ("node_id", "broker.id", INT),
    ("listeners", "listeners", LIST),
    ("advertised_listeners", "advertised.listeners", LIST),
    ("listener_security_protocol_map", "listener.security.protocol.map", STRING),
    ("controller_listener_names", "controller.listener.names", LIST),
    ("data_dir", "log.dirs", STRING),
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
)
# Fixed facts of a single-node broker, reported with Kafka's names.
BROKER_FIXED: tuple[tuple[str, str, int], ...] = (
    ("delete.topic.enable", "true", BOOLEAN),
    ("offsets.topic.replication.factor", "1", SHORT),
)
# kbroker's own row: where its HTTP endpoint (--metrics-listen) answers, for the admin CLI.
HTTP_ENDPOINT = "kbroker.http.endpoint"


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
                  docs: bool) -> DescribeConfigsResourceResult:
    """A topic config: its override, else the broker-wide default with Kafka's source for it."""
    meta = TOPIC_CONFIGS.get(entry.name)
    chain = topic_defaults.topic_synonyms(config, entry.name)
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


def broker_config_rows(config: BrokerConfig, explicit: frozenset[str] = frozenset(),
                       http_endpoint: str | None = None) -> list[tuple[str, str | None, int, int, list]]:
    """(name, value, source, type, synonyms) of every broker setting with a Kafka name. A setting is
    STATIC_BROKER_CONFIG when set by flag, variable or file (`explicit`) or away from its default."""
    defaults = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}
    rows: list[tuple[str, str | None, int, int, list]] = []
    for attr, name, kind in BROKER_CONFIGS:
        value = getattr(config, attr)
        static = attr in explicit or value != defaults.get(attr)
        if name in ("listeners", "advertised.listeners"):
            value = config.listener_set().describe("listeners" if name == "listeners" else "advertised")
            static = static or config.listen != defaults["listen"] or bool(config.advertised_listener)
        source = SOURCE_STATIC_BROKER if static else SOURCE_DEFAULT
        rows.append((name, _render(value), source, kind, [(name, _render(value), source)]))
    for name, value, kind in BROKER_FIXED:
        rows.append((name, value, SOURCE_DEFAULT, kind, [(name, value, SOURCE_DEFAULT)]))
    for topic, chain in topic_defaults.BROKER_SYNONYMS.items():
        for name, _ in chain:
            found = topic_defaults.synonyms(config, name)
            value = topic_defaults.configured(config, name)
            if value is None:
                value = topic_defaults.kafka_default(name)
            kind = INT if name.endswith((".hours", ".minutes")) else TOPIC_CONFIGS[topic][0]
            rows.append((name, value, SOURCES[found[0][2]] if found else SOURCE_DEFAULT, kind,
                         [(n, v, SOURCES[s]) for n, v, s in found]))
    if http_endpoint is not None:
        rows.append((HTTP_ENDPOINT, http_endpoint, SOURCE_STATIC_BROKER, STRING,
                     [(HTTP_ENDPOINT, http_endpoint, SOURCE_STATIC_BROKER)]))
    return sorted(rows, key=lambda r: r[0])


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
        return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, not {resource_name!r}"
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
        broker_values = topic_defaults.topic_values(broker.config)
        for entry in topic_config_rows(info.config):
            if keys is None or entry.name in keys:
                result.configs.append(_topic_result(entry, broker_values, broker.config, synonyms, docs))
    elif resource_type == RESOURCE_BROKER:
        error = broker_resource_error(broker, resource_name)
        if error is not None:
            result.error_code, result.error_message = error
            return result
        if resource_name == "":
            return result  # no dynamic cluster-wide defaults exist
        for name, value, source, kind, found in broker_config_rows(broker.config, broker.explicit_settings,
                                                                   broker.http_endpoint(listener)):
            if keys is not None and name not in keys:
                continue
            result.configs.append(DescribeConfigsResourceResult(
                name=name, value=value, read_only=True, config_source=source, is_sensitive=False,
                synonyms=[DescribeConfigsSynonym(*row) for row in found] if synonyms else [],
                config_type=kind, documentation=None,
            ))
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type: {resource_type}"
    return result
