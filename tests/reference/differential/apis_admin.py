"""Checks of the admin and connection APIs, every common version: ApiVersions, SASL on a plaintext
listener, topics (create, delete, partitions), configs, ACLs, quotas, SCRAM credentials, leader
elections, reassignments, DescribeCluster, DescribeQuorum, UpdateFeatures. A check that changes a topic makes its own
(`dw-<api>-v<version>`), so versions never see each other's changes.
"""

from __future__ import annotations

from typing import Any

from .apis_data import DATA
from .craft import (
    ALTER_CLIENT_QUOTAS,
    ALTER_REPLICA_LOG_DIRS,
    CREATE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    LIST_CONFIG_RESOURCES,
    RENEW_DELEGATION_TOKEN,
    UNREGISTER_BROKER,
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_USER_SCRAM_CREDENTIALS,
    API_VERSIONS,
    CONFIG_LEVEL,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_QUORUM,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    UNKNOWN_TOPIC_ID,
    UPDATE_FEATURES,
    ZERO_UUID,
    create_topic,
    created_configs_elsewhere,
    described_configs_elsewhere,
    make,
    topic_id,
    unique,
)
from .runner import Check, Session
from . import versions
from .versions import sweep

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32  # config resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3        # IncrementalAlterConfigs operations


def api_versions_checks() -> list[Check]:
    def answer_only(plain: dict[str, Any]) -> dict[str, Any]:
        # Which APIs, versions and features each broker lists is the configuration level's table
        # (config.json); this level compares that the request is answered, and how.
        plain["api_keys"] = "(compared by the configuration level)"
        for name in ("supported_features", "finalized_features", "finalized_features_epoch", "zk_migration_ready"):
            plain.pop(name, None)
        return plain

    async def unsupported(s: Session, v: int) -> None:
        # A version neither broker knows: both must answer with a v0 body, error 35 and their own range.
        conn = await s.connect()
        await conn.send(API_VERSIONS, 127, make(API_VERSIONS))
        frame = await conn.read_frame(30)
        from kbroker.protocol import framing  # the answer is a v0 body whatever was asked

        _, body = framing.decode_response(API_VERSIONS, 0, frame)
        s.note("ApiVersions v127", {"error_code": body.error_code,
                                    "api_keys": [(k.api_key, k.min_version, k.max_version) for k in body.api_keys]})

    return [
        *sweep(API_VERSIONS, "well-formed", lambda s, v: make(
            API_VERSIONS, client_software_name="differential", client_software_version="1.0"), project=answer_only),
        *sweep(API_VERSIONS, "invalid client software name", lambda s, v: make(
            API_VERSIONS, client_software_name="bad name!", client_software_version="1.0"),
            versions=range(3, 5), project=answer_only),
        *sweep(API_VERSIONS, "a version neither broker knows", steps=unsupported, versions=[0]),
    ]


def sasl_checks() -> list[Check]:
    return [
        *sweep(SASL_HANDSHAKE, "PLAIN on a plaintext listener", lambda s, v: make(SASL_HANDSHAKE, mechanism="PLAIN")),
        *sweep(SASL_AUTHENTICATE, "without a handshake", lambda s, v: make(SASL_AUTHENTICATE, auth_bytes=b"\0u\0p")),
    ]


# --- topics ----------------------------------------------------------------------------------------------

def _topic(name: str, partitions: int = 1, rf: int = 1, configs: dict | None = None, assignments=None) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": assignments or [],
            "configs": [{"name": k, "value": val} for k, val in (configs or {}).items()]}


