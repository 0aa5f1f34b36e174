"""KIP-848 regex subscriptions resolved after the heartbeat that brings them, as Kafka 4.4 does
(GroupMetadataManager.maybeUpdateRegularExpressions, issue 43): that heartbeat answers with the
assignment of what is already resolved, and the regex's topics come with a later epoch. On the wire
against a real broker process, then with confluent-kafka's consumer on the consumer protocol."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402

CGH = 68
LITERAL, MATCHED = "rxa-literal", "rxa-matched"
WAIT_S = 30  # a bound against a hang


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("rx-async") / "data", "--num-partitions", "2")
    wire = Wire(proc.bootstrap)
    wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=LITERAL), MetadataRequestTopic(name=MATCHED)],
                                     allow_auto_topic_creation=True))
    wire.close()
    yield proc
    proc.stop()


def topic_names(wire: Wire) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in wire.call(3, 12, MetadataRequest(topics=None)).topics}


def test_the_heartbeat_that_brings_a_regex_answers_what_is_resolved(broker):
    wire = Wire(broker.bootstrap)
    names = topic_names(wire)
    group, member = f"rxa-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())

    def beat(epoch: int, owned, **kw):
        r = wire.call(CGH, 1, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                            topic_partitions=owned, **kw))
        assert r.error_code == 0, r
        return r

    def held(r) -> set[str]:
        return {names[t.topic_id] for t in r.assignment.topic_partitions}

    def owned_of(r):
        return [TopicPartitions(t.topic_id, t.partitions) for t in r.assignment.topic_partitions]

    first = beat(0, [], rebalance_timeout_ms=30_000, subscribed_topic_names=[LITERAL])
    assert held(first) == {LITERAL}
    # the subscription adds a regex: this answer still holds only the literal topic, at the same epoch
    # (Kafka bumps none for a regex not resolved yet)
    added = beat(first.member_epoch, owned_of(first), rebalance_timeout_ms=30_000,
                 subscribed_topic_names=[LITERAL], subscribed_topic_regex="rxa-m.*")
    assert held(added) == {LITERAL} and added.member_epoch == first.member_epoch
    # a later heartbeat brings the regex's topic, at a later epoch still
    current, deadline = added, time.monotonic() + WAIT_S
    while MATCHED not in held(current):
        assert time.monotonic() < deadline, "the regex's topics never came"
        time.sleep(0.05)
        later = beat(current.member_epoch, owned_of(current))
        current = later if later.assignment is not None else current
    assert held(current) == {LITERAL, MATCHED} and current.member_epoch > added.member_epoch
    wire.close()


def test_confluent_kafka_consumer_protocol_regex_subscription(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(4):
        producer.produce(MATCHED, key=b"k", value=b"m%d" % i, partition=i % 2)
    producer.flush(15)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"rxa-ck-{uuid.uuid4().hex[:6]}",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["^rxa-m.*"])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 4:
            assert time.monotonic() < deadline, f"got only {got}"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                assert msg.topic() == MATCHED
                got.append(msg.value())
        assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]
    finally:
        consumer.close()
