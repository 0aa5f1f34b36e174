"""The log cleaner (issue 43) in a real broker process: a compacted topic is cleaned by the cleaner's own
loop (log.cleaner.backoff.ms), chosen by its min.cleanable.dirty.ratio, with the log retention check
left at Kafka's five minutes; a consumer then reads only the newest record of each key. Where each log
was cleaned to is kept in Kafka's cleaner-offset-checkpoint file across restarts; a damaged one is
reported and read as absent."""

from __future__ import annotations

import time

import pytest

from kbroker.broker.storage.log.cleaner_checkpoint import FILE as CHECKPOINT, parse
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
        # the cleaner logs a cleaning once its checkpoint is written, in a worker thread after the
        # cleaned segments are in place: a reader can see them first
        await_cleaning(broker, topic, 1)
        assert not broker.events("retention_delete")
    # the newest of each key survives, the active segment's record stays (it is never cleaned)
    assert dict(records) == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
    assert records[-1] == (b"k2", b"v29")


def cleanings(broker: BrokerProcess, topic: str, start: int) -> list[dict]:
    return [e for e in broker.events("log_cleaned", start) if e.get("topic") == topic]


def await_cleaning(broker: BrokerProcess, topic: str, start: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cleanings(broker, topic, start):
        assert time.monotonic() < deadline, f"the cleaner never cleaned {topic}:\n{broker.dump_log()}"
        time.sleep(0.2)


def fill(broker: BrokerProcess, topic: str, records: int) -> None:
    """A compacted topic of three keys whose every record rolls a segment (cleanable at once), cleaned
    whenever anything is dirty (a cleaning while the records come is then followed by another)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                                    "min.cleanable.dirty.ratio": "0.01"})])[
        topic].result(timeout=TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 60_000
    for i in range(records):
        producer.produce(topic, key=b"k%d" % (i % 3), value=b"v%d" % i, timestamp=base + i * 1_000)
        producer.flush(TIMEOUT)


def test_where_the_cleaner_stopped_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, "--log-cleaner-backoff-ms", "500") as broker:
        fill(broker, "kept", 30)
        # cleaned up to the active segment (the last record's): a cleaning while the records came may
        # have stopped short of it, and the next one reaches it
        deadline = time.monotonic() + WAIT_S
        while (offsets := parse((data / CHECKPOINT).read_text()) if (data / CHECKPOINT).exists()
               else {}).get(("kept", 0)) != 29:
            assert time.monotonic() < deadline, broker.dump_log()
            time.sleep(0.2)
        lines = (data / CHECKPOINT).read_text().splitlines()  # Kafka's format
        assert lines[:2] == ["0", str(len(offsets))] and "kept 0 29" in lines[2:]

        # restarted (killed: the file was durable before the cleaning was logged), the log is not
        # cleaned again: the old cleaner counted it all dirty and cleaned it in its first round
        broker.restart(clean=False)
        assert broker.events("cleaner_checkpoint_read", 2)
        fill(broker, "marker", 12)  # dirty now, so a cleaning round runs after the start's first
        await_cleaning(broker, "marker", 2)
        assert not cleanings(broker, "kept", 2)
        assert parse((data / CHECKPOINT).read_text())["kept", 0] == offsets["kept", 0]

        # damaged: reported, read as absent (each compacted log cleaned once more), and written whole again
        broker.stop()
        (data / CHECKPOINT).write_text("0\n7\nkept 0 12\ngarbage\n")
        broker.start()
        (damage,) = broker.events("cleaner_checkpoint_damaged", 3)
        assert damage["level"] == "error" and "malformed line 4" in damage["error"]
        await_cleaning(broker, "kept", 3)
        deadline = time.monotonic() + WAIT_S
        while ("kept", 0) not in (offsets := parse((data / CHECKPOINT).read_text())):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert dict(read_all(broker, "kept")) == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