def create_topics_checks() -> list[Check]:
    def create(*topics: dict, validate_only: bool = False, suffix: bool = True):
        def build(s: Session, v: int) -> Any:
            named = [{**t, "name": f"{t['name']}-v{v}"} if suffix else t for t in topics]
            return make(CREATE_TOPICS, topics=named, timeout_ms=30000, validate_only=validate_only)
        return build

    def sweep(api_key: int, case: str, build: Any, **kwargs: Any) -> list[Check]:
        return versions.sweep(api_key, case, build, project=created_configs_elsewhere, **kwargs)

    return [
        *sweep(CREATE_TOPICS, "a topic", create(_topic("dw-ct", 2))),
        *sweep(CREATE_TOPICS, "with configs", create(_topic("dw-ct-configs", 1, configs={
            "cleanup.policy": "compact", "retention.ms": "60000"}))),
        *sweep(CREATE_TOPICS, "validate only", create(_topic("dw-ct-validate", 3), validate_only=True)),
        *sweep(CREATE_TOPICS, "broker defaults (-1)", create(_topic("dw-ct-defaults", -1, -1)), versions=range(4, 8)),
        *sweep(CREATE_TOPICS, "replica assignment", create(_topic("dw-ct-assigned", -1, -1, assignments=[
            {"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}]))),
        *sweep(CREATE_TOPICS, "an existing topic", create(_topic(DATA, 3), suffix=False)),
        *sweep(CREATE_TOPICS, "zero partitions", create(_topic("dw-ct-zero", 0))),
        *sweep(CREATE_TOPICS, "replication factor 3 on one node", create(_topic("dw-ct-rf3", 1, 3))),
        *sweep(CREATE_TOPICS, "an invalid config value", create(_topic("dw-ct-badvalue", 1, configs={
            "cleanup.policy": "sometimes"}))),
        *sweep(CREATE_TOPICS, "an unknown config", create(_topic("dw-ct-badname", 1, configs={"no.such.config": "1"}))),
        *sweep(CREATE_TOPICS, "an invalid name", create(_topic("bad name!", 1), suffix=False)),
        *sweep(CREATE_TOPICS, "the same name twice", create(_topic("dw-ct-twice", 1), _topic("dw-ct-twice", 1))),
        *sweep(CREATE_TOPICS, "assignment to an unknown broker", create(_topic("dw-ct-broker7", -1, -1, assignments=[
            {"partition_index": 0, "broker_ids": [7]}]))),
    ]


def delete_topics_checks() -> list[Check]:
    def request(v: int, name: str | None = None, tid: Any = ZERO_UUID) -> Any:
        if v >= 6:  # a name or an id
            return make(DELETE_TOPICS, timeout_ms=30000, topics=[{"name": name, "topic_id": tid}])
        return make(DELETE_TOPICS, timeout_ms=30000, topic_names=[name])

    async def existing(s: Session, v: int) -> None:
        name = f"dw-dt-v{v}"
        await create_topic(s, name)
        await s.call(DELETE_TOPICS, v, request(v, name), "delete")
        await s.call(DELETE_TOPICS, v, request(v, name), "delete again")

    async def by_id(s: Session, v: int) -> None:
        name = f"dw-dt-id-v{v}"
        await create_topic(s, name)
        await s.call(DELETE_TOPICS, v, request(v, None, await topic_id(s, name)), "delete by id")

    return [
        *sweep(DELETE_TOPICS, "a topic", steps=existing),
        *sweep(DELETE_TOPICS, "unknown topic", lambda s, v: request(v, "dw-nope-dt")),
        *sweep(DELETE_TOPICS, "a topic by id", steps=by_id, versions=[6]),
        *sweep(DELETE_TOPICS, "unknown topic id", lambda s, v: request(v, None, UNKNOWN_TOPIC_ID), versions=[6]),
        *sweep(DELETE_TOPICS, "both a name and an id", lambda s, v: request(v, "dw-nope-dt", UNKNOWN_TOPIC_ID),
               versions=[6]),
    ]


def delete_offsets_topic_checks() -> list[Check]:
    """Kafka lets an admin delete __consumer_offsets (and makes it again on the next FindCoordinator):
    run alone, after every other check, so that no group check meets the deletion."""
    return sweep(DELETE_TOPICS, "__consumer_offsets", lambda s, v: make(
        DELETE_TOPICS, timeout_ms=30000, topic_names=["__consumer_offsets"],
        topics=[{"name": "__consumer_offsets", "topic_id": ZERO_UUID}]), serial=True)


def create_partitions_checks() -> list[Check]:
    def grow(count: int, topic: str | None = None, assignments=None, validate_only: bool = False, create: bool = True):
        async def steps(s: Session, v: int) -> None:
            name = topic or unique(s, "dw")
            if create:
                await create_topic(s, name, 2)
            await s.call(CREATE_PARTITIONS, v, make(CREATE_PARTITIONS, timeout_ms=30000, validate_only=validate_only,
                                                     topics=[{"name": name, "count": count, "assignments": assignments}]),
                         "create partitions")
        return steps

    return [
        *sweep(CREATE_PARTITIONS, "grow to 4", steps=grow(4)),
        *sweep(CREATE_PARTITIONS, "validate only", steps=grow(4, validate_only=True)),
        *sweep(CREATE_PARTITIONS, "the same count", steps=grow(2)),
        *sweep(CREATE_PARTITIONS, "fewer", steps=grow(1)),
        *sweep(CREATE_PARTITIONS, "assignments of the wrong length", steps=grow(5, assignments=[{"broker_ids": [1]}])),
        *sweep(CREATE_PARTITIONS, "unknown topic", steps=grow(3, topic="dw-nope-cp", create=False)),
    ]


# --- configs ---------------------------------------------------------------------------------------------

def describe_configs_checks() -> list[Check]:
    def describe(rtype: int, name: str, keys: list[str] | None, synonyms: bool = False, docs: bool = False):
        return lambda s, v: make(DESCRIBE_CONFIGS, include_synonyms=synonyms, include_documentation=docs, resources=[
            {"resource_type": rtype, "resource_name": name, "configuration_keys": keys}])

    def sweep(api_key: int, case: str, build: Any, **kwargs: Any) -> list[Check]:
        return versions.sweep(api_key, case, build, project=described_configs_elsewhere, **kwargs)

    keys = ["cleanup.policy", "retention.ms", "max.message.bytes"]
    return [
        *sweep(DESCRIBE_CONFIGS, "topic configs by name", describe(TOPIC, DATA, keys)),
        *sweep(DESCRIBE_CONFIGS, "with synonyms", describe(TOPIC, DATA, keys, synonyms=True)),
        *sweep(DESCRIBE_CONFIGS, "broker configs by name", describe(BROKER, "1", ["auto.create.topics.enable",
                                                                               "log.retention.hours"])),
        *sweep(DESCRIBE_CONFIGS, "an unknown config name", describe(TOPIC, DATA, ["no.such.config"])),
        *sweep(DESCRIBE_CONFIGS, "unknown topic", describe(TOPIC, "dw-nope-dc", None)),
        *sweep(DESCRIBE_CONFIGS, "another broker", describe(BROKER, "7", None)),
        *sweep(DESCRIBE_CONFIGS, "a broker id that is not a number", describe(BROKER, "one", None)),
        *sweep(DESCRIBE_CONFIGS, "an unknown resource type", describe(99, "x", None)),
    ]


def _values(response: Any) -> dict[str, str | None]:
    return {c.name: c.value for r in response.results for c in r.configs}


async def described(s: Session, topic: str, keys: list[str]) -> dict[str, str | None]:
    response = await s.call(DESCRIBE_CONFIGS, 4, make(DESCRIBE_CONFIGS, resources=[{
        "resource_type": TOPIC, "resource_name": topic, "configuration_keys": keys}]), record=False)
    return _values(response)


async def after(s: Session, topic: str, keys: list[str], before: dict, changed: bool) -> None:
    """DescribeConfigs of what a change touched, once it shows (Kafka's controller publishes a config to
    its broker a moment after answering the change): until the values move, when it changed anything."""
    await s.call_until(lambda r: not changed or _values(r) != before, DESCRIBE_CONFIGS, 4, make(
        DESCRIBE_CONFIGS, resources=[{"resource_type": TOPIC, "resource_name": topic, "configuration_keys": keys}]),
        "after", tries=60, project=described_configs_elsewhere)


def alter_configs_checks() -> list[Check]:
    def alter(configs: dict[str, str | None], topic: str | None = None, validate_only: bool = False, rtype: int = TOPIC):
        async def steps(s: Session, v: int) -> None:
            name = topic or unique(s, "dw")
            if topic is None:
                await create_topic(s, name)
            before = await described(s, name, list(configs))
            answer = await s.call(ALTER_CONFIGS, v, make(ALTER_CONFIGS, validate_only=validate_only, resources=[{
                "resource_type": rtype, "resource_name": name,
                "configs": [{"name": k, "value": val} for k, val in configs.items()]}]), "alter")
            changed = answer is not None and answer.responses[0].error_code == 0 and not validate_only
            await after(s, name, list(configs), before, changed)
        return steps

    return [
        *sweep(ALTER_CONFIGS, "set retention.ms", steps=alter({"retention.ms": "120000"})),
        *sweep(ALTER_CONFIGS, "validate only", steps=alter({"retention.ms": "120000"}, validate_only=True)),
        *sweep(ALTER_CONFIGS, "an invalid value", steps=alter({"retention.ms": "soon"})),
        *sweep(ALTER_CONFIGS, "an unknown config", steps=alter({"no.such.config": "1"})),
        *sweep(ALTER_CONFIGS, "unknown topic", steps=alter({"retention.ms": "1"}, topic="dw-nope-ac")),
    ]


def incremental_alter_configs_checks() -> list[Check]:
    def alter(*ops: tuple[str, int, str | None], topic: str | None = None, validate_only: bool = False):
        async def steps(s: Session, v: int) -> None:
            name = topic or unique(s, "dw")
            if topic is None:
                await create_topic(s, name)
            keys = sorted({k for k, _, _ in ops})
            before = await described(s, name, keys)
            answer = await s.call(INCREMENTAL_ALTER_CONFIGS, v, make(
                INCREMENTAL_ALTER_CONFIGS, validate_only=validate_only, resources=[{
                    "resource_type": TOPIC, "resource_name": name, "configs": [
                        {"name": k, "config_operation": op, "value": val} for k, op, val in ops]}]), "alter")
            changed = answer is not None and answer.responses[0].error_code == 0 and not validate_only
            await after(s, name, keys, before, changed)
        return steps

    return [
        *sweep(INCREMENTAL_ALTER_CONFIGS, "set", steps=alter(("retention.ms", SET, "120000"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "set then delete", steps=alter(
            ("retention.ms", SET, "120000"), ("segment.ms", DELETE, None))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "append to a list", steps=alter(("cleanup.policy", APPEND, "compact"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "subtract from a list", steps=alter(("cleanup.policy", SUBTRACT, "delete"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "append to a value that is not a list", steps=alter(
            ("retention.ms", APPEND, "5"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "the same config twice", steps=alter(
            ("retention.ms", SET, "1000"), ("retention.ms", SET, "2000"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "an unknown operation", steps=alter(("retention.ms", 9, "1"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "an invalid value", steps=alter(("retention.ms", SET, "soon"))),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "validate only", steps=alter(("retention.ms", SET, "1000"), validate_only=True)),
        *sweep(INCREMENTAL_ALTER_CONFIGS, "unknown topic", steps=alter(("retention.ms", SET, "1"), topic="dw-nope-iac")),
    ]


# --- ACLs, quotas, SCRAM -------------------------------------------------------------------------------

ANY, TOPIC_RESOURCE, LITERAL, ALLOW, READ = 1, 2, 3, 3, 3


def acl_checks() -> list[Check]:
    acl_filter = {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
                  "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}
    creation = {"resource_type": TOPIC_RESOURCE, "resource_name": DATA, "resource_pattern_type": LITERAL,
                "principal": "User:alice", "host": "*", "operation": READ, "permission_type": ALLOW}
    return [
        *sweep(DESCRIBE_ACLS, "without an authorizer", lambda s, v: make(DESCRIBE_ACLS, **acl_filter)),
        *sweep(CREATE_ACLS, "without an authorizer", lambda s, v: make(CREATE_ACLS, creations=[creation])),
        *sweep(DELETE_ACLS, "without an authorizer", lambda s, v: make(DELETE_ACLS, filters=[acl_filter])),
    ]


def quota_checks() -> list[Check]:
    def describe(s: Session, v: int, user: str) -> Any:
        return make(DESCRIBE_CLIENT_QUOTAS, strict=False, components=[
            {"entity_type": "user", "match_type": 0, "match": user}])

    def alter(user: str, key: str, value: float, remove: bool = False, validate_only: bool = False):
        async def steps(s: Session, v: int) -> None:
            name = f"{user}-v{v}"
            await s.call(ALTER_CLIENT_QUOTAS, v, make(ALTER_CLIENT_QUOTAS, validate_only=validate_only, entries=[{
                "entity": [{"entity_type": "user", "entity_name": name}],
                "ops": [{"key": key, "value": value, "remove": remove}]}]), "alter")
            await s.call_until(lambda r: bool(r.entries) == (not validate_only and key.endswith("_rate")),
                               DESCRIBE_CLIENT_QUOTAS, v, describe(s, v, name), "describe", tries=40)
        return steps

    return [
        *sweep(DESCRIBE_CLIENT_QUOTAS, "no quotas", lambda s, v: describe(s, v, "dw-nobody")),
        *sweep(DESCRIBE_CLIENT_QUOTAS, "an unknown entity type", lambda s, v: make(
            DESCRIBE_CLIENT_QUOTAS, components=[{"entity_type": "planet", "match_type": 0, "match": "x"}])),
        *sweep(ALTER_CLIENT_QUOTAS, "set a byte rate", steps=alter("dw-quota", "producer_byte_rate", 1024.0)),
        *sweep(ALTER_CLIENT_QUOTAS, "validate only", steps=alter("dw-quota-v", "producer_byte_rate", 1.0,
                                                                   validate_only=True)),
        *sweep(ALTER_CLIENT_QUOTAS, "an unknown quota key", steps=alter("dw-quota-bad", "speed_of_light", 1.0)),
    ]


SCRAM_SHA_256 = 1


def scram_checks() -> list[Check]:
    def upsert(name: str, iterations: int, mechanism: int = SCRAM_SHA_256) -> dict:
        return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": b"salt" * 4,
                "salted_password": b"p" * 32}

    def alter(upsertions=(), deletions=(), expect_found: bool = False):
        async def steps(s: Session, v: int) -> None:
            await s.call(ALTER_USER_SCRAM_CREDENTIALS, v, make(ALTER_USER_SCRAM_CREDENTIALS, upsertions=list(upsertions),
                                                                deletions=list(deletions)), "alter")
            names = sorted({u["name"] for u in upsertions} | {d["name"] for d in deletions})
            await s.call_until(lambda r: all(x.error_code == 0 for x in r.results) == expect_found,
                               DESCRIBE_USER_SCRAM_CREDENTIALS, 0, make(DESCRIBE_USER_SCRAM_CREDENTIALS, users=[
                                   {"name": n} for n in names]), "describe", tries=40)
        return steps

    return [
        *sweep(DESCRIBE_USER_SCRAM_CREDENTIALS, "an unknown user", lambda s, v: make(
            DESCRIBE_USER_SCRAM_CREDENTIALS, users=[{"name": "dw-nobody"}])),
        *sweep(DESCRIBE_USER_SCRAM_CREDENTIALS, "the same user twice", lambda s, v: make(
            DESCRIBE_USER_SCRAM_CREDENTIALS, users=[{"name": "dw-twice"}, {"name": "dw-twice"}])),
        *sweep(ALTER_USER_SCRAM_CREDENTIALS, "upsert", steps=alter([upsert("dw-alice", 8192)], expect_found=True)),
        *sweep(ALTER_USER_SCRAM_CREDENTIALS, "too few iterations", steps=alter([upsert("dw-bob", 1)])),
        *sweep(ALTER_USER_SCRAM_CREDENTIALS, "an unknown mechanism", steps=alter([upsert("dw-carol", 8192, 0)])),
        *sweep(ALTER_USER_SCRAM_CREDENTIALS, "delete an unknown credential", steps=alter(
            deletions=[{"name": "dw-dave", "mechanism": SCRAM_SHA_256}])),
    ]


# --- elections, reassignments, cluster -----------------------------------------------------------------

def cluster_checks() -> list[Check]:
    def elect(election_type: int, topic: str = DATA):
        return lambda s, v: make(ELECT_LEADERS, election_type=election_type, timeout_ms=30000,
                                 topic_partitions=[{"topic": topic, "partitions": [0, 1]}])

    def reassign(replicas: list[int] | None, topic: str = DATA):
        return lambda s, v: make(ALTER_PARTITION_REASSIGNMENTS, timeout_ms=30000, topics=[
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}])

    return [
        *sweep(ELECT_LEADERS, "preferred", elect(0)),
        *sweep(ELECT_LEADERS, "unclean", elect(1), versions=range(1, 3)),
        *sweep(ELECT_LEADERS, "unknown topic", elect(0, "dw-nope-elect")),
        *sweep(ALTER_PARTITION_REASSIGNMENTS, "to the replica it has", reassign([1])),
        *sweep(ALTER_PARTITION_REASSIGNMENTS, "to an unknown broker", reassign([7])),
        *sweep(ALTER_PARTITION_REASSIGNMENTS, "cancel when none is in progress", reassign(None)),
        *sweep(ALTER_PARTITION_REASSIGNMENTS, "unknown topic", reassign([1], "dw-nope-apr")),
        *sweep(LIST_PARTITION_REASSIGNMENTS, "a topic", lambda s, v: make(
            LIST_PARTITION_REASSIGNMENTS, timeout_ms=30000, topics=[{"name": DATA, "partition_indexes": [0]}])),
        *sweep(LIST_PARTITION_REASSIGNMENTS, "every partition", lambda s, v: make(
            LIST_PARTITION_REASSIGNMENTS, timeout_ms=30000, topics=None)),
        *sweep(DESCRIBE_CLUSTER, "with authorized operations", lambda s, v: make(
            DESCRIBE_CLUSTER, include_cluster_authorized_operations=True)),
        *sweep(DESCRIBE_CLUSTER, "brokers", lambda s, v: make(DESCRIBE_CLUSTER, endpoint_type=1), versions=range(1, 3)),
        *sweep(DESCRIBE_CLUSTER, "controllers from a broker listener", lambda s, v: make(
            DESCRIBE_CLUSTER, endpoint_type=2), versions=range(1, 3)),
        *sweep(DESCRIBE_CLUSTER, "fenced brokers too", lambda s, v: make(
            DESCRIBE_CLUSTER, endpoint_type=1, include_fenced_brokers=True), versions=[2]),
    ]


def kafka_44_surface_checks() -> list[Check]:
    """Issue 43's APIs: config resources, replica log dirs, delegation tokens (off, as Kafka's defaults
    leave them), unregistering a broker."""
    def own_topics_only(plain: dict[str, Any]) -> dict[str, Any]:
        # each broker lists its own internal topics and every check's topics: only DATA compares
        plain["config_resources"] = [r for r in plain.get("config_resources", [])
                                     if r.get("resource_type", 16) != TOPIC or r.get("resource_name") == DATA]
        return plain

    def resources(*types: int):
        return lambda s, v: make(LIST_CONFIG_RESOURCES, resource_types=list(types))

    return [
        *sweep(LIST_CONFIG_RESOURCES, "every type", resources(), project=own_topics_only),
        *sweep(LIST_CONFIG_RESOURCES, "topics", resources(TOPIC), versions=[1], project=own_topics_only),
        *sweep(LIST_CONFIG_RESOURCES, "brokers and their loggers", resources(BROKER, BROKER_LOGGER), versions=[1]),
        *sweep(LIST_CONFIG_RESOURCES, "groups", resources(GROUP), versions=[1]),
        *sweep(LIST_CONFIG_RESOURCES, "an unknown type", resources(64), versions=[1]),
        *sweep(ALTER_REPLICA_LOG_DIRS, "a directory the broker does not have", lambda s, v: make(
            ALTER_REPLICA_LOG_DIRS, dirs=[{"path": "/no/such/dir", "topics": [
                {"name": DATA, "partitions": [0]}, {"name": "dw-nope-arld", "partitions": [0]}]}])),
        *sweep(CREATE_DELEGATION_TOKEN, "on a plaintext listener", lambda s, v: make(
            CREATE_DELEGATION_TOKEN, renewers=[], max_lifetime_ms=-1)),
        *sweep(RENEW_DELEGATION_TOKEN, "on a plaintext listener", lambda s, v: make(
            RENEW_DELEGATION_TOKEN, hmac=b"hmac", renew_period_ms=1000)),
        *sweep(EXPIRE_DELEGATION_TOKEN, "on a plaintext listener", lambda s, v: make(
            EXPIRE_DELEGATION_TOKEN, hmac=b"hmac", expiry_time_period_ms=1000)),
        *sweep(DESCRIBE_DELEGATION_TOKEN, "on a plaintext listener", lambda s, v: make(
            DESCRIBE_DELEGATION_TOKEN, owners=None)),
        *sweep(UNREGISTER_BROKER, "another broker", lambda s, v: make(UNREGISTER_BROKER, broker_id=7)),
    ]


def quorum_elsewhere(plain: dict[str, Any]) -> dict[str, Any]:
    """DescribeQuorum: the metadata log's offsets, the voters' clocks and the leader epoch are each
    broker's own (Kafka's log has records, and its epoch counts the node's elections, one a start, a
    start retried on new ports too; kbroker's static quorum has no records and one epoch), and the
    voter's listener name is a listed difference of the configuration level, which compares offsets,
    clocks and the epoch as known or not: left to it."""
    for topic in plain.get("topics", []):
        for partition in topic["partitions"]:
            for name in ("high_watermark", "leader_epoch"):
                if partition[name] > 0:
                    partition[name] = CONFIG_LEVEL
            for replica in partition["current_voters"] + partition["observers"]:
                for name in ("log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp"):
                    if replica.get(name, -1) >= 0:  # the clocks from v1
                        replica[name] = CONFIG_LEVEL
    for node in plain.get("nodes", []):
        for listener in node["listeners"]:
            listener["name"] = CONFIG_LEVEL
    return plain


def quorum_and_features_checks() -> list[Check]:
    def quorum(topic: str, partitions: list[int]):
        return lambda s, v: make(DESCRIBE_QUORUM, topics=[
            {"topic_name": topic, "partitions": [{"partition_index": p} for p in partitions]}])

    def update(*updates: tuple[str, int, int]):
        # validate only where the version can say so: the reference broker is the whole session's
        return lambda s, v: make(UPDATE_FEATURES, timeout_ms=30000, validate_only=v >= 1, feature_updates=[
            {"feature": f, "max_version_level": level, "allow_downgrade": False, "upgrade_type": kind}
            for f, level, kind in updates])

    return [
        *sweep(DESCRIBE_QUORUM, "the metadata partition", quorum("__cluster_metadata", [0]), project=quorum_elsewhere),
        *sweep(DESCRIBE_QUORUM, "a partition that is not the quorum's", quorum("dw-nope-quorum", [0, 1])),
        *sweep(UPDATE_FEATURES, "a feature at its finalized level", update(("group.version", 1, 1))),
        *sweep(UPDATE_FEATURES, "a level beyond the supported range", update(("group.version", 5, 1))),
        *sweep(UPDATE_FEATURES, "an unknown feature", update(("no.such.version", 1, 1))),
        *sweep(UPDATE_FEATURES, "a downgrade sent as an upgrade", update(("group.version", 0, 1))),
    ]


def checks() -> list[Check]:
    return [*api_versions_checks(), *sasl_checks(), *create_topics_checks(), *delete_topics_checks(),
            *create_partitions_checks(), *describe_configs_checks(), *alter_configs_checks(),
            *incremental_alter_configs_checks(), *acl_checks(), *quota_checks(), *scram_checks(), *cluster_checks(),
            *kafka_44_surface_checks(), *quorum_and_features_checks(), *unsupported_version_checks()]


UNSERVED = "(every API past its newest version, an unknown API)"


def unsupported_version_checks() -> list[Check]:
    """Every API (but ApiVersions, whose answer has its own check) at the version past both brokers'
    newest, and an API key nobody defines: the header names what is not served, so both close the
    connection without an answer (Kafka's RequestContext refuses it while parsing the header)."""
    from kbroker.broker.apis import SERVED
    from kbroker.protocol import codec, framing
    from kbroker.protocol.messages import request_header

    from .runner import CLOSED, NO_ANSWER, Closed
    from .versions import KAFKA_44, api_name

    def header(api_key: int, version: int) -> bytes:
        spec = framing.request_spec(api_key)
        flexible = spec is not None and spec.is_flexible(version)
        body = request_header.RequestHeader(api_key, version, 1, "differential")
        return codec.encode(request_header.SPEC, 2 if flexible else 1, body)

    def check(api_key: int, version: int, check_id: str, label: str) -> Check:
        async def run(s: Session) -> None:
            conn = await s.connect()
            await conn.send_raw(header(api_key, version) + bytes(16))
            try:
                await conn.read_frame(15)
                outcome: dict = {"outcome": "answered"}
            except Closed:
                outcome = CLOSED
            except TimeoutError:
                outcome = NO_ANSWER
            s.note(label, outcome)
        return Check(check_id, run, api=UNSERVED)

    out = []
    for api_key, (_, _, high) in SERVED.items():
        if api_key != API_VERSIONS:
            version = max(high, KAFKA_44.get(api_key, (0, high))[1]) + 1
            name = api_name(api_key)
            out.append(check(api_key, version, f"{name} v{version}: a version past both brokers' newest",
                             f"{name} v{version}"))
    return [*out, check(999, 0, "API key 999: an API nobody defines", "API key 999 v0")]
