"""Kafka-style listeners: one broker, two named listeners, and real clients on each are told that
listener's advertised address by Metadata, FindCoordinator and DescribeCluster (as Kafka answers
with the endpoints of the listener a request came in on)."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.wire import Wire


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory):
    outside, inside = free_port(), free_port()
    # Both advertised hosts resolve here, but differ ("localhost" vs "127.0.0.1"), so an answer that
    # named the wrong listener would show in the host as well as in the port.
    advertised = {"PLAINTEXT": ("localhost", outside), "INTERNAL": ("127.0.0.1", inside)}
    broker = BrokerProcess(
        tmp_path_factory.mktemp("listeners") / "data",
        "--listeners", f"PLAINTEXT://127.0.0.1:{outside},INTERNAL://127.0.0.1:{inside}",
        "--advertised-listeners", f"PLAINTEXT://localhost:{outside},INTERNAL://127.0.0.1:{inside}",
        "--listener-security-protocol-map", "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "--group-initial-rebalance-delay-ms", "0",
        port=outside, listen_flag=False,
    )
    yield broker, {"PLAINTEXT": f"127.0.0.1:{outside}", "INTERNAL": f"127.0.0.1:{inside}"}, advertised
    broker.stop()


@pytest.mark.parametrize("listener", ["PLAINTEXT", "INTERNAL"])
def test_wire_answers_name_the_listener_of_the_connection(two_listeners, listener) -> None:
    broker, bootstrap, advertised = two_listeners
    wire = Wire(bootstrap[listener])
    try:
        md = wire.call(3, 12, MetadataRequest(topics=None))
        assert [(b.host, b.port) for b in md.brokers] == [advertised[listener]]
        fc = wire.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]))
        assert [(c.error_code, c.host, c.port) for c in fc.coordinators] == [(0, *advertised[listener])]
        fc0 = wire.call(10, 0, FindCoordinatorRequest(key="g"))
        assert (fc0.error_code, fc0.host, fc0.port) == (0, *advertised[listener])
        dc = wire.call(60, 0, DescribeClusterRequest())
        assert [(b.host, b.port) for b in dc.brokers] == [advertised[listener]]
    finally:
        wire.close()


@pytest.mark.parametrize("listener", ["PLAINTEXT", "INTERNAL"])
def test_confluent_kafka_on_each_listener(two_listeners, listener) -> None:
    """librdkafka bootstraps on one listener, follows what it is told, produces, joins a group and
    consumes; the coordinator and cluster it sees are that listener's address."""
    from confluent_kafka import Consumer, ConsumerGroupState, Producer
    from confluent_kafka.admin import AdminClient

    broker, bootstrap, advertised = two_listeners
    conf = {"bootstrap.servers": bootstrap[listener]}
    admin = AdminClient(conf)
    md = admin.list_topics(timeout=10)
    assert [(b.host, b.port) for b in md.brokers.values()] == [advertised[listener]]
    cluster = admin.describe_cluster(request_timeout=10).result()
    assert [(n.host, n.port) for n in cluster.nodes] == [advertised[listener]]

    topic, group = f"t-{listener.lower()}-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    producer = Producer(conf)
    producer.produce(topic, b"via " + listener.encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline, got = time.monotonic() + 30, None
        while got is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got = msg.value()
        assert got == b"via " + listener.encode()
        (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
        description = future.result()
        assert description.state == ConsumerGroupState.STABLE
        assert (description.coordinator.host, description.coordinator.port) == advertised[listener]
    finally:
        consumer.close()


def test_broker_started_event_lists_both_listeners(two_listeners) -> None:
    broker, bootstrap, advertised = two_listeners
    (started,) = broker.events("broker_started")
    assert started["listeners"] == f"PLAINTEXT://{bootstrap['PLAINTEXT']},INTERNAL://{bootstrap['INTERNAL']}"
    assert started["advertised_listeners"] == ",".join(
        f"{name}://{host}:{port}" for name, (host, port) in advertised.items())


def test_legacy_listen_flags_are_one_plaintext_listener(tmp_path) -> None:
    port = free_port()
    with BrokerProcess(tmp_path / "data", "--advertised-listener", f"localhost:{port}", port=port) as broker:
        wire = Wire(broker.bootstrap)
        md = wire.call(3, 12, MetadataRequest(topics=None))
        wire.close()
        assert [(b.host, b.port) for b in md.brokers] == [("localhost", port)]
        (started,) = broker.events("broker_started")
        assert started["listeners"] == f"PLAINTEXT://127.0.0.1:{port}"


def test_create_topics_at_start_is_idempotent_and_never_alters(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    with BrokerProcess(tmp_path / "data", "--create-topics", "orders:3,payments:6:compact") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = admin.list_topics(timeout=10).topics
        assert len(topics["orders"].partitions) == 3 and len(topics["payments"].partitions) == 6
        (future,) = admin.describe_configs([ConfigResource("topic", "payments")]).values()
        assert future.result()["cleanup.policy"].value == "compact"
        broker.extra_args[-1] = "orders:3,payments:2"  # restart asking for other settings
        broker.restart()
        topics = admin.list_topics(timeout=10).topics
        assert len(topics["orders"].partitions) == 3 and len(topics["payments"].partitions) == 6
        (future,) = admin.describe_configs([ConfigResource("topic", "payments")]).values()
        assert future.result()["cleanup.policy"].value == "compact"
        assert broker.events("topic_created", start=2) == []
        (differs,) = broker.events("startup_topic_differs", start=2)
        assert (differs["topic"], differs["partitions"], differs["requested_partitions"]) == ("payments", 6, 2)
        assert "kbroker topic delete payments" in differs["what_to_do"]  # partitions cannot be removed
        broker.extra_args[-1] = "orders:4,payments:6:delete"  # more partitions, another policy
        broker.restart()
        (differs,) = broker.events("startup_topic_differs", start=3)[:1]
        assert "kbroker topic alter orders -p 4" in differs["what_to_do"]
        assert [e["what_to_do"] for e in broker.events("startup_topic_differs", start=3)][1] == (
            "kbroker topic alter payments -c cleanup.policy=delete")
        assert [e["topic"] for e in broker.events("startup_topic_exists", start=2)] == ["orders"]


def test_empty_host_binds_every_interface(tmp_path) -> None:
    port = free_port()
    with BrokerProcess(tmp_path / "data", "--listeners", f"PLAINTEXT://:{port}", "--advertised-listeners",
                       f"PLAINTEXT://127.0.0.1:{port}", port=port, listen_flag=False) as broker:
        for host in ("127.0.0.1", "localhost"):
            wire = Wire(f"{host}:{port}")
            md = wire.call(3, 12, MetadataRequest(topics=None))
            wire.close()
            assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", port)]
        assert broker.events("broker_started")[0]["listeners"] == f"PLAINTEXT://:{port}"


def test_describe_configs_reports_the_listener_settings(two_listeners) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    broker, bootstrap, advertised = two_listeners
    admin = AdminClient({"bootstrap.servers": bootstrap["INTERNAL"]})
    (future,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
    configs = {name: entry.value for name, entry in future.result().items()}
    assert configs["listeners"] == f"PLAINTEXT://{bootstrap['PLAINTEXT']},INTERNAL://{bootstrap['INTERNAL']}"
    assert configs["advertised.listeners"] == ",".join(
        f"{name}://{host}:{port}" for name, (host, port) in advertised.items())
    assert configs["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
    # Kafka's controller.listener.names has no default: unset, it is null, not ""
    assert configs["controller.listener.names"] is None
