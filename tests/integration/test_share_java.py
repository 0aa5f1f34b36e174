"""Share groups with Kafka's own client: Java KafkaShareConsumer 4.4 (explicit acknowledgement), three
members on a topic of three partitions and a fourth member that takes records and walks away without
acknowledging them (tests/clients/java/ShareScenario.java). Every record is delivered and acknowledged
exactly once; the walked-away member's records come back once their locks expire (delivery count 2);
a poison record is rejected and never comes back."""

from __future__ import annotations

import collections
import subprocess
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.client_matrix import java_classes
from kbroker.tests.reference.kafka import java_command, kafka_libs

RECORDS = 60
LOCK_MS = 3000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("share-java") / "data", "--num-partitions", "3",
                         "--group-share-record-lock-duration-ms", str(LOCK_MS),
                         "--group-share-heartbeat-interval-ms", "1000")
    yield proc
    proc.stop()


def start_at_earliest(broker, group: str, topic: str) -> None:
    """The group reads from the log's start (share.auto.offset.reset=earliest, set as librdkafka's and
    Kafka's share tests do, through the GROUP config resource), so records produced before the
    consumers join are delivered."""
    w = Wire(broker.bootstrap)
    assert w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                         allow_auto_topic_creation=True)).topics[0].error_code == 0
    answer = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[AlterableConfig(
            name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))
    assert answer.responses[0].error_code == 0
    w.close()


def records_and_a_poison(broker, group: str, topic: str) -> None:
    """RECORDS records round the topic's three partitions, then a "poison" one on partition 0, for a
    group that starts at the earliest."""
    start_at_earliest(broker, group, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode(), partition=i % 3)
    producer.produce(topic, b"poison", partition=0)
    assert producer.flush(10) == 0


def test_kafka_share_consumers_deliver_every_record_once_and_redeliver_a_quitters(broker):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    classes = java_classes(libs)
    topic, group = f"sj-{uuid.uuid4().hex[:6]}", f"sjg-{uuid.uuid4().hex[:6]}"
    records_and_a_poison(broker, group, topic)
    command = java_command("ShareScenario", broker.bootstrap, topic, group, "3", str(RECORDS), "90000")
    command[command.index("-cp") + 1] += f":{classes}"
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    lines = done.stdout.splitlines()
    acks = [line.split() for line in lines if line.startswith("ACK ")]
    quit_ = {(int(p), int(o)) for _, p, o in (line.split() for line in lines if line.startswith("QUIT "))}
    rejected = [line.split() for line in lines if line.startswith("REJECT ")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines[-1] == f"DONE {RECORDS}", (lines[-20:], done.stderr[-3000:])
    seen = collections.Counter((int(p), int(o)) for _, p, o, _, _ in acks)
    assert len(seen) == RECORDS and set(seen.values()) == {1}  # every record acknowledged exactly once
    assert quit_, "the quitter took nothing"
    # what the quitter took came back after its locks expired, at its second delivery
    redelivered = {(int(p), int(o)): int(count) for _, p, o, count, _ in acks if (int(p), int(o)) in quit_}
    assert redelivered and set(redelivered.values()) == {2}
    assert len({m for *_, m in acks}) >= 2  # the members shared the work
    assert len(rejected) <= 1 + (1 if (0, RECORDS // 3) in quit_ else 0)
