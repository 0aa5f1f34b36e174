"""Differential checks, level 3 (configuration and metadata): what ApiVersions, DescribeConfigs,
DescribeCluster and Metadata tell a client, asked of Apache Kafka 4.4 and of a kbroker configured as
that Kafka node is, compared entry by entry. The requests go raw through kbroker's codec (every
field a client could read, at the highest version both serve); topics are made by a real client.

Each config entry, API, feature and metadata item is one check (differential.py); the deliberate
differences are tests/reference/differences/config.toml; the figures go to build/differential/config.json.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.protocol.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import Side, await_offsets_topic, kbroker_like_kafka
from kbroker.tools.codegen import SCHEMA_DIR, load_json

API_VERSIONS, METADATA, DESCRIBE_CONFIGS, DESCRIBE_CLUSTER = 18, 3, 32, 60
DESCRIBE_QUORUM, UPDATE_FEATURES, INCREMENTAL_ALTER_CONFIGS = 55, 57, 44
TOPIC, BROKER = 2, 4
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG", 0: "UNKNOWN"}
TYPES = {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE", 7: "LIST",
         8: "CLASS", 9: "PASSWORD"}
# Topic-level overrides set on both brokers (the override entries are compared on their own).
OVERRIDES = {"retention.ms": "3600000", "cleanup.policy": "compact,delete", "max.message.bytes": "2000000",
             "segment.bytes": "2097152", "message.timestamp.type": "LogAppendTime", "compression.type": "zstd",
             "min.insync.replicas": "1", "segment.ms": "7200000"}


def api_names() -> dict[int, str]:
    """Every API key Kafka defines, by its name (the request JSON files)."""
    names = {}
    for path in (SCHEMA_DIR / "clients").glob("*Request.json"):
        spec = load_json(path)
        names[spec["apiKey"]] = spec["name"].removesuffix("Request")
    return names


class Observer:
    """One broker seen through raw requests, normalised."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.wire = Wire(side.bootstrap, client_id="differential-config")
        self.versions = {k.api_key: (k.min_version, k.max_version)
                         for k in self.call(API_VERSIONS, 3, ApiVersionsRequest("kbroker-differential", "1.0")).api_keys}

    def call(self, api_key: int, version: int, body: Any) -> Any:
        return self.wire.call(api_key, version, body)

    def n(self, value: Any) -> Any:
        return self.side.normalise(value) if isinstance(value, str) else value

    def close(self) -> None:
        self.wire.close()


def highest_common(kafka: Observer, kbroker: Observer, api_key: int) -> int:
    return min(kafka.versions[api_key][1], kbroker.versions[api_key][1])


@pytest.fixture(scope="module")
def observers(kafka_reference, tmp_path_factory):
    broker = kbroker_like_kafka(tmp_path_factory.mktemp("differential-config") / "data")
    sides = [Side.of_kafka(kafka_reference), Side.of_kbroker(broker)]
    topics = {"default": f"cfg-default-{uuid.uuid4().hex[:6]}", "override": f"cfg-override-{uuid.uuid4().hex[:6]}"}
    observed = []
    try:
        for side in sides:
            admin = AdminClient({"bootstrap.servers": side.bootstrap})
            futures = admin.create_topics([NewTopic(topics["default"], 2, 1),
                                           NewTopic(topics["override"], 1, 1, config=OVERRIDES)])
            for future in futures.values():
                future.result(30)
            observer = Observer(side)
            await_offsets_topic(side.bootstrap)
            observed.append(observer)
        yield observed[0], observed[1], topics
    finally:
        for observer in observed:
            observer.close()
        broker.stop()


@pytest.fixture(scope="module")
def level():
    return Level("config", part="config")


# --- ApiVersions ---------------------------------------------------------------------------------------

