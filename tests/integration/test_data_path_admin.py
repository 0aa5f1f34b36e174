"""Topic administration round trips with confluent-kafka's AdminClient against a real broker process."""

from __future__ import annotations

import time

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

TIMEOUT = 15


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("admin") / "data", "--num-partitions", "2")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_of(future) -> KafkaError | None:
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as e:
        return e.args[0]
    return None


def topic_configs(admin, name: str) -> dict:
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    return admin.describe_configs([res])[res].result(timeout=TIMEOUT)


def partition_count(admin, name: str) -> int:
    return len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions)


def test_create_describe_alter_grow_delete(admin, broker):
    name = "admin-roundtrip"
    futures = admin.create_topics([NewTopic(name, 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})])
    assert error_of(futures[name]) is None
    assert partition_count(admin, name) == 3
    # one node leads, holds and keeps in sync every partition (the answer's lists are shared)
    node = admin.describe_cluster().result(TIMEOUT).nodes[0].id
    parts = admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions
    assert [(p.id, p.leader, p.replicas, p.isrs) for p in sorted(parts.values(), key=lambda p: p.id)] == [
        (i, node, [node], [node]) for i in range(3)]

    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    assert not configs["retention.ms"].is_read_only and not configs["retention.ms"].is_sensitive

    # Incremental: SET one, DELETE one, APPEND to a list config.
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
    ])
    assert error_of(admin.incremental_alter_configs([res])[res]) is None
    configs = topic_configs(admin, name)
    assert configs["retention.bytes"].value == "1000000"
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert set(configs["cleanup.policy"].value.split(",")) == {"compact", "delete"}

    # validate_only changes nothing; an invalid value is INVALID_CONFIG and changes nothing either.
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.bytes", "5", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([res], validate_only=True)[res]) is None
    bad = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.bytes", "lots", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([bad])[bad]).code() == KafkaError.INVALID_CONFIG
    assert topic_configs(admin, name)["retention.bytes"].value == "1000000"

    # Grow, then refuse a shrink.
    assert error_of(admin.create_partitions([NewPartitions(name, 5)])[name]) is None
    assert partition_count(admin, name) == 5
    assert error_of(admin.create_partitions([NewPartitions(name, 4)])[name]).code() == KafkaError.INVALID_PARTITIONS

    # The new partitions take writes.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    delivered = []
    producer.produce(name, key=b"k", value=b"v", partition=4, on_delivery=lambda e, m: delivered.append((e, m.offset())))
    producer.flush(TIMEOUT)
    assert delivered == [(None, 0)]

    assert error_of(admin.delete_topics([name])[name]) is None
    deadline = time.monotonic() + TIMEOUT
    while name in admin.list_topics(timeout=TIMEOUT).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in admin.list_topics(timeout=TIMEOUT).topics
    assert error_of(admin.delete_topics([name])[name]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_topic_errors(admin):
    assert error_of(admin.create_topics([NewTopic("dup-topic", 1, 1)])["dup-topic"]) is None
    assert error_of(admin.create_topics([NewTopic("dup-topic", 1, 1)])["dup-topic"]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_of(admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert error_of(admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"]).code() == KafkaError.TOPIC_EXCEPTION
    long_name = "x" * 250
    assert error_of(admin.create_topics([NewTopic(long_name, 1, 1)])[long_name]).code() == KafkaError.TOPIC_EXCEPTION
    bad_cfg = admin.create_topics([NewTopic("bad-config", 1, 1, config={"no.such.config": "1"})])["bad-config"]
    assert error_of(bad_cfg).code() == KafkaError.INVALID_CONFIG
    validate = admin.create_topics([NewTopic("validate-only", 1, 1)], validate_only=True)["validate-only"]
    assert error_of(validate) is None
    assert "validate-only" not in admin.list_topics(timeout=TIMEOUT).topics
    # num_partitions -1 / replication factor -1: the broker defaults (num.partitions = 2 here)
    assert error_of(admin.create_topics([NewTopic("defaults", -1, -1)])["defaults"]) is None
    assert partition_count(admin, "defaults") == 2
    # a manual assignment onto this node
    assigned = admin.create_topics([NewTopic("assigned", 3, -1, replica_assignment=[[1], [1], [1]])])["assigned"]
    assert error_of(assigned) is None
    assert partition_count(admin, "assigned") == 3
    elsewhere = admin.create_topics([NewTopic("elsewhere", 1, -1, replica_assignment=[[7]])])["elsewhere"]
    assert error_of(elsewhere).code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


def test_a_topic_name_of_249_characters_is_served_end_to_end(admin, broker):
    """Kafka's longest legal name: created by the admin client, auto-created by a producer beside a
    topic that exists, consumed, and deleted (its file names once ran past the file system's 255)."""
    made, auto = "m" * 249, "a" * 249
    assert error_of(admin.create_topics([NewTopic(made, 3, 1)])[made]) is None
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    delivered = []
    for topic in (made, auto):
        producer.produce(topic, b"long", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(TIMEOUT)
    assert delivered == [None, None]
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert topics[made].error is None and len(topics[made].partitions) == 3 and auto in topics
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "long-names",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([auto])
    got = None
    deadline = time.monotonic() + TIMEOUT
    while got is None and time.monotonic() < deadline:
        got = consumer.poll(0.5)
    consumer.close()
    assert got is not None and got.error() is None and got.value() == b"long"
    for future in admin.delete_topics([made, auto], operation_timeout=TIMEOUT).values():
        assert error_of(future) is None
    assert not ({made, auto} & set(admin.list_topics(timeout=TIMEOUT).topics))


def test_timestamp_bounds_are_enforced_and_min_insync_replicas_is_capped(admin, broker):
    """Kafka 4: a CreateTime record more than message.timestamp.after.max.ms (an hour) ahead, or older
    than a configured message.timestamp.before.max.ms, is INVALID_TIMESTAMP. acks=all to a topic that
    wants more in-sync replicas than this broker's one is taken: Kafka 3.7+ (KAFKA-15583) caps the
    minimum at the replica count."""
    bounded = {"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"}
    for topic, configs in (("ts-default", {}), ("ts-bounded", bounded), ("isr-2", {"min.insync.replicas": "2"})):
        assert error_of(admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic]) is None

    def send(topic: str, timestamp: int = 0, acks: str = "all") -> str:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "retries": 0,
                             "enable.idempotence": False, "message.timeout.ms": 10_000})
        out: list[str] = []
        producer.produce(topic, b"x", timestamp=timestamp,
                         on_delivery=lambda err, msg: out.append(err.name() if err else "OK"))
        producer.flush(TIMEOUT)
        return out[0]

    now = int(time.time() * 1000)
    hour = 3_600_000
    assert send("ts-default", now - 24 * hour) == "OK"
    assert send("ts-default", now + 2 * hour) == "INVALID_TIMESTAMP"
    assert send("ts-bounded", now - hour) == "INVALID_TIMESTAMP"
    assert send("ts-bounded", now + hour) == "INVALID_TIMESTAMP"
    assert send("ts-bounded", now) == "OK"
    assert send("isr-2") == "OK"
    assert send("isr-2", acks="1") == "OK"


def test_describe_broker_configs_and_cluster(admin, broker):
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([res])[res].result(timeout=TIMEOUT)
    assert configs["num.partitions"].value == "2"
    assert configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["message.max.bytes"].value == "1048588"
    # read-only unless Kafka changes it at run time (dynamic broker configs: test_dynamic_broker_configs.py)
    assert configs["num.partitions"].is_read_only and not configs["message.max.bytes"].is_read_only
    change = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([change])[change]).code() == KafkaError.INVALID_REQUEST

    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, broker.host, broker.port)]
    assert cluster.cluster_id


