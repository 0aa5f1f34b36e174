"""Dynamic broker configs (issue 43) against a real broker process, through confluent-kafka's admin
client: IncrementalAlterConfigs and AlterConfigs on the BROKER resource (this node's id, and the
empty name for the cluster-wide default) change what Kafka lets change at run time, refuse the rest
with Kafka's errors and messages, DescribeConfigs reports each value's source and synonyms as Kafka
4.4 does (DYNAMIC_BROKER_CONFIG over DYNAMIC_DEFAULT_BROKER_CONFIG over STATIC_BROKER_CONFIG over
DEFAULT_CONFIG), a changed topic default takes effect at once on a topic without its own value, and
everything survives a restart."""

from __future__ import annotations

import pytest

from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TIMEOUT = 15
TOPIC, BROKER = 2, 4
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5  # ConfigSource
SET, DELETE = 0, 1
INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("dynconf") / "data", "--log-retention-hours", "2")
    yield proc
    proc.stop()


def alter(broker, node: str, *ops: tuple[str, str | None, int]) -> tuple[int, str | None]:
    wire = Wire(broker.bootstrap)
    answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=BROKER, resource_name=node, configs=[
            AlterableConfig(name=n, config_operation=o, value=v) for n, v, o in ops])], validate_only=False)
    ).responses[0]
    wire.close()
    return answer.error_code, answer.error_message