def check_api_versions(level: Level, kafka: Observer, kbroker: Observer) -> None:
    names = api_names()
    for key in sorted(set(kafka.versions) | set(kbroker.versions)):
        ranges = [side.versions.get(key) for side in (kafka, kbroker)]
        a, b = (None if r is None else {"min": r[0], "max": r[1]} for r in ranges)
        level.compare(f"ApiVersions.api:{names.get(key, key)}({key})", a, b)
    for version in (3, 4):
        answers = [side.call(API_VERSIONS, version, ApiVersionsRequest("kbroker-differential", "1.0"))
                   for side in (kafka, kbroker)]
        supported = [{f.name: f"{f.min_version}-{f.max_version}" for f in a.supported_features} for a in answers]
        for name in sorted(set(supported[0]) | set(supported[1])):
            level.compare(f"ApiVersions.v{version}.supported_features:{name}",
                          *({"range": s[name]} if name in s else None for s in supported))
        if version == 4:
            finalized = [{f.name: f"{f.min_version_level}-{f.max_version_level}" for f in a.finalized_features}
                         for a in answers]
            for name in sorted(set(finalized[0]) | set(finalized[1])):
                level.compare(f"ApiVersions.finalized_features:{name}",
                              *({"level": f[name]} if name in f else None for f in finalized))
            level.compare("ApiVersions.answer", *({
                "error_code": a.error_code, "throttle_time_ms": a.throttle_time_ms,
                # the metadata offset at which Kafka's features were finalized: known (>= 0) is what counts
                "finalized_features_epoch": "known" if a.finalized_features_epoch >= 0 else a.finalized_features_epoch,
                "zk_migration_ready": a.zk_migration_ready} for a in answers))
    invalid = [side.call(API_VERSIONS, 3, ApiVersionsRequest("bad name!", "1.0")) for side in (kafka, kbroker)]
    level.compare("ApiVersions.invalid_software_name",
                  *({"error_code": a.error_code, "api_keys": "listed" if a.api_keys else "empty"} for a in invalid))


# --- DescribeConfigs -----------------------------------------------------------------------------------

def describe_configs(observer: Observer, version: int, resource_type: int, name: str,
                     keys: list[str] | None = None) -> Any:
    request = DescribeConfigsRequest([DescribeConfigsResource(resource_type, name, keys)], include_synonyms=True,
                                     include_documentation=True)
    (result,) = observer.call(DESCRIBE_CONFIGS, version, request).results
    return result


def config_entries(observer: Observer, result: Any) -> dict[str, dict[str, Any]]:
    return {c.name: {
        "value": observer.n(c.value),
        "source": SOURCES.get(c.config_source, c.config_source),
        "read_only": c.read_only,
        "sensitive": c.is_sensitive,
        "type": TYPES.get(c.config_type, c.config_type),
        "synonyms": [f"{SOURCES.get(s.source, s.source)}:{s.name}={observer.n(s.value)}" for s in c.synonyms],
        "documented": bool(c.documentation),
    } for c in result.configs}


DYNAMIC_SOURCES = {"DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def await_kafka_broker(kafka: Observer, version: int, done: Callable[[dict[str, dict]], bool],
                       bound_s: float = 30.0) -> None:
    """Kafka's broker applies a dynamic broker config from the controller's metadata log after the alter
    was answered (loaded runs read the broker a change ahead of it, this file's and the session's other
    files' changes, the reference broker being the whole session's): wait, bounded, until its describe
    of broker 1 shows `done`. kbroker answers once the change is in place. Past the bound the
    comparison that follows shows what Kafka still had."""
    deadline = time.monotonic() + bound_s
    while not done(config_entries(kafka, describe_configs(kafka, version, BROKER, "1"))):
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def no_dynamic(names: set[str] | None = None) -> Callable[[dict[str, dict]], bool]:
    return lambda entries: not any(e["source"] in DYNAMIC_SOURCES for name, e in entries.items()
                                   if names is None or name in names)


def compare_entries(level: Level, prefix: str, kafka: dict[str, dict], kbroker: dict[str, dict],
                    only: set[str] | None = None) -> None:
    for name in sorted(set(kafka) | set(kbroker)):
        if only is None or name in only:
            level.compare(f"{prefix}:{name}", kafka.get(name), kbroker.get(name))


