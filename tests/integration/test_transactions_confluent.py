"""Transactions with confluent-kafka (librdkafka) against a real broker process: interleaved commits
and aborts into 3 partitions counted by read_committed and read_uncommitted consumers, a zombie fenced
by a new instance, and the operator APIs."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("txn") / "data")
    yield proc
    proc.stop()


def create_topic(broker: BrokerProcess, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)


def txn_producer(broker: BrokerProcess, txn_id: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def consume_all(broker: BrokerProcess, topic: str, isolation: str, expected: int | None = None,
                idle_s: float = 3.0, limit_s: float = 60.0) -> list:
    """Every message of `topic` from the beginning; stops `idle_s` after the last one (or once
    `expected` arrived and nothing more comes within a short grace)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out = []
    deadline = time.monotonic() + limit_s
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                grace = 1.0 if expected is not None and len(out) >= expected else idle_s
                if time.monotonic() - last > grace:
                    break
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            out.append(m)
            last = time.monotonic()
    finally:
        c.close()
    return out


def test_interleaved_commits_and_aborts_read_committed_sees_only_committed(broker):
    topic = "txn-interleaved"
    create_topic(broker, topic)
    a = txn_producer(broker, "txn-a")
    b = txn_producer(broker, "txn-b")
    committed, aborted = set(), set()
    for round_ in range(10):
        a.begin_transaction()
        b.begin_transaction()
        for i in range(30):
            va, vb = f"a-{round_}-{i}", f"b-{round_}-{i}"
            a.produce(topic, value=va.encode(), partition=i % PARTITIONS)
            b.produce(topic, value=vb.encode(), partition=(i + 1) % PARTITIONS)
        a.flush(10)
        b.flush(10)
        # a commits even rounds, b commits odd ones; each aborts the others, interleaved in the log
        for p, prefix, commit in ((a, "a", round_ % 2 == 0), (b, "b", round_ % 2 == 1)):
            values = {f"{prefix}-{round_}-{i}" for i in range(30)}
            if commit:
                p.commit_transaction(30)
                committed |= values
            else:
                p.abort_transaction(30)
                aborted |= values
    # non-transactional records interleave too
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(15):
        plain.produce(topic, value=f"plain-{i}".encode(), partition=i % PARTITIONS)
        committed.add(f"plain-{i}")
    plain.flush(10)

    rc = consume_all(broker, topic, "read_committed", expected=len(committed))
    seen = [m.value().decode() for m in rc]
    assert len(seen) == len(set(seen)) == len(committed)
    assert set(seen) == committed
    ru = consume_all(broker, topic, "read_uncommitted", expected=len(committed) + len(aborted))
    assert {m.value().decode() for m in ru} == committed | aborted
    assert len(ru) == len(committed) + len(aborted)


def test_open_transaction_holds_back_read_committed_until_commit(broker):
    topic = "txn-lso"
    create_topic(broker, topic)
    p = txn_producer(broker, "txn-lso")
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"open-{i}".encode(), partition=0)
    p.flush(10)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(10)
    # the open transaction pins the last stable offset at its first record: nothing after it is visible
    assert consume_all(broker, topic, "read_committed", idle_s=2.0) == []
    assert len(consume_all(broker, topic, "read_uncommitted", expected=11)) == 11
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso-probe", "isolation.level": "read_committed"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, high) == (0, 0)  # read_committed's "latest" is the LSO
    p.commit_transaction(30)
    values = [m.value() for m in consume_all(broker, topic, "read_committed", expected=11)]
    assert values == [f"open-{i}".encode() for i in range(10)] + [b"after"]


def test_zombie_producer_is_fenced_by_a_new_instance(broker):
    topic = "txn-zombie"
    create_topic(broker, topic)
    zombie = txn_producer(broker, "txn-zombie")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-1", partition=0)
    zombie.flush(10)
    fresh = txn_producer(broker, "txn-zombie")  # aborts the zombie's open transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh-1", partition=1)
    fresh.commit_transaction(30)
    zombie.produce(topic, value=b"zombie-2", partition=0)
    with pytest.raises(KafkaException) as info:
        zombie.flush(10)
        zombie.commit_transaction(10)
    err = info.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    values = {m.value() for m in consume_all(broker, topic, "read_committed", expected=1)}
    assert values == {b"fresh-1"}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_send_offsets_with_group_membership_eos_v2(broker, protocol):
    """subscribe() + send_offsets_to_transaction: TxnOffsetCommit carries the member's generation (classic)
    or member epoch (KIP-848). An aborted transaction's offsets are never committed; each committed
    one's are, in a group with members (they once stalled the transaction in a consumer group)."""
    src, dst, group = f"eos2-in-{protocol}", f"eos2-out-{protocol}", f"eos2-group-{protocol}"
    create_topic(broker, src)
    create_topic(broker, dst)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(60):
        plain.produce(src, value=f"in-{i}".encode(), partition=i % PARTITIONS)
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "group.protocol": protocol,
                         **({"session.timeout.ms": 6000} if protocol == "classic" else {})})
    consumer.subscribe([src])
    p = txn_producer(broker, f"eos2-app-{protocol}")
    all_partitions = [TopicPartition(src, i) for i in range(PARTITIONS)]
    done = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    try:
        while done < 60 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(20, 1.0) if m.error() is None]
            if not batch:
                continue
            if not aborted_once:
                p.begin_transaction()
                p.produce(dst, value=b"aborted", partition=0)
                p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                              consumer.consumer_group_metadata(), 30)
                p.abort_transaction(30)
                assert all(tp.offset < 0 for tp in consumer.committed(all_partitions, timeout=10))
                aborted_once = True
            p.begin_transaction()
            for m in batch:
                p.produce(dst, value=m.value().upper(), partition=m.partition())
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
                                          30)
            p.commit_transaction(30)
            done += len(batch)
        assert done == 60
        committed = consumer.committed(all_partitions, timeout=10)
        assert sum(tp.offset for tp in committed) == 60
    finally:
        consumer.close()
    out = consume_all(broker, dst, "read_committed", expected=60)
    assert sorted(m.value() for m in out) == sorted(f"IN-{i}".encode() for i in range(60))


def test_a_transaction_whose_offsets_outgrow_one_batch_completes(broker):
    """Three send_offsets_to_transaction calls of 800 kB each (200 partitions, 4,000 bytes of metadata
    apiece, each request within max.message.bytes), then a commit: the transaction ends, its offsets
    land, and the next producer of the id starts. Committed as one batch at the end they were 2.4 MB:
    refused, retried twice a second, and the id answered CONCURRENT_TRANSACTIONS until a restart."""
    topic, group, txn_id = "wide-offsets", "wide-offsets-group", "wide-offsets-app"
    create_topic(broker, topic, partitions=600)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    p = txn_producer(broker, txn_id)
    p.begin_transaction()
    p.produce(topic, value=b"one", partition=0)
    for start in (0, 200, 400):
        p.send_offsets_to_transaction([TopicPartition(topic, i, 7, metadata="m" * 4000) for i in range(start, start + 200)],
                                      consumer.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    again = txn_producer(broker, txn_id)  # init_transactions waits for the previous one to complete
    committed = consumer.committed([TopicPartition(topic, i) for i in range(600)], timeout=30)
    assert [tp.offset for tp in committed] == [7] * 600
    assert {len(tp.metadata) for tp in committed} == {4000}
    consumer.close()
    again.flush(5)
