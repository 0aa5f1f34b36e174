"""`kbroker-wire`: the same views read over the Kafka protocol from a running broker, batch and stream."""

from __future__ import annotations

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kbroker.tests.integration.broker_process import BrokerProcess  # noqa: E402

pytestmark = pytest.mark.slow


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("w", p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def _key(df):
    return sorted((r.group_id, r.topic, r.partition, r.committed_offset) for r in
                  df.where("record_type = 'offset_commit'").collect())


def test_wire_reader_matches_the_files_and_follows_new_commits(spark, tmp_path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data, "--offsets-topic-num-partitions", "4") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("w", 2, 1)])["w"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
        for i in range(50):
            producer.produce("w", value=b"%d" % i, key=b"k", partition=i % 2)
        assert producer.flush(30) == 0
        _commit(broker.bootstrap, "wg-1", {0: 5, 1: 6})
        _commit(broker.bootstrap, "wg-2", {0: 25})

        wire = spark.read.format("kbroker-wire").option("bootstrap", broker.bootstrap)
        offsets = wire.load()
        assert offsets.rdd.getNumPartitions() >= 1  # one per non-empty __consumer_offsets partition
        records = wire.option("topic", "w").load()
        assert records.rdd.getNumPartitions() == 2
        assert sorted((r.partition, int(r.value)) for r in records.collect()) == sorted((i % 2, i) for i in range(50))
        wire_commits = _key(offsets)
        assert wire_commits == [("wg-1", "w", 0, 5), ("wg-1", "w", 1, 6), ("wg-2", "w", 0, 25)]

        # a stream: the first micro-batch has everything so far, the next one only the new commit
        stream = (spark.readStream.format("kbroker-wire").option("bootstrap", broker.bootstrap).load()
                  .where("record_type = 'offset_commit'")
                  .writeStream.format("memory").queryName("wire_commits").outputMode("append")
                  .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        try:
            stream.processAllAvailable()
            assert _key(spark.table("wire_commits")) == wire_commits
            _commit(broker.bootstrap, "wg-2", {0: 30})
            stream.processAllAvailable()
            assert _key(spark.table("wire_commits")) == sorted(wire_commits + [("wg-2", "w", 0, 30)])
        finally:
            stream.stop()
    files = spark.read.format("kbroker-log").option("view", "consumer_offsets").load(str(data))
    assert _key(files) == sorted(wire_commits + [("wg-2", "w", 0, 30)])
