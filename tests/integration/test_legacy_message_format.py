"""Produce v0-v2 and Fetch v0-v3 (message formats v0 and v1, Kafka 3.9) with real clients:
kafka-python pinned to old broker versions writes and reads them; records cross between old and new
clients in both directions, because the log holds record batches and converts at the edges."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.errors import ErrorCode
from kbroker.tests.integration.broker_process import BrokerProcess

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")

TIMEOUT = 15


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("legacy-format") / "data", "--num-partitions", "1",
                         "--create-topics", "corrupt-v1:1")  # raw Produce names it (Produce creates no topic)
    yield proc
    proc.stop()


def old_produce(broker, topic: str, api_version, codec=None, count: int = 5) -> None:
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version, compression_type=codec)
    for i in range(count):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i).get(timeout=TIMEOUT)
    p.close()


def old_consume(broker, topic: str, api_version, group: str | None = None):
    c = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, api_version=api_version,
                            auto_offset_reset="earliest", consumer_timeout_ms=4000, group_id=group)
    try:
        return [(m.offset, m.key, m.value, m.timestamp) for m in c]
    finally:
        c.close()


def new_consume(broker, topic: str, count: int):
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"new-{topic}",
                                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + TIMEOUT
    while len(out) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.offset(), m.key(), m.value(), m.timestamp()))
    c.close()
    return out


@pytest.mark.parametrize(("api_version", "codec"), [((0, 8, 2), None), ((0, 9), None), ((0, 9), "gzip"),
                                                    ((0, 10, 1), None), ((0, 10, 1), "gzip")])
def test_old_kafka_python_round_trip(broker, api_version, codec):
    topic = f"old-{'-'.join(map(str, api_version))}-{codec}"
    old_produce(broker, topic, api_version, codec)
    group = None if api_version < (0, 9) else f"group-{topic}"
    got = old_consume(broker, topic, api_version, group)
    assert [(o, k, v) for o, k, v, _ in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
    if api_version >= (0, 10):
        assert all(ts is not None and ts > 0 for *_, ts in got)  # message format v1 keeps timestamps
    else:
        assert all(ts is None for *_, ts in got)  # v0 messages have none
    # Up-converted on append: a record-batch client reads the same records.
    new = new_consume(broker, topic, 5)
    assert [(o, k, v) for o, k, v, _ in new] == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
    if api_version < (0, 10):
        assert all(ts[0] == confluent_kafka.TIMESTAMP_NOT_AVAILABLE or ts[1] == -1 for *_, ts in new)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_batches_from_a_new_client_are_down_converted_for_old_fetches(broker, codec):
    topic = f"new-to-old-{codec}"
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 50})
    for i in range(6):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=1700000000000 + i)
    assert p.flush(TIMEOUT) == 0
    for api_version in ((0, 9), (0, 10, 1)):
        got = old_consume(broker, topic, api_version)
        assert [(o, k, v) for o, k, v, _ in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(6)]
        if api_version >= (0, 10):
            assert [ts for *_, ts in got] == [1700000000000 + i for i in range(6)]


def test_zstd_batches_are_refused_to_fetches_below_v10(broker):
    from kbroker.protocol.messages import fetch_request as fr
    from kbroker.tests.integration.wire import Wire

    topic = "zstd-for-old"
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    p.produce(topic, value=b"z" * 10000)  # compressible, or librdkafka sends it uncompressed
    assert p.flush(TIMEOUT) == 0
    wire = Wire(broker.bootstrap)
    for version, expected in ((3, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), (9, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
                              (10, ErrorCode.NONE)):
        r = wire.call(1, version, fr.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
            fr.FetchTopic(topic=topic, partitions=[fr.FetchPartition(partition=0, fetch_offset=0,
                                                                     partition_max_bytes=1 << 20)])]))
        assert r.responses[0].partitions[0].error_code == expected, version


def test_corrupt_v1_message_is_refused(broker):
    import struct
    import zlib

    from kbroker.protocol.messages import produce_request as pr
    from kbroker.tests.integration.wire import Wire

    rest = struct.pack(">bbq", 1, 0, 1700000000000) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"x"
    good = struct.pack(">I", zlib.crc32(rest)) + rest
    bad = struct.pack(">I", zlib.crc32(rest) ^ 1) + rest
    wire = Wire(broker.bootstrap)
    for message, expected in ((bad, ErrorCode.CORRUPT_MESSAGE), (good, ErrorCode.NONE)):
        entry = struct.pack(">qi", 0, len(message)) + message
        r = wire.call(0, 2, pr.ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            pr.TopicProduceData(name="corrupt-v1", partition_data=[pr.PartitionProduceData(index=0, records=entry)])]))
        assert r.responses[0].partition_responses[0].error_code == expected
