"""What a transaction's offsets leave in `__consumer_offsets`, in kbroker's log and in Apache Kafka 4.4's.

The same consume-transform-produce steps run against both brokers (one committed transaction, one
aborted, with confluent-kafka's send_offsets_to_transaction), and the group's `__consumer_offsets`
partition is read back from each broker's segment files. Kafka writes each TxnOffsetCommit once, as a
transactional batch of OffsetCommit records, and ends it with a COMMIT or ABORT marker; its commit
marker makes the offsets visible in memory (OffsetMetadataManager.replayEndTransactionMarker) and
nothing else is written. kbroker used to write a committed transaction's offsets a second time, as a
plain batch after the marker; the two logs must now hold the same sequence.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kbroker.coordinator.partitioning import partition_for  # noqa: E402
from kbroker.protocol.records.codec import decode_record  # noqa: E402
from kbroker.protocol.control_records import COMMIT, control_type  # noqa: E402
from kbroker.protocol.record_batch import decode_batch, iter_batches  # noqa: E402
from kbroker.tests.integration.broker_process import BrokerProcess  # noqa: E402

GROUP = "txn-log-group"
TOPIC = "txn-log-in"


def offsets_log(log_dir: Path, group: str) -> list[tuple]:
    """The group's `__consumer_offsets` partition as (kind, transactional, committed offsets) per batch:
    kind is "offsets" for a batch of OffsetCommit records, "COMMIT" or "ABORT" for a marker."""
    folder = log_dir / f"__consumer_offsets-{partition_for(group, 50)}"
    out: list[tuple] = []
    producers: set[int] = set()  # those that committed the group's offsets: a marker is another's otherwise
    for segment in sorted(folder.glob("*.log")):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            _, records = decode_batch(data, pos)
            if header.is_control:
                # The reference broker is shared by the test session: other tests' transactions
                # whose groups hash to this partition end here too.
                if header.producer_id in producers:
                    out.append(("COMMIT" if control_type(records[0].key) == COMMIT else "ABORT", True, ()))
                continue
            commits = tuple(sorted((r.topic, r.partition, r.offset) for r in map(
                lambda rec: decode_record(rec.key, rec.value), records) if getattr(r, "group", None) == group
                and hasattr(r, "offset")))
            if commits:
                producers.add(header.producer_id)
                out.append(("offsets", header.is_transactional, commits))
    return out


def run_transactions(bootstrap: str, txn_id: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    # A consumer that does not join: its group metadata carries no member, as for a producer that
    # commits on a group's behalf (generation -1), so the group writes no membership record.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60)
    for offsets, commit in (({0: 5, 1: 7}, True), ({0: 9, 1: 11}, False)):
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"out", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                                             consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
    consumer.close()


def wait_for(log_dir: Path, markers: int, timeout: float = 60.0) -> list[tuple]:
    """Markers are written after EndTxn is answered (both brokers): wait until both are on disk."""
    deadline = time.monotonic() + timeout
    while True:
        seen = offsets_log(log_dir, GROUP)
        if sum(kind != "offsets" for kind, _, _ in seen) >= markers or time.monotonic() > deadline:
            return seen


EXPECTED = [
    ("offsets", True, ((TOPIC, 0, 5), (TOPIC, 1, 7))),
    ("COMMIT", True, ()),
    ("offsets", True, ((TOPIC, 0, 9), (TOPIC, 1, 11))),
    ("ABORT", True, ()),
]


def test_a_transactions_offsets_are_written_once_as_kafka_writes_them(kafka_reference, tmp_path) -> None:
    run_transactions(kafka_reference.bootstrap, f"ref-{uuid.uuid4().hex[:8]}")
    kafka_log = wait_for(kafka_reference.log_dir, 2)
    assert kafka_log == EXPECTED

    with BrokerProcess(tmp_path / "data") as broker:
        run_transactions(broker.bootstrap, "kb")
        kbroker_log = wait_for(tmp_path / "data", 2)
        # and the committed offsets are the committed transaction's, read back from the broker
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
        committed = probe.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], 30)
        probe.close()
    assert kbroker_log == kafka_log
    assert [tp.offset for tp in committed] == [5, 7]