def check_describe_configs(level: Level, kafka: Observer, kbroker: Observer, topics: dict[str, str]) -> None:
    version = highest_common(kafka, kbroker, DESCRIBE_CONFIGS)
    pair = (kafka, kbroker)

    def entries(resource_type: int, name: str) -> list[dict[str, dict]]:
        results = [describe_configs(o, version, resource_type, name) for o in pair]
        for result in results:
            assert result.error_code == 0, (name, result)
        return [config_entries(o, r) for o, r in zip(pair, results)]

    await_kafka_broker(kafka, version, no_dynamic())  # another file's changes undone
    compare_entries(level, "DescribeConfigs.topic", *entries(TOPIC, topics["default"]))
    compare_entries(level, "DescribeConfigs.topic_override", *entries(TOPIC, topics["override"]),
                    only=set(OVERRIDES))
    compare_entries(level, "DescribeConfigs.broker", *entries(BROKER, "1"))
    compare_entries(level, "DescribeConfigs.broker_default", *entries(BROKER, ""))
    # Only the keys asked for (one unknown); then the error answers.
    keyed = [config_entries(o, describe_configs(o, version, TOPIC, topics["default"], ["retention.ms", "no.such"]))
             for o in pair]
    level.compare("DescribeConfigs.keys", *({"names": sorted(k)} for k in keyed))
    for check, resource_type, name in (("unknown_topic", TOPIC, "no-such-topic"), ("other_broker", BROKER, "7"),
                                       ("broker_not_a_number", BROKER, "one")):
        results = [describe_configs(o, version, resource_type, name) for o in pair]
        level.compare(f"DescribeConfigs.error:{check}", *({
            "error_code": r.error_code, "error_message": r.error_message, "configs": len(r.configs)} for r in results))


# Dynamic broker configs (issue 43): (case, broker resource name, [(config, operation, value)]), sent to
# both in this order; the ones that change something are undone by DYNAMIC_UNDO (the reference broker
# is the whole session's).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_ALTERS = [
    ("per_broker", "1", [("log.cleaner.backoff.ms", SET, "20000"), ("log.retention.ms", SET, "86400000")]),
    ("cluster_default", "", [("log.retention.ms", SET, "43200000"), ("message.max.bytes", SET, "2000000")]),
    # list configs: an absent value starts from Kafka's default; an item there is not added twice; an
    # absent one subtracted is no error (the cluster default becomes Kafka's default, "delete")
    ("append_absent", "1", [("log.cleanup.policy", APPEND, "compact"), ("ssl.cipher.suites", APPEND, "TLS_AES_128_GCM_SHA256")]),
    ("append_present", "1", [("log.cleanup.policy", APPEND, "compact,delete")]),
    ("subtract_absent", "", [("log.cleanup.policy", SUBTRACT, "compact")]),
    ("subtract_present", "1", [("ssl.enabled.protocols", SUBTRACT, "TLSv1.2")]),
    ("append_not_a_list", "1", [("log.retention.ms", APPEND, "5")]),
    ("subtract_unknown_name", "1", [("no.such.config", SUBTRACT, "5")]),
    ("append_listener_prefixed", "1", [("listener.name.plaintext.sasl.enabled.mechanisms", APPEND, "PLAIN")]),
    ("append_read_only_list", "1", [("log.dirs", APPEND, "/elsewhere")]),
    ("append_per_broker_at_default", "", [("sasl.enabled.mechanisms", APPEND, "PLAIN")]),
    ("append_bad_item", "", [("log.cleanup.policy", APPEND, "nonsense")]),
    ("append_empty_item", "", [("log.cleanup.policy", APPEND, "compact,")]),
    ("unknown_operation", "1", [("log.cleanup.policy", 7, "x")]),
    # settings kbroker applies: the connection limits, producer.id.expiration.ms, with Kafka's checks
    ("applied", "1", [("max.connections.per.ip", SET, "1000"), ("listener.name.plaintext.max.connections", SET, "500")]),
    ("applied_default", "", [("producer.id.expiration.ms", SET, "3600000"),
                             ("max.connections.per.ip.overrides", SET, "127.0.0.1:2000")]),
    ("listener_limit_negative", "1", [("listener.name.plaintext.max.connections", SET, "-2")]),
    ("listener_limit_not_a_number", "1", [("listener.name.plaintext.max.connections", SET, "many")]),
    ("per_ip_negative", "", [("max.connections.per.ip", SET, "-5")]),
    ("per_ip_override_not_a_number", "", [("max.connections.per.ip.overrides", SET, "127.0.0.1:x")]),
    # not sent: max.connections=0, which Kafka 4.4 refuses when validating only but otherwise accepts,
    # then fails to apply and closes every connection (kbroker refuses it as Kafka's validation does)
    ("expiration_zero", "", [("producer.id.expiration.ms", SET, "0")]),
    ("read_only", "1", [("node.id", SET, "2")]),
    ("per_broker_at_default", "", [("sasl.kerberos.min.time.before.relogin", SET, "58000")]),
    ("security_without_listener", "1", [("ssl.keystore.location", SET, "/nowhere")]),
    ("not_a_number", "", [("log.retention.ms", SET, "soon")]),
    ("not_an_int", "1", [("message.max.bytes", SET, "big")]),
]
DYNAMIC_UNDO = [
    ("undo_per_broker", "1", [("log.cleaner.backoff.ms", DELETE, None), ("log.retention.ms", DELETE, None),
                              ("log.cleanup.policy", DELETE, None), ("ssl.cipher.suites", DELETE, None),
                              ("ssl.enabled.protocols", DELETE, None), ("max.connections.per.ip", DELETE, None),
                              ("listener.name.plaintext.max.connections", DELETE, None)]),
    ("undo_cluster_default", "", [("log.retention.ms", DELETE, None), ("message.max.bytes", DELETE, None),
                                  ("log.cleanup.policy", DELETE, None), ("producer.id.expiration.ms", DELETE, None),
                                  ("max.connections.per.ip.overrides", DELETE, None)]),
]
DYNAMIC_NAMES = {"log.cleaner.backoff.ms", "log.retention.ms", "log.retention.hours", "message.max.bytes",
                 "log.cleanup.policy", "ssl.cipher.suites", "ssl.enabled.protocols", "max.connections.per.ip",
                 "listener.name.plaintext.max.connections", "producer.id.expiration.ms",
                 "max.connections.per.ip.overrides"}


