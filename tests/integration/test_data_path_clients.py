"""Real clients against a real broker process: keyed messages over 6 partitions with every codec each
client can use here, consumed back byte-identical and in per-partition order, before and after a
restart.

Counts: CONFLUENT_MESSAGES per confluent-kafka codec and PURE_PYTHON_MESSAGES per kafka-python /
aiokafka codec, both the issue's figure of 100,000 (about a minute for the whole file on 2 cores,
most of it in kafka-python's per-record Python; lower PURE_PYTHON_MESSAGES if that grows).

Codecs: kafka-python 3.x only has gzip built in; snappy needs `python-snappy`, lz4 needs `lz4` and
zstd needs `zstandard`, which the test extra installs (a combination whose package is missing is
skipped with that reason). aiokafka uses cramjam for all four.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFLUENT_MESSAGES = 100_000
PURE_PYTHON_MESSAGES = 100_000
PARTITIONS = 6
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

# topic -> {partition: {offset: (key, value)}}, filled by the produce tests, checked by the consume tests
PRODUCED: dict[str, dict[int, dict[int, tuple[bytes, bytes]]]] = {}


def payload(client: str, codec: str, i: int) -> tuple[bytes, bytes]:
    key = b"key-%d" % (i % 997)
    # Compressible but not constant, with a few bytes of every value: codecs get something to do.
    value = b"%s|%s|%08d|" % (client.encode(), codec.encode(), i) + bytes((i * 7 + j) % 251 for j in range(24)) * 3
    return key, value


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("clients") / "data")
    yield proc
    proc.stop()


def create_topic(broker: BrokerProcess, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=10).values():
        future.result(timeout=15)


def record(topic: str, partition: int, offset: int, key: bytes, value: bytes) -> None:
    per = PRODUCED.setdefault(topic, {})
    per.setdefault(partition, {})[offset] = (key, value)


def check_order(topic: str) -> None:
    """Within a partition, offsets follow production order (the index is inside the value)."""
    for partition, by_offset in PRODUCED[topic].items():
        indexes = [int(by_offset[o][1].split(b"|")[2]) for o in sorted(by_offset)]
        assert indexes == sorted(indexes), f"{topic}-{partition} out of production order"
        assert sorted(by_offset) == list(range(len(by_offset))), f"{topic}-{partition} offsets have gaps"


def consume_all_confluent(broker: BrokerProcess, topic: str, timeout: float = 60.0) -> dict[int, list]:
    expected = {p: len(v) for p, v in PRODUCED[topic].items()}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verify-" + topic,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list] = defaultdict(list)
    deadline = time.monotonic() + timeout
    try:
        while any(len(got[p]) < n for p, n in expected.items()) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def assert_identical(topic: str, got: dict[int, list]) -> None:
    produced = PRODUCED[topic]
    for partition, by_offset in produced.items():
        want = [(o, *by_offset[o]) for o in sorted(by_offset)]
        have = got.get(partition, [])
        assert len(have) == len(want), f"{topic}-{partition}: {len(have)} of {len(want)} consumed"
        assert have == want, f"{topic}-{partition}: consumed records differ from produced ones"
    assert sum(len(v) for v in got.values()) == sum(len(v) for v in produced.values())


# --- confluent-kafka (librdkafka) ---------------------------------------------------------------------


def produce_confluent(broker: BrokerProcess, topic: str, codec: str, count: int, **extra) -> None:
    create_topic(broker, topic)
    errors: list = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            record(topic, msg.partition(), msg.offset(), msg.key(), msg.value())

    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5,
                         "partitioner": "murmur2_random", **extra})
    for i in range(count):
        key, value = payload("confluent", codec, i)
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert errors == []
    assert sum(len(v) for v in PRODUCED[topic].values()) == count
    assert len(PRODUCED[topic]) == PARTITIONS  # the keys spread over every partition
    check_order(topic)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produce_consume(broker, codec):
    topic = f"confluent-{codec}"
    produce_confluent(broker, topic, codec, CONFLUENT_MESSAGES)
    assert_identical(topic, consume_all_confluent(broker, topic))


def test_confluent_idempotent_produce_consume(broker):
    topic = "confluent-idempotent"
    produce_confluent(broker, topic, "lz4", CONFLUENT_MESSAGES, **{"enable.idempotence": True, "acks": "all"})
    assert_identical(topic, consume_all_confluent(broker, topic))
    # The broker handed out a producer id and saw its sequences: every batch came with one.
    assert broker.running


# --- kafka-python -------------------------------------------------------------------------------------


def kafka_python_codec_available(codec: str) -> str | None:
    import kafka.codec as kc

    available = {"none": True, "gzip": kc.has_gzip(), "snappy": kc.has_snappy(), "lz4": kc.has_lz4(),
                 "zstd": kc.has_zstd()}
    if available[codec]:
        return None
    package = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}[codec]
    return f"kafka-python needs the '{package}' package for {codec}, and it is not installed"


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_consume(broker, codec):
    reason = kafka_python_codec_available(codec)
    if reason:
        pytest.skip(reason)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KTP

    topic = f"kafka-python-{codec}"
    create_topic(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=5, batch_size=64 * 1024, acks=1)
    futures = []
    for i in range(PURE_PYTHON_MESSAGES):
        key, value = payload("kafka-python", codec, i)
        futures.append((key, value, producer.send(topic, key=key, value=value)))
    producer.flush(60)
    for key, value, future in futures:
        meta = future.get(timeout=30)
        record(topic, meta.partition, meta.offset, key, value)
    producer.close()
    check_order(topic)
    assert len(PRODUCED[topic]) == PARTITIONS

    # kafka-python's consumer uses incremental fetch sessions (KIP-227) when the broker offers them.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                             consumer_timeout_ms=3000)
    consumer.assign([KTP(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got: dict[int, list] = defaultdict(list)
    deadline = time.monotonic() + 60
    while sum(len(v) for v in got.values()) < PURE_PYTHON_MESSAGES and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=500, max_records=5000).items():
            got[tp.partition].extend((m.offset, m.key, m.value) for m in msgs)
    consumer.close()
    assert_identical(topic, got)


# --- aiokafka -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_produce_consume(broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    topic = f"aiokafka-{codec}"
    create_topic(broker, topic)

    async def run() -> dict[int, list]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5, max_batch_size=64 * 1024)
        await producer.start()
        try:
            pending = []
            for i in range(PURE_PYTHON_MESSAGES):
                key, value = payload("aiokafka", codec, i)
                pending.append((key, value, await producer.send(topic, key=key, value=value)))
            await producer.flush()
            for key, value, fut in pending:
                meta = await fut
                record(topic, meta.partition, meta.offset, key, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                    fetch_max_wait_ms=100, auto_offset_reset="earliest")
        await consumer.start()
        got: dict[int, list] = defaultdict(list)
        try:
            consumer.assign([ATP(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while sum(len(v) for v in got.values()) < PURE_PYTHON_MESSAGES and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500, max_records=5000)
                for tp, msgs in batch.items():
                    got[tp.partition].extend((m.offset, m.key, m.value) for m in msgs)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    check_order(topic)
    assert len(PRODUCED[topic]) == PARTITIONS
    assert_identical(topic, got)


# --- after a restart ----------------------------------------------------------------------------------


def test_everything_survives_a_clean_restart(broker):
    assert PRODUCED, "the produce tests run first"
    broker.restart()
    assert broker.events("logs_loaded", start=broker.starts)[0]["clean_shutdown"] is True
    for topic in sorted(PRODUCED):
        assert_identical(topic, consume_all_confluent(broker, topic))


def test_idempotent_producer_after_restart_gets_a_new_id_and_keeps_order(broker):
    """Producer ids are never reused: a new idempotent producer after the restart appends normally."""
    topic = "confluent-idempotent"
    errors: list = []
    before = {p: len(v) for p, v in PRODUCED[topic].items()}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(CONFLUENT_MESSAGES, CONFLUENT_MESSAGES + 2000):
        key, value = payload("confluent", "lz4", i)
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda e, m: errors.append(e) if e else record(topic, m.partition(), m.offset(),
                                                                                   m.key(), m.value()))
    assert producer.flush(30) == 0
    assert errors == []
    assert sum(len(v) for v in PRODUCED[topic].values()) == sum(before.values()) + 2000
    check_order(topic)
    assert_identical(topic, consume_all_confluent(broker, topic))
