"""A consumer group's consumer.heartbeat.interval.ms override (IncrementalAlterConfigs on the GROUP
resource) paces a real KIP-848 client: librdkafka (confluent-kafka, group.protocol=consumer) heartbeats
at the interval each ConsumerGroupHeartbeat answer names, and Kafka 4.4's coordinator answers the
group's override (GroupMetadataManager.consumerGroupHeartbeatIntervalMs), not the broker's 5 s. The
session timeout override (consumer.session.timeout.ms) is checked with the coordinator's manual clock
in tests/unit/test_consumer_group_heartbeat.py."""

from __future__ import annotations

import logging
import re
import time
import uuid

from confluent_kafka import Consumer, Producer

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_group_configs import SET, alter
from kbroker.tests.integration.wire import Wire

INTERVAL_MS = 12_000  # the group's; the broker's is 5,000
# librdkafka's debug line for each heartbeat it sends; a steady one repeats nothing ("NULL" subscription)
SENT = re.compile(r'ConsumerGroupHeartbeat of member id "[^"]+", group id "[^"]+", generation id ([1-9]\d*),.*'
                  r'subscribed topics "NULL"')


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[float] = []  # when each steady heartbeat was sent

    def emit(self, record: logging.LogRecord) -> None:
        if SENT.search(record.getMessage()):
            self.sent.append(record.created)


def test_a_real_kip848_client_heartbeats_at_the_groups_interval(tmp_path):
    topic, group = f"hb-{uuid.uuid4().hex[:6]}", f"hbg-{uuid.uuid4().hex[:6]}"
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as broker:
        w = Wire(broker.bootstrap)
        assert alter(w, group, [("consumer.heartbeat.interval.ms", SET, str(INTERVAL_MS))]).error_code == 0
        w.close()
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, b"x")
        assert producer.flush(10) == 0
        del producer
        lines = Lines()
        logger = logging.getLogger(f"rdkafka-{group}")
        logger.addHandler(lines)
        logger.setLevel(logging.DEBUG)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "debug": "cgrp"}, logger=logger)
        try:
            consumer.subscribe([topic])
            got = None
            deadline = time.monotonic() + 60
            while got is None and time.monotonic() < deadline:
                got = consumer.poll(0.5)
            assert got is not None and got.error() is None, got  # joined and assigned
            while len(lines.sent) < 3 and time.monotonic() < deadline:  # two gaps between steady heartbeats
                consumer.poll(0.5)
        finally:
            consumer.close()
    gaps = [b - a for a, b in zip(lines.sent, lines.sent[1:])]
    assert len(gaps) >= 2, lines.sent
    # at the broker's 5 s every gap would be about 5 s; the client waits the group's 12 s (less only by
    # its own jitter: librdkafka starts the next interval when the answer arrives, not when it is sent)
    assert max(gaps) >= 10.0, gaps