def check_dynamic_broker_configs(level: Level, kafka: Observer, kbroker: Observer, topics: dict[str, str]) -> None:
    """Each change answered alike, then the broker, the cluster default and a topic described alike."""
    pair = (kafka, kbroker)

    def alter(case: str, node: str, ops: list) -> None:
        request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=BROKER, resource_name=node, configs=[AlterableConfig(n, o, v) for n, o, v in ops])],
            validate_only=False)
        answers = [o.call(INCREMENTAL_ALTER_CONFIGS, 1, request).responses[0] for o in pair]
        level.compare(f"IncrementalAlterConfigs.broker:{case}", *(
            {"error_code": a.error_code, "error_message": a.error_message} for a in answers))

    version = highest_common(kafka, kbroker, DESCRIBE_CONFIGS)
    try:
        for case in DYNAMIC_ALTERS:
            alter(*case)
        # the last change each layer took, applied: so are those before it (the metadata log's order)
        await_kafka_broker(kafka, version, lambda e: e.get("max.connections.per.ip", {}).get("source")
                           == "DYNAMIC_BROKER_CONFIG" and e.get("producer.id.expiration.ms", {}).get("source")
                           == "DYNAMIC_DEFAULT_BROKER_CONFIG")
        described = [[config_entries(o, describe_configs(o, version, t, name)) for o in pair]
                     for t, name in ((BROKER, "1"), (BROKER, ""), (TOPIC, topics["default"]))]
        compare_entries(level, "DescribeConfigs.dynamic_broker", *described[0], only=DYNAMIC_NAMES)
        compare_entries(level, "DescribeConfigs.dynamic_default", *described[1])
        compare_entries(level, "DescribeConfigs.dynamic_topic", *described[2],
                        only={"retention.ms", "max.message.bytes", "cleanup.policy"})
    finally:
        for case in DYNAMIC_UNDO:
            alter(*case)
        await_kafka_broker(kafka, version, no_dynamic(DYNAMIC_NAMES))  # undone for the session's next files


# --- DescribeCluster and Metadata ----------------------------------------------------------------------

