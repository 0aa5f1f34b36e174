"""Damage to `__transaction_state` on a real broker process (issue 38, items 3 and 9).

- One damaged batch in the middle of a partition, after a clean stop or a kill -9 (only its CRC
  broken): the broker used to fail every start with a traceback. Now the batch is skipped with an
  event naming the transactional ids it held, the other ids load, and the open transaction it
  recorded is aborted, so read_committed consumers read past it.
- The partition cut in half: transactional ids come back at an older epoch, and their producers then
  failed with OUT_OF_ORDER_SEQUENCE_NUMBER, nothing saying why. Now the ids that lost their state are
  named, and their next InitProducerId gets a new producer id, so they carry on.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from kbroker.protocol.record_batch import decode_batches
from kbroker.protocol.records.transaction_log import decode_key, decode_value
from kbroker.tests.faults.damage import rot, segments, stored_batches
from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "orders"
ONGOING = 1
# one __transaction_state partition: every transactional id in it, so the damage is "in the middle"
ARGS = ("--transaction-state-log-num-partitions", "1")


def create_topic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)


def producer(broker: BrokerProcess, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                  "transaction.timeout.ms": 600_000})
    p.init_transactions(30)
    return p


def committed_txn(broker: BrokerProcess, txn_id: str, values: list[bytes]) -> None:
    p = producer(broker, txn_id)
    p.begin_transaction()
    for v in values:
        p.produce(TOPIC, value=v, partition=0)
    p.commit_transaction(30)


def read_committed(broker: BrokerProcess, expected: int, limit_s: float = 30.0) -> list[bytes]:
    """orders-0 from the start, read_committed, until `expected` values came (or `limit_s`)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + limit_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            out.append(m.value())
    finally:
        c.close()
    return out


def txn_log_batches(broker: BrokerProcess, with_epoch: bool = False):
    """(segment file, stored batch, [(transactional id, status or None[, epoch])]) of __transaction_state-0."""
    [file] = segments(broker.data_dir, "__transaction_state", 0)
    data = file.read_bytes()
    for batch in stored_batches(file):
        [(_, records)] = list(decode_batches(data[batch.position:batch.position + batch.size]))
        held = []
        for r in records:
            value = decode_value(r.value)
            status = None if value is None else value.status
            held.append((decode_key(r.key), status, value.producer_epoch) if with_epoch and value is not None
                        else (decode_key(r.key), status))
        yield file, batch, held


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_a_damaged_batch_is_skipped_named_and_its_open_transaction_aborted(tmp_path, stop) -> None:
    broker = BrokerProcess(tmp_path / "data", *ARGS)
    try:
        create_topic(broker)
        committed_txn(broker, "before", [b"before-%d" % i for i in range(5)])
        victim = producer(broker, "victim")
        victim.begin_transaction()
        for i in range(5):
            victim.produce(TOPIC, value=b"victim-%d" % i, partition=0)
        victim.flush(30)  # its partition is in the transaction (an Ongoing record), its batch written
        committed_txn(broker, "after", [b"after-%d" % i for i in range(5)])
        assert len(read_committed(broker, 5, limit_s=5)) == 5  # the open transaction holds "after" back
        if stop == "clean":
            broker.stop()
        else:
            broker.kill()
        # the batch that recorded the victim's Ongoing transaction, in the middle of the partition
        [(file, batch)] = [(f, b) for f, b, held in txn_log_batches(broker) if ("victim", ONGOING) in held]
        rot(file, batch)
        broker.start()  # it used to end here: a traceback, exit 1, at every start
        [skipped] = broker.events("transaction_batch_skipped", start=broker.starts)
        assert skipped["level"] == "error" and skipped["partition"] == 0 and skipped["offset"] == batch.base_offset
        assert skipped["transactional_ids"] == ["victim"]
        [aborted] = broker.events("transaction_aborted_after_state_loss", start=broker.starts)
        assert aborted["transactional_id"] == "victim" and aborted["partitions"] == [f"{TOPIC}-0"]
        # read_committed consumers go past the victim's transaction: aborted, not hung
        got = read_committed(broker, 10)
        assert got == [b"before-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(5)]
        # the other transactional ids loaded and carry on; so does the victim, once it starts again
        committed_txn(broker, "after", [b"after-more"])
        committed_txn(broker, "victim", [b"victim-again"])
        assert read_committed(broker, 12)[-2:] == [b"after-more", b"victim-again"]
    finally:
        broker.kill()


COMPLETE_COMMIT = 4


@pytest.mark.parametrize("where", ["half", "after_epoch_2"])
def test_a_transaction_log_cut_short_names_the_ids_that_lost_their_state(tmp_path, where) -> None:
    """`half`: the file cut in the middle. `after_epoch_2`: cut right after the id's transaction at
    epoch 2 completed, so the log says epoch 2 where its partition saw 3: the next InitProducerId
    would bump to 3 and the new producer's first batch (sequence 0 at an epoch whose sequences are
    used) would be refused OUT_OF_ORDER_SEQUENCE_NUMBER or taken for a duplicate and dropped."""
    broker = BrokerProcess(tmp_path / "data", *ARGS)
    try:
        create_topic(broker)
        # Each new producer instance bumps the id's epoch; the partition's producer state keeps the newest.
        for instance in range(4):
            committed_txn(broker, "cut", [b"cut-%d-%d" % (instance, i) for i in range(3)])
        committed_txn(broker, "whole", [b"whole-0"])
        broker.stop()
        [file] = segments(broker.data_dir, "__transaction_state", 0)
        if where == "half":
            os.truncate(file, file.stat().st_size // 2)  # the newer half of every id's history is gone
        else:
            [(_, batch)] = [(f, b) for f, b, held in txn_log_batches(broker, with_epoch=True)
                            if ("cut", COMPLETE_COMMIT, 2) in held]
            os.truncate(file, batch.position + batch.size)
        broker.start()
        lost = {e["transactional_id"]: e for e in broker.events("transaction_state_lost", start=broker.starts)}
        assert "cut" in lost and lost["cut"]["level"] == "error"
        assert lost["cut"]["logged_epoch"] < lost["cut"]["partitions_epoch"] == 3
        # its producer carries on (it used to fail with OUT_OF_ORDER_SEQUENCE_NUMBER at every batch)
        committed_txn(broker, "cut", [b"cut-after"])
        assert read_committed(broker, 14)[-1] == b"cut-after"
    finally:
        broker.kill()
