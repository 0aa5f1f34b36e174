"""Share groups' dead letter queues (KIP-1191) against Kafka 4.4: the same scenario through Kafka's own
KafkaShareConsumer (tests/clients/java/ShareDlqScenario.java) on each broker — a rejected record and a
poison record released until the delivery count limit archives it — and the DLQ topic's contents
compared record by record (partition, key, value, headers; not the write's timestamps)."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.protocol import record_batch as rb
from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.client_matrix import java_classes
from kbroker.tests.reference.kafka import java_command, kafka_libs

LIMIT = 2
VALUES = [("k0", "a0"), ("k1", "reject"), ("k2", "a1"), ("k3", "poison"), ("k4", "a2")]


def _create(wire: Wire, name: str, partitions: int, configs: dict[str, str]) -> None:
    answer = wire.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=30_000, validate_only=False))
    assert answer.topics[0].error_code == 0, answer.topics[0].error_message


def _dlq_contents(wire: Wire, topic: str, partitions: int, expect: int) -> list[tuple]:
    deadline = time.monotonic() + 60
    while True:
        out = []
        for partition in range(partitions):
            answer = wire.call(1, 12, FetchRequest(
                max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                    partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])]))
            part = answer.responses[0].partitions[0]
            for header, batch in rb.decode_batches(bytes(part.records or b"")):
                out.extend((partition, header.compression, r.key, r.value,
                            [(k, v) for k, v in r.headers]) for r in batch)
        if len(out) >= expect or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def run(bootstrap: str, tag: str, classes) -> tuple[list[str], list[tuple]]:
    """The scenario on one broker: its consumer's lines and its DLQ topic's records, with the names
    made alike (the suffix replaced by <id>)."""
    suffix = uuid.uuid4().hex[:6]
    topic, group, dlq = f"dlqsrc-{suffix}", f"dlqg-{suffix}", f"dlq.d-{suffix}"
    wire = Wire(bootstrap)
    try:
        _create(wire, topic, 2, {})
        _create(wire, dlq, 3, {"errors.deadletterqueue.group.enable": "true"})
        answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[
                AlterableConfig(name=n, config_operation=0, value=v) for n, v in (
                    ("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", dlq),
                    ("errors.deadletterqueue.copy.record.enable", "true"),
                    ("share.delivery.count.limit", str(LIMIT)))])], validate_only=False))
        assert answer.responses[0].error_code == 0, answer.responses[0].error_message
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for key, value in VALUES:
            producer.produce(topic, value.encode(), key.encode(), partition=1)
            producer.flush(10)
        command = java_command("ShareDlqScenario", bootstrap, topic, group, "3", str(LIMIT), "90000")
        command[command.index("-cp") + 1] += f":{classes}"
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        lines = done.stdout.splitlines()
        assert done.returncode == 0 and lines and lines[-1] == "DONE", (tag, lines[-20:], done.stderr[-3000:])
        contents = _dlq_contents(wire, dlq, 3, 2)
    finally:
        wire.close()

    def alike(value):
        return value.replace(suffix.encode(), b"<id>") if isinstance(value, bytes) else value

    return (sorted(set(lines)),
            [(p, c, k, v, [(name, alike(h)) for name, h in headers]) for p, c, k, v, headers in contents])


def test_the_dlq_topic_holds_what_kafka_writes(kafka_reference, tmp_path):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    classes = java_classes(libs)
    kafka_lines, kafka_dlq = run(kafka_reference.bootstrap, "kafka", classes)
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1")
    try:
        kbroker_lines, kbroker_dlq = run(broker.bootstrap, "kbroker", classes)
    finally:
        broker.stop()
    assert kafka_dlq == kbroker_dlq
    assert kafka_lines == kbroker_lines
    # what both wrote: the reject (delivery 1) and the poison (its limit), into partition 1 % 3
    assert [(p, k, v, dict(h)["__dlq.errors.message"]) for p, _, k, v, h in kafka_dlq] == [
        (1, b"k1", b"reject", b"Offset rejected by client."),
        (1, b"k3", b"poison", b"Offset delivery count exceeded the threshold.")]