def check_describe_cluster(level: Level, kafka: Observer, kbroker: Observer) -> None:
    version = highest_common(kafka, kbroker, DESCRIBE_CLUSTER)
    for include_ops in (False, True):
        answers = [(o, o.call(DESCRIBE_CLUSTER, version, DescribeClusterRequest(include_ops, 1, True)))
                   for o in (kafka, kbroker)]
        suffix = ".with_authorized_operations" if include_ops else ""
        level.compare(f"DescribeCluster.answer{suffix}", *({
            "error_code": a.error_code, "error_message": a.error_message, "endpoint_type": a.endpoint_type,
            "cluster_id": o.n(a.cluster_id), "controller_id": a.controller_id,
            "cluster_authorized_operations": a.cluster_authorized_operations,
        } for o, a in answers))
        if not include_ops:
            level.compare("DescribeCluster.brokers", *({"brokers": [
                f"{b.broker_id} {o.n(f'{b.host}:{b.port}')} rack={b.rack} fenced={b.is_fenced}" for b in a.brokers]}
                for o, a in answers))
    controllers = [(o, o.call(DESCRIBE_CLUSTER, version, DescribeClusterRequest(False, 2, False)))
                   for o in (kafka, kbroker)]
    level.compare("DescribeCluster.controller_endpoints", *({
        "error_code": a.error_code, "brokers": len(a.brokers)} for _, a in controllers))


def metadata_topic(o: Observer, topic: Any) -> dict[str, Any]:
    return {
        "error_code": topic.error_code,
        "topic_id": "zero" if topic.topic_id.int == 0 else "set",
        "is_internal": topic.is_internal,
        "partitions": [f"{p.partition_index}: error={p.error_code} leader={p.leader_id} epoch={p.leader_epoch} "
                       f"replicas={p.replica_nodes} isr={p.isr_nodes} offline={p.offline_replicas}"
                       for p in sorted(topic.partitions, key=lambda p: p.partition_index)],
        "topic_authorized_operations": topic.topic_authorized_operations,
    }


def check_metadata(level: Level, kafka: Observer, kbroker: Observer, topics: dict[str, str]) -> None:
    version = highest_common(kafka, kbroker, METADATA)
    pair = (kafka, kbroker)
    wanted = [topics["default"], "__consumer_offsets", "no-such-topic"]
    answers = [o.call(METADATA, version, MetadataRequest([MetadataRequestTopic(name=t) for t in wanted],
                                                         allow_auto_topic_creation=False,
                                                         include_topic_authorized_operations=True))
               for o in pair]
    level.compare("Metadata.cluster", *({
        "cluster_id": o.n(a.cluster_id), "controller_id": a.controller_id,
        "brokers": [f"{b.node_id} {o.n(f'{b.host}:{b.port}')} rack={b.rack}" for b in a.brokers],
        "cluster_authorized_operations": a.cluster_authorized_operations,
    } for o, a in zip(pair, answers)))
    by_name = [{t.name: metadata_topic(o, t) for t in a.topics} for o, a in zip(pair, answers)]
    for name, label in zip(wanted, ("topic", "__consumer_offsets", "unknown_topic")):
        level.compare(f"Metadata.{label}", by_name[0].get(name), by_name[1].get(name))
    # All topics (null list): the same names, internal ones included, in any order.
    everything = [o.call(METADATA, version, MetadataRequest(None, False, False, False)) for o in pair]
    mine = {topics["default"], topics["override"], "__consumer_offsets"}
    level.compare("Metadata.all_topics", *({"ours": sorted(t.name for t in a.topics if t.name in mine)}
                                           for a in everything))
    # Auto-creation on a Metadata request, as clients trigger it (auto.create.topics.enable's default).
    auto = f"cfg-auto-{uuid.uuid4().hex[:6]}"
    created = []
    for o in pair:
        first = o.call(METADATA, version, MetadataRequest([MetadataRequestTopic(name=auto)], True, False, False))
        created.append({"first_answer_error": first.topics[0].error_code})
    level.compare("Metadata.auto_create", *created)


# --- the metadata quorum and feature updates -----------------------------------------------------------

