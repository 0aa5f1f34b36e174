"""The reference broker itself: Apache Kafka 4.4.0 starts from the jars `make kafka-jars` resolved, answers a
real client, and stops; the differential tests build on this."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_kafka_reference_produces_and_consumes(kafka_reference):
    topic = f"ref-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_reference.bootstrap})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_reference.bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_reference.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    try:
        for _ in range(120):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value())
            if len(seen) == 10:
                break
    finally:
        consumer.close()
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(10))
    metadata = admin.list_topics(timeout=10)
    assert list(metadata.brokers) == [1]
    assert kafka_reference.java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                                kafka_reference.bootstrap, "--list").stdout.split().count(topic) == 1
