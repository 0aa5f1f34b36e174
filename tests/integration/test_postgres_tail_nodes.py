"""Node processes over a real PostgreSQL with a log many times their memory budget (issue 44; the store
level is test_postgres_tail.py): confluent-kafka produces a partition far past the tail and the read
cache, then consumes it from the start in full and in order (checksums), on its leader and, after a
kill -9 of that leader, on the node that takes it over; the leader's resident memory (VmRSS of
/proc/<pid>/status) stays within a bound derived from the budgets while the log grows; a consumer of
old offsets and a producer to another partition of the same node both make progress at once."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.cluster_scenarios import leaders
from kbroker.tests.integration.test_postgres_nodes import metadata, start_node, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_client = pytest.importorskip("confluent_kafka.admin")

MiB = 1024 * 1024
TAIL, MEMORY, CACHE = MiB // 4, MiB, 2 * MiB
BUDGET = ("--postgres-tail-bytes", str(TAIL), "--postgres-memory-bytes", str(MEMORY),
          "--postgres-read-cache-bytes", str(CACHE))
RECORD = 8 * 1024
# What a node may grow by, beyond its budgets, while its log grows by LOG_BYTES: the allocator's
# slack, the clients' buffers, the index (a few dozen bytes a batch). Holding the log would take
# LOG_BYTES more.
SLACK = 24 * MiB
LOG_BYTES = 48 * MiB


def rss(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def value(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(8, "big")).digest() * (RECORD // 32)


def produce(bootstrap: str, topic: str, partition: int, first: int, count: int, acked: list[int] | None = None) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                         "linger.ms": 5, "message.max.bytes": 2 * MiB})
    errors: list[str] = []

    def done(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        elif acked is not None:
            acked.append(msg.offset())

    for i in range(first, first + count):
        while True:
            try:
                producer.produce(topic, value(i), partition=partition, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0 and not errors, errors


def consume(bootstrap: str, topic: str, partition: int, count: int, progress: list[int] | None = None) -> str:
    """The checksum of `count` records read from offset 0, checked in order as they come."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                         "enable.auto.commit": False, "fetch.max.bytes": 4 * MiB,
                                         "max.partition.fetch.bytes": MiB})
    consumer.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
    digest = hashlib.sha256()
    expected = 0
    misses = 0
    try:
        while expected < count:
            msg = consumer.poll(1.0)
            if msg is None:
                misses += 1
                assert misses < 120, f"no record for 120 polls at offset {expected}"
                continue
            assert msg.error() is None, msg.error()
            assert msg.offset() == expected, f"offset {msg.offset()} where {expected} was expected"
            digest.update(msg.value())
            expected += 1
            if progress is not None:
                progress.append(expected)
    finally:
        consumer.close()
    return digest.hexdigest()


def offset_for_time(bootstrap: str, topic: str, partition: int, timestamp_ms: int) -> int:
    """ListOffsets by timestamp, as a client asks it."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex[:6]}"})
    try:
        [found] = consumer.offsets_for_times([confluent_kafka.TopicPartition(topic, partition, timestamp_ms)], 30)
        return found.offset
    finally:
        consumer.close()


def checksum(first: int, count: int) -> str:
    digest = hashlib.sha256()
    for i in range(first, first + count):
        digest.update(value(i))
    return digest.hexdigest()


def test_a_log_many_times_the_budget_is_served_from_the_database_with_bounded_memory(postgres, tmp_path):
    url = postgres.url(postgres.create_database())
    nodes = {n: start_node(tmp_path / f"node{n}", url, n, *BUDGET) for n in (1, 2)}
    try:
        wait_for(lambda: all(len(metadata(b).brokers) == 2 for b in nodes.values()), "each node sees both")
        bootstrap = ",".join(b.bootstrap for b in nodes.values())
        topic = f"big-{uuid.uuid4().hex[:6]}"
        admin = admin_client.AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([admin_client.NewTopic(
                topic, 4, 2, config={"max.message.bytes": str(2 * MiB)})]).values():
            future.result(30)
        wait_for(lambda: all(len(led := leaders(b.bootstrap, topic)) == 4 and all(p[0] > 0 for p in led.values())
                             for b in nodes.values()), "both nodes know the topic's leaders")
        led = leaders(nodes[1].bootstrap, topic)
        leader = led[0][0]
        # another partition the same node leads: its producer shares the leader's event loop
        other = next(p for p, (node, _) in led.items() if p != 0 and node == leader)
        count = LOG_BYTES // RECORD

        warm = count // 8
        produce(bootstrap, topic, 0, 0, warm)
        before = rss(nodes[leader])
        later_ms = int(time.time() * 1000) + 1  # after every record of the first part
        produce(bootstrap, topic, 0, warm, count - warm)
        # ListOffsets by timestamp finds old batches through reads from the database too
        assert offset_for_time(bootstrap, topic, 0, 1) == 0
        assert warm <= offset_for_time(bootstrap, topic, 0, later_ms) < count
        grown = rss(nodes[leader]) - before
        print(f"leader's RSS {before / MiB:.0f} MiB after {warm * RECORD / MiB:.0f} MiB, "
              f"+{grown / MiB:.1f} MiB after {LOG_BYTES / MiB:.0f} MiB")
        assert grown < MEMORY + CACHE + SLACK, f"the leader grew by {grown / MiB:.1f} MiB with its log"

        # a consumer of the old offsets and a producer to another partition of the node, at once: the
        # producer sends until the consumer has read the whole log; some of its acknowledgements come
        # while the consumer is part way
        progress: list[int] = []
        seen_at_acks: list[int] = []
        result: dict[str, str] = {}
        reader = threading.Thread(target=lambda: result.update(sum=consume(bootstrap, topic, 0, count, progress)))
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        sent = 0
        try:
            producer.produce(topic, b"first", partition=other)
            assert producer.flush(60) == 0
            reader.start()
            while reader.is_alive():
                producer.produce(topic, value(sent), partition=other,
                                 on_delivery=lambda err, _: err is None and seen_at_acks.append(len(progress)))
                sent += 1
                producer.poll(0.01)
            assert producer.flush(60) == 0
        finally:
            reader.join(300)
        assert result["sum"] == checksum(0, count)  # every record, in order
        assert len(seen_at_acks) == sent
        assert any(0 < seen < count for seen in seen_at_acks), "no acknowledgement while the consumer read"
        print(f"{sent} records acknowledged on partition {other} while the consumer read partition 0")
        grown = rss(nodes[leader]) - before
        print(f"after reading the log from the start: +{grown / MiB:.1f} MiB")
        assert grown < MEMORY + CACHE + SLACK, f"the leader grew by {grown / MiB:.1f} MiB reading its log"

        # the leader is killed: the other node opens the partition (its index and tail only) and serves it all
        survivor = nodes[3 - leader]
        nodes[leader].kill()
        wait_for(lambda: leaders(survivor.bootstrap, topic)[0][0] == survivor_id(nodes, survivor),
                 "the survivor leads the partition")
        opened = rss(survivor)
        assert offset_for_time(survivor.bootstrap, topic, 0, 1) == 0
        assert consume(survivor.bootstrap, topic, 0, count) == checksum(0, count)
        grown = rss(survivor) - opened
        print(f"the new leader: RSS {opened / MiB:.0f} MiB on taking over, +{grown / MiB:.1f} MiB after reading")
        assert grown < MEMORY + CACHE + SLACK
    finally:
        for broker in nodes.values():
            broker.kill()


def survivor_id(nodes: dict[int, BrokerProcess], broker: BrokerProcess) -> int:
    return next(n for n, b in nodes.items() if b is broker)
