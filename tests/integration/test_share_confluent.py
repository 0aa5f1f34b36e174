"""confluent-kafka's ShareConsumer (confluent-kafka 2.16, librdkafka 2.16's share consumer) against a
real broker process: two consumers of one share group (implicit acknowledgement) with the group set to
share.auto.offset.reset=earliest through IncrementalAlterConfigs, every record delivered."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer", allow_module_level=True)

RECORDS = 40


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("share-confluent") / "data", "--num-partitions", "2",
                         "--group-share-heartbeat-interval-ms", "500")
    yield proc
    proc.stop()


def earliest(broker, group: str, topic: str) -> None:
    w = Wire(broker.bootstrap)
    w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
    answer = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[AlterableConfig(
            name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))
    assert answer.responses[0].error_code == 0
    w.close()


def test_share_consumers_get_every_record(broker):
    topic, group = f"sc-{uuid.uuid4().hex[:6]}", f"scg-{uuid.uuid4().hex[:6]}"
    earliest(broker, group, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    consumers = [confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
                 for _ in range(2)]
    seen: list[bytes] = []
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(set(seen)) < RECORDS and time.monotonic() < deadline:
            for c in consumers:
                for m in c.poll(0.5):
                    if m.error() is None:
                        seen.append(m.value())
    finally:
        for c in consumers:
            c.close()
    assert sorted(set(seen)) == sorted(f"v{i}".encode() for i in range(RECORDS))
