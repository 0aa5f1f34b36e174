"""Transactions with the pure-Python clients: kafka-python's and aiokafka's transactional producers
commit and abort, with offsets sent to the transaction, and their read_committed consumers see only
committed records."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_transactions_confluent import consume_all, create_topic

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("txn-py") / "data")
    yield proc
    proc.stop()


def committed_offsets(broker, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def test_kafka_python_transactional_producer(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic = "txn-kafka-python"
    create_topic(broker, topic)
    create_topic(broker, "txn-kp-src")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-txn")
    p.init_transactions()
    for round_ in range(4):
        p.begin_transaction()
        for i in range(12):
            p.send(topic, value=f"kp-{round_}-{i}".encode(), partition=i % PARTITIONS)
        p.flush()
        p.send_offsets_to_transaction({TopicPartition("txn-kp-src", 0): OffsetAndMetadata(10 * (round_ + 1), "", -1)},
                                      "kp-group")
        if round_ % 2 == 0:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    values = sorted(m.value().decode() for m in consume_all(broker, topic, "read_committed", expected=24))
    assert values == sorted(f"kp-{r}-{i}" for r in (0, 2) for i in range(12))
    assert len(consume_all(broker, topic, "read_uncommitted", expected=48)) == 48
    # offsets sent in the committed rounds only: round 2 committed 30 (round 3's 40 was aborted)
    assert committed_offsets(broker, "kp-group", "txn-kp-src") == {0: 30}
    # kafka-python's own read_committed consumer agrees
    c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=3000, group_id=None)
    assert sorted(m.value.decode() for m in c) == values
    c.close()


def test_aiokafka_transactional_producer(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = "txn-aiokafka"
    create_topic(broker, topic)
    create_topic(broker, "txn-aio-src")

    async def run() -> list[str]:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-txn")
        await p.start()
        try:
            for round_ in range(4):
                await p.begin_transaction()
                for i in range(12):
                    await p.send_and_wait(topic, value=f"aio-{round_}-{i}".encode(), partition=i % PARTITIONS)
                await p.send_offsets_to_transaction({TopicPartition("txn-aio-src", 1): 5 * (round_ + 1)}, "aio-group")
                if round_ == 3:
                    await p.abort_transaction()
                else:
                    await p.commit_transaction()
            # a transaction aborted by an exception inside the context manager
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send_and_wait(topic, value=b"aio-doomed", partition=0)
                    raise RuntimeError("abort me")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest")
        await c.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 36 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                got.extend(m.value.decode() for msgs in batch.values() for m in msgs)
            extra = await c.getmany(timeout_ms=1000)
            got.extend(m.value.decode() for msgs in extra.values() for m in msgs)
        finally:
            await c.stop()
        return got

    got = asyncio.run(run())
    assert sorted(got) == sorted(f"aio-{r}-{i}" for r in (0, 1, 2) for i in range(12))
    assert committed_offsets(broker, "aio-group", "txn-aio-src") == {1: 15}  # round 3's 20 was aborted
