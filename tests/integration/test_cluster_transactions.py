"""librdkafka's 0103 (transactions) against `kbroker serve --nodes 3`, with confluent-kafka (issue 41: its
topics are created with replication factor 3, which one node refused): the basic producer test (commit
and abort, each checked by a read_committed consumer) and the consumer-producer test that mimics a
streams job (consume, produce, send_offsets_to_transaction, every third transaction aborted, the input
consumer recreated once to resume from the committed offsets), on RF=3 topics with
min.insync.replicas=2; and the streams job again with one node stopping half way through (an
expected failure for now: it sometimes stalls, see below). The repository has no librdkafka test harness to run 0103 itself
(tests/ has none), so this is what it does, step for step."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.tests.integration.cluster_scenarios import start_cluster

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 4
MIN_ISR = {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    broker, controls, port = start_cluster(tmp_path_factory.mktemp("txn-cluster"), 3)
    yield broker, controls, ",".join(f"127.0.0.1:{port + k}" for k in range(3))
    broker.stop()


def _create(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 3, config=MIN_ISR) for t in topics], operation_timeout=15)
    for future in futures.values():
        future.result(30)
    described = admin.list_topics(timeout=15)
    for t in topics:
        assert all(len(p.replicas) == 3 for p in described.topics[t].partitions.values())


def _consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def _poll(consumer: Consumer, count: int, limit_s: float = 60.0) -> list:
    """`count` messages (errors other than end of partition fail the test)."""
    out: list = []
    deadline = time.monotonic() + limit_s
    while len(out) < count:
        assert time.monotonic() < deadline, f"consumed {len(out)} of {count}"
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            continue
        out.append(m)
    return out


def _none_within(consumer: Consumer, seconds: float) -> list:
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            seen.append(m)
    return seen


def test_basic_producer_transactions_on_rf3_topics(cluster) -> None:
    """0103's do_test_basic_producer_txn: each transaction commits or aborts; a read_committed consumer
    subscribed beforehand sees exactly the committed ones."""
    _, _, bootstrap = cluster
    topic = f"0103-basic-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 5})
    consumer = _consumer(bootstrap, topic)
    consumer.subscribe([topic])
    try:
        producer.init_transactions(30)
        for i, (count, abort) in enumerate(((100, False), (50, True), (30, False), (20, True), (10, False))):
            producer.begin_transaction()
            for n in range(count):
                producer.produce(topic, key=f"{i}".encode(), value=f"txn{i}-{n}".encode())
            if abort:
                producer.abort_transaction(30)
                assert not [m for m in _none_within(consumer, 3.0) if m.key() == f"{i}".encode()]
            else:
                producer.commit_transaction(30)
                got = _poll(consumer, count)
                assert sorted(m.value() for m in got) == sorted(f"txn{i}-{n}".encode() for n in range(count))
    finally:
        consumer.close()


def test_consumer_producer_transactions_on_rf3_topics(cluster) -> None:
    """0103's do_test_consumer_producer_txn on RF=3 topics of 4 partitions with min.insync.replicas=2:
    p1 seeds the input in one transaction; c1 (read_committed) reads 10-30 messages per transaction,
    p2 writes them to the output and sends c1's positions to the transaction; every third transaction
    aborts, and after the fourth c1 is recreated to resume from the committed offsets. c2 then reads
    exactly the committed messages from the output."""
    _streams_job(cluster, stop_node=False)


# Seen on 2026-11-29 (3 runs of 5, under load; the first two passed): after node 3 stops, the job
# stalls: kbroker logs nothing more until the output transaction times out 60 s later
# (transaction_timed_out, transaction.timeout.ms), and the test then hangs for minutes in the client's
# calls. Not yet looked into (issue 41). Not run (run=False) so that it cannot hold the suite up, but
# kept visible as an expected failure rather than left out.
@pytest.mark.xfail(reason="a transactional streams job stalls after a node stops, until its transaction "
                          "times out (not yet looked into)", run=False)
def test_consumer_producer_transactions_ride_through_a_node_stopping(cluster) -> None:
    """The same with node 3 stopped before the sixth transaction and started after the eighth (the
    writes go on: two replicas in sync, min.insync.replicas=2)."""
    _streams_job(cluster, stop_node=True)


def _streams_job(cluster, *, stop_node: bool) -> None:
    _, controls, bootstrap = cluster
    tag = uuid.uuid4().hex[:6]
    source, sink = f"0103-input-{tag}", f"0103-output-{tag}"
    _create(bootstrap, source, sink)
    total = 10 * 30
    p1 = Producer({"bootstrap.servers": bootstrap, "transactional.id": source})
    p1.init_transactions(30)
    p1.begin_transaction()
    for n in range(total):
        p1.produce(source, key=str(n).encode(), value=f"m{n}".encode())
    p1.commit_transaction(30)
    c1 = _consumer(bootstrap, source)
    c1.subscribe([source])
    p2 = Producer({"bootstrap.servers": bootstrap, "transactional.id": sink})
    p2.init_transactions(30)
    expected: list[bytes] = []
    stopped = False
    try:
        for txn in range(10):
            count, abort = 10 * (1 + txn % 3), txn % 3 == 0
            if txn == 5 and stop_node:
                controls.stop_node(3)
                stopped = True
            msgs = _poll(c1, count)
            p2.begin_transaction()
            for m in msgs:
                p2.produce(sink, key=m.key(), value=m.value())
                if not abort:
                    expected.append(m.value())
            p2.send_offsets_to_transaction(c1.position(c1.assignment()), c1.consumer_group_metadata(), 30)
            if abort:
                p2.abort_transaction(30)
            else:
                p2.commit_transaction(30)
            if abort and txn == 3:  # recreated, c1 resumes from the offsets the transactions committed
                c1.close()
                c1 = _consumer(bootstrap, source)
                c1.subscribe([source])
            if txn == 7 and stopped:
                controls.start_node(3)
                stopped = False
    finally:
        if stopped:
            controls.start_node(3)
        c1.close()
    c2 = _consumer(bootstrap, sink)
    c2.subscribe([sink])
    try:
        got = _poll(c2, len(expected))
        assert not _none_within(c2, 2.0)
    finally:
        c2.close()
    assert sorted(m.value() for m in got) == sorted(expected)
