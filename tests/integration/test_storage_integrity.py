"""Damage to the small files storage writes beside the segments, against a real broker process (issue
38): producer snapshots, partition checkpoints, topic records, the producer-id block, and a partition
directory that disappears. Each is found (an error event naming the file), contained (rebuilt from the
log, treated as missing, or the topic fenced), never silently trusted and never a crash loop; files an
older kbroker wrote (no checksum) still load.

The damage keeps the files valid JSON where a flipped bit in a digit would: today's broker read such a
file and trusted it (an aborted transaction's records came back to read_committed consumers, a topic
lost a partition), and one that no longer parses stopped it from starting at all.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(240)


def create(broker: BrokerProcess, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, n, 1) for name, n in topics]).values():
        future.result(30)


def produce(broker: BrokerProcess, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


def read_all(broker: BrokerProcess, topic: str, isolation: str = "read_uncommitted", partition: int = 0) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "no end of partition within 10 s"
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
                return out
            out.append(msg.value())
    finally:
        consumer.close()


def rewrite_json(path: Path, change) -> None:
    """Change what a file says and leave its checksum as it was: the damage a flipped bit does."""
    body = json.loads(path.read_text())
    change(body)
    path.write_text(json.dumps(body))


def test_a_damaged_producer_snapshot_is_rebuilt_from_the_log(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, ("txn", 1))
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "snap"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("txn", b"aborted", partition=0)
        producer.flush(30)
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.produce("txn", b"committed", partition=0)
        producer.commit_transaction(30)
        assert read_all(broker, "txn", "read_committed") == [b"committed"]
        broker.stop()  # a clean stop writes the partition's producer snapshot
        snapshot = broker.data_dir / "txn-0" / "producer_state.json"
        aborted = json.loads(snapshot.read_text())["aborted"]
        assert aborted, "the snapshot lists the aborted transaction"

        def forget_the_abort(body: dict) -> None:
            body["aborted"] = [[pid + 1, first, last] for pid, first, last in body["aborted"]]

        rewrite_json(snapshot, forget_the_abort)
        broker.start()
        [event] = broker.events("producer_snapshot_damaged", start=2)
        assert event["level"] == "error" and event["topic"] == "txn" and "checksum" in event["error"]
        # Rebuilt from the log, whose markers say what was aborted: read_committed still drops it.
        assert read_all(broker, "txn", "read_committed") == [b"committed"]


def test_a_damaged_checkpoint_is_reported_and_treated_as_missing(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, ("cp", 1))
        produce(broker, "cp", [b"a", b"b", b"c"])
        broker.stop()
        checkpoint = broker.data_dir / "cp-0" / "checkpoint.json"
        rewrite_json(checkpoint, lambda body: body.update(log_start_offset=body["log_start_offset"] + 2))
        broker.start()
        [event] = broker.events("checkpoint_damaged", start=2)
        assert event["topic"] == "cp" and "checksum" in event["error"]
        assert read_all(broker, "cp") == [b"a", b"b", b"c"]  # the log start falls back to the first segment
        broker.stop()
        checkpoint.write_bytes(b"{not json")  # today: silently ignored
        broker.start()
        assert broker.events("checkpoint_damaged", start=3)
        assert read_all(broker, "cp") == [b"a", b"b", b"c"]


DAMAGED_RECORDS = {
    "truncated": lambda raw: raw[:40],
    "empty": lambda raw: b"",
    "wrong-name": lambda raw: raw.replace(b'"fenced"', b'"other"'),
    "bad-partitions": lambda raw: raw.replace(b'"partitions": 3', b'"partitions": -1'),
}


@pytest.mark.parametrize("damage", ["flipped", *DAMAGED_RECORDS])
def test_a_damaged_topic_record_fences_that_topic_and_nothing_else(tmp_path, damage: str) -> None:
    """Before: a record that no longer parsed (or named another topic, or a count below 1) refused every
    start with one line; one that parsed was trusted. Now only that topic is fenced."""
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, ("fenced", 3), ("fine", 1))
        produce(broker, "fenced", [b"kept"], partition=2)
        produce(broker, "fine", [b"x"])
        broker.stop()
        record = broker.data_dir / "topics" / "fenced.json"
        if damage == "flipped":  # valid JSON saying 2 partitions: before, partition 2 silently vanished
            rewrite_json(record, lambda body: body.update(partitions=2))
        else:
            record.write_bytes(DAMAGED_RECORDS[damage](record.read_bytes()))
        broker.start()
        [event] = broker.events("topic_record_damaged", start=2)
        assert event["topic"] == "fenced" and event["level"] == "error"
        wire = Wire(broker.bootstrap)
        metadata = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="fenced")],
                                                    allow_auto_topic_creation=False))
        partitions = metadata.topics[0].partitions
        assert len(partitions) == 3 and {p.error_code for p in partitions} == {ErrorCode.LEADER_NOT_AVAILABLE}
        batch = rb.encode_batch([rb.Record(0, 1, None, b"refused")])
        answer = wire.call(0, 9, ProduceRequest(None, -1, 5000, [TopicProduceData("fenced", partition_data=[
            PartitionProduceData(2, batch)])]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert (broker.data_dir / "fenced-2").is_dir()  # its data is left for an operator
        produce(broker, "fine", [b"y"])
        assert read_all(broker, "fine") == [b"x", b"y"]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["fenced"])["fenced"].result(30)  # the operator's way out
        assert not (broker.data_dir / "fenced-2").exists()


def test_a_vanished_partition_directory_is_an_error_naming_the_offsets_lost(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, ("gone", 1))
        produce(broker, "gone", [b"%d" % i for i in range(40)])
        broker.stop()
        import shutil

        shutil.rmtree(broker.data_dir / "gone-0")
        broker.start()
        [event] = broker.events("partition_directory_missing", start=2)
        assert event["level"] == "error" and event["topic"] == "gone" and event["lost_offsets_below"] == 40
        # The partition goes on from the old end: no offset a consumer saw is handed out again.
        produce(broker, "gone", [b"after"])
        assert read_all(broker, "gone") == [b"after"]
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo"})
        low, high = consumer.get_watermark_offsets(TopicPartition("gone", 0), timeout=10)
        consumer.close()
        assert (low, high) == (40, 41)


def test_a_damaged_producer_id_block_never_hands_out_an_id_again(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        wire = Wire(broker.bootstrap)
        first = wire.call(22, 4, InitProducerIdRequest(None, -1, -1, -1))
        assert first.error_code == ErrorCode.NONE
        broker.stop()
        ids = broker.data_dir / "producer_ids.json"
        rewrite_json(ids, lambda body: body.update(next_block_start=0))  # would hand out `first` again
        broker.start()
        again = Wire(broker.bootstrap).call(22, 4, InitProducerIdRequest(None, -1, -1, -1))
        assert again.error_code == ErrorCode.NONE and again.producer_id > first.producer_id
        [event] = broker.events("producer_ids_file_damaged", start=2)
        assert event["next_producer_id"] > first.producer_id


def test_files_an_older_kbroker_wrote_still_load_and_gain_a_checksum(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, ("old", 1))
        produce(broker, "old", [b"a", b"b"])
        broker.stop()
        files = [broker.data_dir / "topics" / "old.json", broker.data_dir / "old-0" / "checkpoint.json",
                 broker.data_dir / "old-0" / "producer_state.json", broker.data_dir / "producer_ids.json"]
        for file in files:  # as a kbroker before checksums wrote them
            rewrite_json(file, lambda body: body.pop("crc32c"))
        broker.start()
        for event in ("topic_record_damaged", "checkpoint_damaged", "producer_snapshot_damaged",
                      "producer_ids_file_damaged"):
            assert not broker.events(event), event
        assert read_all(broker, "old") == [b"a", b"b"]
        produce(broker, "old", [b"c"])
        broker.stop()
        assert all("crc32c" in json.loads(file.read_text()) for file in files)
