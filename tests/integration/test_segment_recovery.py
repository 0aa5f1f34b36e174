"""A crashed broker whose active segment ends in a torn or corrupted batch: the test damages the tail
itself, restarts the broker, and every acknowledged message is still there (and the damage is logged)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(180)
TOPIC = "recover-me"
COUNT = 2_000


def produce_acknowledged(broker: BrokerProcess) -> list[bytes]:
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(COUNT):
        value = b"value-%06d" % i
        producer.produce(TOPIC, value, partition=0,
                         on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    assert producer.flush(30) == 0
    return acked


def consume_all(broker: BrokerProcess) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "recover", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[bytes] = []
    idle = 0
    while idle < 6:
        msgs = consumer.consume(1000, 0.5)
        idle = idle + 1 if not msgs else 0
        out += [m.value() for m in msgs if m.error() is None]
    consumer.close()
    return out


def active_segment(data_dir: Path) -> Path:
    return sorted((data_dir / f"{TOPIC}-0").glob("*.log"))[-1]


@pytest.mark.parametrize("damage", ["torn", "corrupt"])
def test_damaged_tail_is_recovered_at_start_up(tmp_path, damage: str) -> None:
    broker = BrokerProcess(tmp_path / "data")
    try:
        acked = produce_acknowledged(broker)
        assert len(acked) == COUNT
        broker.kill()  # a crash: no clean-shutdown marker, so start-up must scan
        segment = active_segment(broker.data_dir)
        size = segment.stat().st_size
        if damage == "torn":
            # half of a batch that never finished: what a crash mid-write leaves
            with open(segment, "ab") as f:
                f.write(open(segment, "rb").read()[:40])
        else:
            # a batch whose bytes rotted after the header: bad CRC
            with open(segment, "ab") as f:
                good = open(segment, "rb").read()
                batch_len = int.from_bytes(good[8:12], "big") + 12
                bad = bytearray(good[:batch_len])
                bad[-1] ^= 0xFF
                f.write(bytes(bad))
        broker.start()
        assert consume_all(broker) == acked
        events = broker.events("log_truncated_on_recovery")
        assert events and events[0]["file"] == str(segment) and events[0]["position"] == size
        # and the partition accepts new writes after the truncation point
        more = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        more.produce(TOPIC, b"after", partition=0)
        assert more.flush(15) == 0
        assert consume_all(broker)[-1] == b"after"
    finally:
        broker.kill()
    assert os.path.getsize(active_segment(broker.data_dir)) > size