def test_internal_topics_cannot_be_deleted(admin):
    assert error_of(admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"]).code() == \
        KafkaError.TOPIC_EXCEPTION
    assert "__consumer_offsets" in admin.list_topics(timeout=TIMEOUT).topics


def test_double_underscore_user_topics_are_ordinary(admin, broker):
    """Kafka's internal topics are a fixed set; `__anything_else` is a user topic like any other."""
    name = "__user_thing"
    assert error_of(admin.create_topics([NewTopic(name, 1, 1)])[name]) is None
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, b"v")
    assert producer.flush(15) == 0
    from kafka import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        flags = {t.get("topic", t.get("name")): t["is_internal"] for t in kp.describe_topics([name, "__consumer_offsets"])}
    finally:
        kp.close()
    assert flags == {name: False, "__consumer_offsets": True}
    assert error_of(admin.delete_topics([name])[name]) is None


def test_admin_changes_survive_a_restart(admin, broker):
    name = "admin-persist"
    assert error_of(admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "123456"})])[name]) is None
    assert error_of(admin.create_partitions([NewPartitions(name, 4)])[name]) is None
    broker.restart()
    fresh = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert partition_count(fresh, name) == 4
    assert topic_configs(fresh, name)["retention.ms"].value == "123456"


def test_legacy_alter_configs_replaces_every_override(admin, broker):
    """AlterConfigs (33): the given set replaces all of a topic's overrides (keys left out go back to
    their defaults); a resource listed twice is refused."""
    from kbroker.protocol.messages.alter_configs_request import (
        AlterableConfig,
        AlterConfigsRequest,
        AlterConfigsResource,
    )
    from kbroker.tests.integration.wire import Wire

    name = "legacy-alter"
    assert error_of(admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "111111"})])[name]) is None
    wire = Wire(broker.bootstrap)
    try:
        change = AlterConfigsResource(resource_type=2, resource_name=name,
                                      configs=[AlterableConfig("retention.bytes", "2000000")])
        answer = wire.call(33, 2, AlterConfigsRequest(resources=[change], validate_only=False))
        assert [(r.error_code, r.resource_name) for r in answer.responses] == [(0, name)]
        twice = wire.call(33, 1, AlterConfigsRequest(resources=[change, change], validate_only=False))
        assert {r.error_code for r in twice.responses} == {42}  # INVALID_REQUEST
    finally:
        wire.close()
    configs = topic_configs(admin, name)
    assert configs["retention.bytes"].value == "2000000"
    assert configs["retention.ms"].value == "604800000"  # the old override is gone: back to the default