def quorum_answer(o: Observer, answer: Any) -> dict[str, Any]:
    def replica(r: Any) -> str:
        # offsets and clocks differ by nature: what counts is known or not (-1), and the voter's own
        stamps = "unknown" if r.last_fetch_timestamp == -1 else "now" if r.last_fetch_timestamp > 0 else r.last_fetch_timestamp
        return f"{r.replica_id} dir={r.replica_directory_id} leo={'set' if r.log_end_offset >= 0 else r.log_end_offset} " \
               f"fetch={stamps} caught_up={'same' if r.last_caught_up_timestamp == r.last_fetch_timestamp else 'other'}"
    # so does the leader epoch: Kafka's counts its node's elections, one each start (a start retried on
    # new ports too), kbroker's static quorum has one
    return {
        "error_code": answer.error_code, "error_message": answer.error_message,
        "topics": [f"{t.topic_name}[{p.partition_index}] error={p.error_code} message={p.error_message!r} "
                   f"leader={p.leader_id} epoch={'set' if p.leader_epoch > 0 else p.leader_epoch} "
                   f"hw={'set' if p.high_watermark > 0 else p.high_watermark} "
                   f"voters={[replica(r) for r in p.current_voters]} observers={[replica(r) for r in p.observers]}"
                   for t in answer.topics for p in t.partitions],
        "nodes": [f"{n.node_id}: " + ",".join(f"{x.name}://{o.n(f'{x.host}:{x.port}')}" for x in n.listeners)
                  for n in answer.nodes],
    }


def check_describe_quorum(level: Level, kafka: Observer, kbroker: Observer) -> None:
    metadata = [TopicData("__cluster_metadata", [PartitionData(0)])]
    for version in range(0, highest_common(kafka, kbroker, DESCRIBE_QUORUM) + 1):
        level.compare(f"DescribeQuorum.v{version}", *(
            quorum_answer(o, o.call(DESCRIBE_QUORUM, version, DescribeQuorumRequest(metadata))) for o in (kafka, kbroker)))
    wrong = [TopicData("orders", [PartitionData(0), PartitionData(1)])]
    level.compare("DescribeQuorum.unknown_partition", *(
        quorum_answer(o, o.call(DESCRIBE_QUORUM, 2, DescribeQuorumRequest(wrong))) for o in (kafka, kbroker)))


# UpdateFeatures cases: v0 has no ValidateOnly, so only what changes nothing is sent at v0; the
# others validate only (the reference broker is shared by the whole test session).
FEATURE_UPDATES = {
    "noop": [("group.version", 1, 1)],
    "beyond_supported": [("group.version", 5, 1)],
    "unknown_feature": [("no.such.version", 1, 1)],
    "downgrade_as_upgrade": [("group.version", 0, 1)],
    "metadata_safe_downgrade": [("metadata.version", 20, 2)],
    "metadata_unsafe_downgrade": [("metadata.version", 7, 3)],
    "one_bad_of_two": [("group.version", 1, 1), ("no.such.version", 2, 1)],
    "disable_group_protocol": [("group.version", 0, 2)],
    "dynamic_quorum": [("kraft.version", 1, 1)],
}
CHANGES_SOMETHING = {"disable_group_protocol", "dynamic_quorum"}


def check_update_features(level: Level, kafka: Observer, kbroker: Observer) -> None:
    for version in range(0, highest_common(kafka, kbroker, UPDATE_FEATURES) + 1):
        for case, updates in FEATURE_UPDATES.items():
            if version == 0 and case in CHANGES_SOMETHING:
                continue
            request = UpdateFeaturesRequest(30000, [FeatureUpdateKey(f, lvl, False, t) for f, lvl, t in updates],
                                            validate_only=True)
            answers = [o.call(UPDATE_FEATURES, version, request) for o in (kafka, kbroker)]
            level.compare(f"UpdateFeatures.v{version}:{case}", *({
                "error_code": a.error_code, "error_message": a.error_message,
                "results": [f"{r.feature} {r.error_code} {r.error_message}" for r in a.results]} for a in answers))


def test_configuration_and_metadata_match_kafka(observers, level):
    kafka, kbroker, topics = observers
    check_api_versions(level, kafka, kbroker)
    check_describe_configs(level, kafka, kbroker, topics)
    check_dynamic_broker_configs(level, kafka, kbroker, topics)
    check_describe_cluster(level, kafka, kbroker)
    check_metadata(level, kafka, kbroker, topics)
    check_describe_quorum(level, kafka, kbroker)
    check_update_features(level, kafka, kbroker)
    assert len(level.checks) > 400  # every config name of both, every API key
    level.settle()
