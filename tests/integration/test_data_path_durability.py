"""Durability and timing on a real broker process: kill -9 under acks=all load, acks=0, long polling,
ListOffsets exactness, and the edges of Produce that clients never show (v0-2, internal topics).

Some checks speak the wire protocol directly (kbroker's own codec over a socket) where a client hides
what is being tested, e.g. exactly when a Fetch returns.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("durability") / "data")
    yield proc
    proc.stop()


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(timeout=15)


def consume_all(broker: BrokerProcess, topic: str, partitions: int, expected_total: int, timeout: float = 30.0):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, dict[int, tuple]] = defaultdict(dict)
    deadline = time.monotonic() + timeout
    idle_until = None
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(10_000, 0.3)
            for msg in msgs:
                assert msg.error() is None, msg.error()
                got[msg.partition()][msg.offset()] = (msg.key(), msg.value())
            total = sum(len(v) for v in got.values())
            if total >= expected_total and not msgs:
                idle_until = idle_until or time.monotonic() + 0.5  # a little longer, to see duplicates too
                if time.monotonic() > idle_until:
                    break
    finally:
        consumer.close()
    return got


# --- kill -9 under acks=all ---------------------------------------------------------------------------


def test_kill_9_under_acks_all_load_loses_no_acknowledged_message(broker):
    topic = "kill9"
    create_topic(broker, topic, partitions=3)
    acked: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    errors: list = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 60_000, "reconnect.backoff.max.ms": 200})
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < 1.5 or len(acked) < 2000:
        producer.produce(topic, key=b"k%d" % (sent % 50), value=b"v%08d" % sent, on_delivery=delivered)
        sent += 1
        if sent % 200 == 0:
            producer.poll(0.002)
    acked_before_kill = len(acked)
    broker.kill()  # SIGKILL with produce requests in flight
    for _ in range(2000):  # keep the producer busy while the broker is down
        producer.produce(topic, key=b"k%d" % (sent % 50), value=b"v%08d" % sent, on_delivery=delivered)
        sent += 1
    broker.start()
    assert producer.flush(60) == 0
    assert errors == []
    assert acked_before_kill > 0
    assert broker.events("logs_loaded", start=broker.starts)[0]["clean_shutdown"] is False

    got = consume_all(broker, topic, 3, len(acked))
    for (partition, offset), record in acked.items():
        assert got[partition].get(offset) == record, f"acknowledged record lost at {topic}-{partition}@{offset}"
    # Idempotence across the crash: librdkafka retried what was in flight; nothing got written twice.
    values = [v for per in got.values() for _, v in per.values()]
    assert len(values) == len(set(values)) == sent


# --- acks=0 --------------------------------------------------------------------------------------------


def test_acks_0_produce(broker):
    topic = "acks0"
    create_topic(broker, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 0, "linger.ms": 5})
    for i in range(5000):
        producer.produce(topic, key=b"k%d" % i, value=b"acks0-%d" % i)
    assert producer.flush(30) == 0
    got = consume_all(broker, topic, 2, 5000)
    values = sorted(v for per in got.values() for _, v in per.values())
    assert values == sorted(b"acks0-%d" % i for i in range(5000))


def test_acks_0_failure_closes_the_connection(broker):
    """No response for acks=0; a failed partition (here: an internal topic) closes the connection."""
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    wire = Wire(broker.bootstrap)
    try:
        ok = ProduceRequest(None, 0, 1000, [TopicProduceData("acks0", partition_data=[PartitionProduceData(0, batch)])])
        wire.send(0, 9, ok)
        bad = ProduceRequest(None, 0, 1000, [TopicProduceData("__consumer_offsets", partition_data=[PartitionProduceData(0, batch)])])
        wire.send(0, 9, bad)
        assert wire.closed_by_peer()
    finally:
        wire.close()


def test_produce_errors_on_the_wire(broker):
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    wire = Wire(broker.bootstrap)
    try:
        def produce(topic, records, acks=-1, version=9, partition=0):
            req = ProduceRequest(None, acks, 5000, [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, records)])])
            return wire.call(0, version, req).responses[0].partition_responses[0]

        assert produce("acks0", batch).error_code == 0
        assert produce("__consumer_offsets", batch).error_code == 17  # INVALID_TOPIC_EXCEPTION
        assert produce("acks0", batch, acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
        assert produce("acks0", batch, partition=7).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        corrupt = bytearray(batch)
        corrupt[-1] ^= 0xFF
        assert produce("acks0", bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE
        zstd = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")], compression=4)
        assert produce("acks0", zstd, version=6).error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE
        assert produce("acks0", zstd, version=7).error_code == 0
        big = encode_batch([Record(0, int(time.time() * 1000), b"k", b"x" * 1_100_000)])
        assert produce("acks0", big).error_code == 10  # MESSAGE_TOO_LARGE
        txn = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")], producer_id=5, producer_epoch=0,
                           base_sequence=0, is_transactional=True)
        assert produce("acks0", txn).error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # Kafka's Produce never creates a topic (a client's Metadata request does): differential wire check
        # "Produce vN: unknown topic"
        assert produce("never-created-by-produce", batch).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        # Produce v0-2 carry message format v0/v1 (Kafka 3.9); a record batch there is an invalid record.
        assert produce("acks0", batch, version=2).error_code == 87  # INVALID_RECORD
    finally:
        wire.close()


def test_idempotent_sequence_rules_on_the_wire(broker):
    topic = "idem-wire"
    create_topic(broker, topic)
    wire = Wire(broker.bootstrap)
    try:
        from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest

        init = wire.call(22, 4, InitProducerIdRequest(None, 60000, -1, -1))
        assert (init.error_code, init.producer_epoch) == (0, 0)
        pid = init.producer_id
        second = wire.call(22, 4, InitProducerIdRequest(None, 60000, -1, -1))
        assert second.producer_id != pid
        txn_init = wire.call(22, 4, InitProducerIdRequest("txn", 60000, -1, -1))
        assert (txn_init.error_code, txn_init.producer_epoch) == (0, 0) and txn_init.producer_id not in (pid, second.producer_id)

        def send(seq, count=2, epoch=0):
            now = int(time.time() * 1000)
            records = [Record(i, now, b"k", b"seq-%d" % (seq + i)) for i in range(count)]
            batch = encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            req = ProduceRequest(None, -1, 5000, [TopicProduceData(topic, partition_data=[PartitionProduceData(0, batch)])])
            p = wire.call(0, 9, req).responses[0].partition_responses[0]
            return p.error_code, p.base_offset

        assert send(0) == (0, 0)
        assert send(2) == (0, 2)
        assert send(0) == (0, 0)  # retry of an earlier batch: its original offset, nothing appended
        assert send(5)[0] == 45  # gap: OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(4) == (0, 4)
        assert send(3, epoch=1)[0] == 45  # a new epoch must start at 0
        assert send(0, epoch=1) == (0, 6)
        assert send(6, epoch=0)[0] == 47  # INVALID_PRODUCER_EPOCH
        lo = wire.call(2, 7, ListOffsetsRequest(-1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, -1)])]))
        assert lo.topics[0].partitions[0].offset == 8
    finally:
        wire.close()


# --- long polling -------------------------------------------------------------------------------------


def fetch_request(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1,
                        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                                                     partition_max_bytes=1 << 20)])])


def test_long_poll_returns_as_soon_as_a_message_is_produced(broker):
    topic = "longpoll"
    create_topic(broker, topic)
    wire = Wire(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    try:
        producer.produce(topic, value=b"warm-up")  # connection and metadata ready before timing anything
        producer.flush(10)
        produced_at: list[float] = []

        def produce_later():
            time.sleep(0.7)
            produced_at.append(time.monotonic())
            producer.produce(topic, value=b"wake-up")
            producer.flush(10)

        thread = threading.Thread(target=produce_later)
        started = time.monotonic()
        wire.send(1, 12, fetch_request(topic, 1, max_wait_ms=30_000))
        thread.start()
        response = wire.receive(1, 12)
        finished = time.monotonic()
        thread.join()
        part = response.responses[0].partitions[0]
        assert part.error_code == 0 and part.records and b"wake-up" in part.records
        assert finished >= produced_at[0], "the fetch answered before anything was produced"
        # woken by the produce, not by its 30 s max wait (generous bounds, not a speed check: CI is loaded)
        assert finished - started < 15.0, f"fetch took {finished - started:.2f}s: it waited for max_wait"
        assert finished - produced_at[0] < 10.0

        # With nothing to return, the fetch answers at max_wait, empty.
        started = time.monotonic()
        empty = wire.call(1, 12, fetch_request(topic, 2, max_wait_ms=400))
        waited = time.monotonic() - started
        assert 0.35 <= waited < 10.0  # not before max_wait; the upper bound only catches a hang
        assert not empty.responses[0].partitions[0].records
        assert empty.responses[0].partitions[0].high_watermark == 2
    finally:
        wire.close()


def test_long_poll_through_a_real_consumer(broker):
    topic = "longpoll-client"
    create_topic(broker, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lp", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    try:
        assert consumer.poll(1.5) is None  # the consumer is now parked in a long poll
        sent = time.monotonic()
        producer.produce(topic, value=b"hello")
        producer.flush(10)
        msg = consumer.poll(12.0)
        received = time.monotonic()
        assert msg is not None and msg.error() is None and msg.value() == b"hello"
        # Parked at most 1.5 s before `sent`, a fetch that waited out its 10 s would answer 8.5 s or
        # more after it: under 7 s means the produce woke it (with room for a loaded CI machine).
        assert received - sent < 7.0, "the parked fetch was not woken by the produce"
    finally:
        consumer.close()


def test_fetch_errors_and_min_one_batch(broker):
    topic = "fetch-edges"
    create_topic(broker, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "compression.type": "none"})
    producer.produce(topic, value=b"x" * 5000)
    producer.flush(10)
    wire = Wire(broker.bootstrap)
    try:
        out_of_range = wire.call(1, 12, fetch_request(topic, 99, max_wait_ms=5000)).responses[0].partitions[0]
        assert out_of_range.error_code == 1  # OFFSET_OUT_OF_RANGE, at once despite max_wait
        req = fetch_request(topic, 0, max_wait_ms=0)
        req.topics[0].partitions[0].partition_max_bytes = 10
        req.max_bytes = 10
        part = wire.call(1, 12, req).responses[0].partitions[0]
        assert part.error_code == 0 and len(part.records) > 5000  # one whole batch despite the limits
        unknown = wire.call(1, 12, fetch_request("no-such-topic", 0, 0)).responses[0].partitions[0]
        assert unknown.error_code == 3
        # v13+: topics by id; an unknown id is UNKNOWN_TOPIC_ID
        import uuid

        req13 = FetchRequest(max_wait_ms=0, min_bytes=1, session_id=0, session_epoch=-1,
                             topics=[FetchTopic(topic_id=uuid.uuid4(), partitions=[FetchPartition(partition=0)])])
        assert wire.call(1, 13, req13).responses[0].partitions[0].error_code == 100
    finally:
        wire.close()


# --- ListOffsets --------------------------------------------------------------------------------------


def test_list_offsets_exactness_with_kafka_python(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KTP

    topic = "list-offsets"
    create_topic(broker, topic)
    base = int(time.time() * 1000) - 100_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for i in range(10):
        producer.send(topic, value=b"m%d" % i, partition=0, timestamp_ms=base + 1000 * i).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KTP(topic, 0)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
        found = consumer.offsets_for_times({tp: base + 2500})[tp]
        assert (found.offset, found.timestamp) == (3, base + 3000)
        exact = consumer.offsets_for_times({tp: base + 5000})[tp]
        assert (exact.offset, exact.timestamp) == (5, base + 5000)
        assert consumer.offsets_for_times({tp: base})[tp].offset == 0
        assert consumer.offsets_for_times({tp: base + 10_000})[tp] is None
    finally:
        consumer.close()
    wire = Wire(broker.bootstrap)
    try:
        def lo(ts, version=9):
            req = ListOffsetsRequest(-1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, ts)])])
            p = wire.call(2, version, req).topics[0].partitions[0]
            return p.error_code, p.offset, p.timestamp

        assert lo(-3) == (0, 9, base + 9000)  # max timestamp
        assert lo(-4) == (0, 0, -1)  # earliest local
        assert lo(-5) == (0, -1, -1)  # latest tiered: no tiered storage
        assert lo(-1) == (0, 10, -1)
    finally:
        wire.close()


def test_incremental_fetch_session_on_the_wire(broker):
    topic = "sessions"
    create_topic(broker, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"first", partition=0)
    producer.flush(10)
    wire = Wire(broker.bootstrap)
    try:
        def fetch(session_id, epoch, offsets, forgotten=()):
            from kbroker.protocol.messages.fetch_request import ForgottenTopic

            req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id,
                               session_epoch=epoch,
                               topics=[FetchTopic(topic=topic, partitions=[
                                   FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                                   for p, o in offsets.items()])] if offsets else [],
                               forgotten_topics_data=[ForgottenTopic(topic=topic, partitions=list(forgotten))] if forgotten else [])
            return wire.call(1, 12, req)

        full = fetch(0, 0, {0: 0, 1: 0})
        sid = full.session_id
        assert sid != 0 and full.error_code == 0
        assert sorted(p.partition_index for t in full.responses for p in t.partitions) == [0, 1]
        quiet = fetch(sid, 1, {0: 1})  # the client moved past "first"
        assert quiet.session_id == sid and quiet.responses == []
        producer.produce(topic, value=b"second", partition=1)
        producer.flush(10)
        changed = fetch(sid, 2, {})
        parts = [p for t in changed.responses for p in t.partitions]
        assert [p.partition_index for p in parts] == [1] and b"second" in parts[0].records
        assert fetch(sid, 2, {}).error_code == 71  # INVALID_FETCH_SESSION_EPOCH
        assert fetch(sid + 1, 1, {}).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
        assert fetch(sid, 3, {}, forgotten=[1]).responses == []
        closed = fetch(sid, -1, {0: 0})
        assert closed.session_id == 0 and closed.responses
        assert fetch(sid, 4, {}).error_code == 70
    finally:
        wire.close()
