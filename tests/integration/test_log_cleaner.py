"""The log cleaner (issue 43) in a real broker process: a compacted topic is cleaned by the cleaner's own
loop (log.cleaner.backoff.ms), chosen by its min.cleanable.dirty.ratio, with the log retention check
left at Kafka's five minutes; a consumer then reads only the newest record of each key."""

from __future__ import annotations

import time

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TIMEOUT = 15
WAIT_S = 90  # a bound against a hang: the cleaner's backoff here is half a second


def read_all(broker: BrokerProcess, topic: str) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[bytes, bytes]] = []
        while True:
            msg = consumer.poll(TIMEOUT)
            assert msg is not None, "the consumer stopped before the high watermark"
            assert msg.error() is None, msg.error()
            out.append((msg.key(), msg.value()))
            if msg.offset() >= high - 1:
                return out
    finally:
        consumer.close()


def test_a_little_dirty_compacted_topic_is_cleaned_by_the_cleaner(tmp_path):
    with BrokerProcess(tmp_path / "data", "--log-cleaner-backoff-ms", "500") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "cleaned"
        admin.create_topics([NewTopic(topic, 1, config={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})])[topic].result(
            timeout=TIMEOUT)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        base = int(time.time() * 1000) - 60_000
        for i in range(30):  # each a second apart in record time: each rolls a segment (segment.ms 100)
            producer.produce(topic, key=b"k%d" % (i % 3), value=b"v%d" % i, timestamp=base + i * 1_000)
            producer.flush(TIMEOUT)
        # the cleaner may have cleaned while the records came; it cleans again once they are dirty enough
        deadline = time.monotonic() + WAIT_S
        while len(records := read_all(broker, topic)) == 30:
            assert time.monotonic() < deadline, "the cleaner never cleaned the topic"
            time.sleep(0.5)
        assert [e for e in broker.events("log_cleaned") if e.get("topic") == topic]
        assert not broker.events("retention_delete")
    # the newest of each key survives, the active segment's record stays (it is never cleaned)
    assert dict(records) == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
    assert records[-1] == (b"k2", b"v29")