def describe(broker, resource_type: int, name: str) -> dict[str, tuple]:
    """name -> (value, source, read_only, synonyms as (name, value, source))"""
    wire = Wire(broker.bootstrap)
    result = wire.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)], include_synonyms=True,
        include_documentation=False)).results[0]
    wire.close()
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source, c.read_only, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def produce(broker, topic: str, size: int) -> str:
    """The delivery's outcome of one record of `size` bytes: OK or Kafka's error name."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10_000_000,
                         "retries": 0, "linger.ms": 0})
    outcome: list[str] = []
    producer.produce(topic, b"x" * size, on_delivery=lambda err, _msg: outcome.append(err.name() if err else "OK"))
    producer.flush(TIMEOUT)
    return outcome[0]


def test_dynamic_configs_change_report_and_persist(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "dynconf-topic"
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=TIMEOUT)
    assert produce(broker, topic, 50_000) == "OK"

    # the cluster-wide default, then this broker's own value over it
    assert alter(broker, "", ("log.retention.ms", "60000", SET), ("message.max.bytes", "20000", SET)) == (0, None)
    assert alter(broker, "1", ("log.retention.ms", "120000", SET)) == (0, None)
    # a topic without its own max.message.bytes takes the new default at once
    assert produce(broker, topic, 50_000) == "MSG_SIZE_TOO_LARGE"
    assert produce(broker, topic, 1_000) == "OK"

    def check_described() -> None:
        configs = describe(broker, BROKER, "1")
        # Kafka's chain of the retention settings, from the name described on
        assert configs["log.retention.ms"] == ("120000", DYNAMIC_BROKER, False, [
            ("log.retention.ms", "120000", DYNAMIC_BROKER), ("log.retention.ms", "60000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "2", STATIC), ("log.retention.hours", "168", DEFAULT)])
        assert configs["log.retention.hours"] == ("2", STATIC, True, [
            ("log.retention.hours", "2", STATIC), ("log.retention.hours", "168", DEFAULT)])
        assert configs["message.max.bytes"] == ("20000", DYNAMIC_DEFAULT, False, [
            ("message.max.bytes", "20000", DYNAMIC_DEFAULT), ("message.max.bytes", "1048588", DEFAULT)])
        assert configs["node.id"][2] and configs["num.partitions"][1] == DEFAULT
        # the empty name: only the cluster-wide defaults that are set
        defaults = describe(broker, BROKER, "")
        assert defaults == {
            "log.retention.ms": ("60000", DYNAMIC_DEFAULT, False, [("log.retention.ms", "60000", DYNAMIC_DEFAULT)]),
            "message.max.bytes": ("20000", DYNAMIC_DEFAULT, False, [("message.max.bytes", "20000", DYNAMIC_DEFAULT)]),
        }
        # a topic's config reports the broker layer that gives it, and the chain below
        topic_configs = describe(broker, TOPIC, topic)
        assert topic_configs["retention.ms"] == ("120000", DYNAMIC_BROKER, False, [
            ("log.retention.ms", "120000", DYNAMIC_BROKER), ("log.retention.ms", "60000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "2", STATIC), ("log.retention.hours", "168", DEFAULT)])
        assert topic_configs["max.message.bytes"][:2] == ("20000", DYNAMIC_DEFAULT)

    check_described()
    broker.restart()
    check_described()
    assert produce(broker, topic, 50_000) == "MSG_SIZE_TOO_LARGE"

    # deleting this broker's value uncovers the default's; deleting that brings back the static one
    assert alter(broker, "1", ("log.retention.ms", None, DELETE)) == (0, None)
    assert alter(broker, "", ("log.retention.ms", None, DELETE), ("message.max.bytes", None, DELETE)) == (0, None)
    configs = describe(broker, TOPIC, topic)
    # log.retention.hours alone: Kafka's quirk, the chain is named from log.retention.ms on (topic_defaults.py)
    assert configs["retention.ms"][:2] == ("7200000", DEFAULT)
    assert configs["max.message.bytes"][1] == DEFAULT
    assert produce(broker, topic, 50_000) == "OK"
    assert describe(broker, BROKER, "") == {}


def test_refusals_as_kafka(broker):
    assert alter(broker, "1", ("node.id", "2", SET)) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [node.id]")
    assert alter(broker, "1", ("ssl.keystore.location", "/x", SET)) == (
        INVALID_REQUEST, "These security configs can be dynamically updated only per-listener using the listener "
                         "prefix: [ssl.keystore.location]")
    assert alter(broker, "", ("sasl.kerberos.min.time.before.relogin", "58000", SET)) == (
        INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must be specified: "
                         "[sasl.kerberos.min.time.before.relogin]")
    assert alter(broker, "", ("log.retention.ms", "soon", SET)) == (
        INVALID_REQUEST, "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")
    assert alter(broker, "", ("log.cleaner.threads", "many", SET)) == (
        INVALID_REQUEST, "Invalid value many for configuration log.cleaner.threads: Not a number of type INT")
    assert alter(broker, "1", ("log.retention.hours", "1", SET)) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [log.retention.hours]")
    assert alter(broker, "2", ("log.retention.ms", "1", SET)) == (
        INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2")
    # Kafka keeps a per-broker listener setting it has no use for here (librdkafka's 0081 sets this one)
    assert alter(broker, "1", ("sasl.kerberos.min.time.before.relogin", "58000", SET)) == (0, None)
    assert describe(broker, BROKER, "1")["sasl.kerberos.min.time.before.relogin"] == (
        "58000", DYNAMIC_BROKER, False, [("sasl.kerberos.min.time.before.relogin", "58000", DYNAMIC_BROKER),
                                         ("sasl.kerberos.min.time.before.relogin", "60000", DEFAULT)])
    assert alter(broker, "1", ("sasl.kerberos.min.time.before.relogin", None, DELETE)) == (0, None)
    # nothing refused was kept
    assert describe(broker, BROKER, "") == {}


APPEND, SUBTRACT = 2, 3
INVALID_CONFIG = 40


def test_append_and_subtract_on_broker_list_configs_as_kafka(broker):
    """Kafka 4.4's answers (tests/reference/test_differential_config.py compares them with Kafka itself):
    an absent value starts from Kafka's default, an item already there is not added twice, an absent
    one subtracted is no error, and the result is kept even when empty."""
    policy = "log.cleanup.policy"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dynconf-lists", 1)])["dynconf-lists"].result(timeout=TIMEOUT)

    def value(node: str) -> tuple[str, int] | None:
        entry = describe(broker, BROKER, node).get(policy)
        return None if entry is None else entry[:2]

    try:
        assert alter(broker, "1", (policy, "compact", APPEND)) == (0, None)
        assert value("1") == ("delete,compact", DYNAMIC_BROKER)
        assert alter(broker, "1", (policy, "compact,delete,compact", APPEND)) == (0, None)
        assert value("1") == ("delete,compact", DYNAMIC_BROKER)
        assert alter(broker, "1", (policy, "delete", SUBTRACT)) == (0, None)
        assert value("1") == ("compact", DYNAMIC_BROKER)
        # a topic without its own cleanup.policy is compacted now, as the new default says
        assert describe(broker, TOPIC, "dynconf-lists")["cleanup.policy"][:2] == ("compact", DYNAMIC_BROKER)
        assert alter(broker, "1", (policy, "compact", SUBTRACT)) == (0, None)
        assert value("1") == ("", DYNAMIC_BROKER)
        # the cluster-wide default: subtracting what is not there keeps Kafka's default as the value
        assert alter(broker, "", (policy, "compact", SUBTRACT)) == (0, None)
        assert value("") == ("delete", DYNAMIC_DEFAULT)
        assert alter(broker, "1", ("sasl.enabled.mechanisms", "PLAIN", APPEND)) == (0, None)
        assert describe(broker, BROKER, "1")["sasl.enabled.mechanisms"][:2] == ("GSSAPI,PLAIN", DYNAMIC_BROKER)
        broker.restart()
        assert value("1") == ("", DYNAMIC_BROKER)
        assert value("") == ("delete", DYNAMIC_DEFAULT)
    finally:
        assert alter(broker, "1", (policy, None, DELETE), ("sasl.enabled.mechanisms", None, DELETE)) == (0, None)
        assert alter(broker, "", (policy, None, DELETE)) == (0, None)
    assert alter(broker, "1", ("log.retention.ms", "5", APPEND)) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    assert alter(broker, "1", ("no.such.config", "5", SUBTRACT)) == (INVALID_CONFIG, "Unknown config name: no.such.config")
    assert alter(broker, "1", ("listener.name.plaintext.sasl.enabled.mechanisms", "PLAIN", APPEND)) == (
        INVALID_CONFIG, "Unknown config name: listener.name.plaintext.sasl.enabled.mechanisms")
    assert alter(broker, "1", ("log.dirs", "/elsewhere", APPEND)) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")
    assert alter(broker, "", ("sasl.enabled.mechanisms", "PLAIN", APPEND)) == (
        INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must be specified: "
                         "[sasl.enabled.mechanisms]")
    assert alter(broker, "1", (policy, "nonsense", APPEND))[0] == INVALID_REQUEST
    assert alter(broker, "1", (policy, "x", 7)) == (INVALID_REQUEST, "Unknown operations type 7")
    assert describe(broker, BROKER, "") == {}
    assert describe(broker, BROKER, "1")[policy][:2] == ("delete", DEFAULT)


def test_connection_limits_change_at_run_time(broker):
    """max.connections.per.ip, its per-address overrides and a listener's max.connections apply to
    the next connection once changed (Kafka's DynamicConnectionQuota); the ones open stay."""
    from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest

    def answered(wire: Wire) -> bool:
        try:
            wire.call(18, 0, ApiVersionsRequest())
            return True
        except (OSError, EOFError, ValueError):
            return False

    def open_until_refused(most: int) -> int:
        """How many connections at once this address gets (up to `most`, then all closed)."""
        wires = []
        try:
            while len(wires) < most:
                wire = Wire(broker.bootstrap, timeout=10)
                wires.append(wire)
                if not answered(wire):
                    return len(wires) - 1
            return len(wires)
        finally:
            for wire in wires:
                wire.close()

    assert open_until_refused(6) == 6
    try:
        assert alter(broker, "", ("max.connections.per.ip", "3", SET)) == (0, None)
        assert open_until_refused(6) == 3
        # zero for every address but the overridden ones: only with overrides (over both layers, as in Kafka)
        assert alter(broker, "", ("max.connections.per.ip", "0", SET)) == (
            INVALID_REQUEST, "requirement failed: max.connections.per.ip can be set to zero only if "
                             "max.connections.per.ip.overrides property is set.")
        assert alter(broker, "1", ("max.connections.per.ip.overrides", "127.0.0.1:4,[::1]:9,elsewhere:2", SET)) == (0, None)
        assert open_until_refused(6) == 4
        assert alter(broker, "1", ("listener.name.plaintext.max.connections", "2", SET)) == (0, None)
        assert open_until_refused(6) == 2
        assert alter(broker, "1", ("max.connections.per.ip.overrides", "127.0.0.1:x", SET)) == (
            INVALID_REQUEST, 'For input string: "x"')
        assert alter(broker, "1", ("listener.name.plaintext.max.connections", "-2", SET)) == (
            INVALID_REQUEST, "Invalid value -2 for configuration max.connections: Value must be at least 0")
    finally:
        assert alter(broker, "", ("max.connections.per.ip", None, DELETE)) == (0, None)
        assert alter(broker, "1", ("listener.name.plaintext.max.connections", None, DELETE),
                     ("max.connections.per.ip.overrides", None, DELETE)) == (0, None)
    assert open_until_refused(6) == 6
    assert [e for e in broker.events("connection_refused") if "max.connections.per.ip=3" in e["reason"]]


def test_producer_id_expiration_changes_at_run_time(broker):
    """producer.id.expiration.ms set at run time: an idle producer's state goes at the next expiry
    pass (every 30 s here, with the producer snapshots) instead of after Kafka's 24 hours."""
    import time

    from kbroker.protocol.messages.describe_producers_request import DescribeProducersRequest, TopicRequest

    topic = "dynconf-producers"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    producer.produce(topic, b"once")
    assert producer.flush(TIMEOUT) == 0

    def active() -> list[int]:
        wire = Wire(broker.bootstrap)
        (partition,) = wire.call(61, 0, DescribeProducersRequest([TopicRequest(topic, [0])])).topics[0].partitions
        wire.close()
        assert partition.error_code == 0
        return [p.producer_id for p in partition.active_producers]

    assert len(active()) == 1
    assert alter(broker, "", ("producer.id.expiration.ms", "1000", SET)) == (0, None)
    try:
        deadline = time.monotonic() + 90  # a bound against a hang: the pass comes every 30 s
        while active():
            assert time.monotonic() < deadline, "the idle producer's state was never expired"
            time.sleep(1)
    finally:
        assert alter(broker, "", ("producer.id.expiration.ms", None, DELETE)) == (0, None)
    assert describe(broker, BROKER, "1")["producer.id.expiration.ms"][:2] == ("86400000", DEFAULT)
