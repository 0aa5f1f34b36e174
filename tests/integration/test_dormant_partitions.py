"""A real broker keeps the partitions of a new topic dormant (no log object, broker/storage/log/dormant.py)
through Metadata, and builds one's log with its first produce or fetch; restarts, clean or not,
keep what was written and leave the untouched ones dormant. Seen from outside: the
`kbroker_partitions` gauge, the per-partition log end offsets in /metrics and the `logs_loaded` log line."""

from __future__ import annotations

import time
import urllib.request

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

TOPIC = "wide"
PARTITIONS = 300


def scrape(admin_url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as resp:
        body = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def partitions(samples, state: str) -> float:
    return samples[("kbroker_partitions", (("state", state),))]


def log_end(samples, partition: int) -> float | None:
    return samples.get(("kbroker_log_end_offset", (("partition", str(partition)), ("topic", TOPIC))))


def produce(bootstrap: str, partition: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def read(bootstrap: str, partition: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, partition, confluent_kafka.OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, partition))
                if len(got) >= high - low:
                    return got
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        raise AssertionError(f"only {len(got)} records read from {TOPIC}-{partition}")
    finally:
        consumer.close()


def test_partitions_stay_dormant_until_first_use_and_across_restarts(tmp_path) -> None:
    admin_port = free_port()
    url = f"http://127.0.0.1:{admin_port}"
    with BrokerProcess(tmp_path / "data", "--metrics-listen", f"127.0.0.1:{admin_port}") as broker:
        before = scrape(url)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        described = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]  # Metadata for every partition
        assert len(described.partitions) == PARTITIONS and all(p.leader == 1 for p in described.partitions.values())
        after = scrape(url)
        assert partitions(after, "dormant") == partitions(before, "dormant") + PARTITIONS
        assert partitions(after, "loaded") == partitions(before, "loaded")
        assert log_end(after, 299) == 0  # a dormant partition is still in the per-partition figures

        produce(broker.bootstrap, 7, 5)
        used = scrape(url)
        assert partitions(used, "loaded") == partitions(before, "loaded") + 1
        assert partitions(used, "dormant") == partitions(after, "dormant") - 1
        assert (log_end(used, 7), log_end(used, 8)) == (5, 0)
        assert read(broker.bootstrap, 7) == [b"v%d" % i for i in range(5)]
        assert read(broker.bootstrap, 8) == []  # its offsets asked for: partition 8's log is built, empty
        assert partitions(scrape(url), "loaded") == partitions(before, "loaded") + 2

        broker.restart()
        loaded = broker.events("logs_loaded", start=2)[-1]
        restarted = scrape(url)
        # Reloaded from disk: only 7 holds records; 8 is empty again, so dormant again.
        assert partitions(restarted, "loaded") == partitions(before, "loaded") + 1
        assert loaded["dormant"] == partitions(restarted, "dormant") == partitions(after, "dormant") - 1
        assert read(broker.bootstrap, 7) == [b"v%d" % i for i in range(5)]
        produce(broker.bootstrap, 8, 2)

        broker.restart(clean=False)  # SIGKILL: the next start recovers
        crashed = scrape(url)
        assert (log_end(crashed, 7), log_end(crashed, 8), log_end(crashed, 9)) == (5, 2, 0)
        assert read(broker.bootstrap, 8) == [b"v0", b"v1"]
        produce(broker.bootstrap, 299, 1)
        assert log_end(scrape(url), 299) == 1
