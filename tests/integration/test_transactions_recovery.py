"""Transactions across crashes: an exactly-once consume-transform-produce application SIGKILLed
mid-transaction and restarted; the broker killed (-9) between PrepareCommit and the markers and
restarted, after which the transaction completes; an open transaction at a crash is timed out."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_transactions_confluent import consume_all, create_topic, txn_producer

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


PARTITIONS = 3


def run_app(broker, *args, timeout=120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kbroker.tests.integration.txn_app", broker.bootstrap, *args]
    return subprocess.run(cmd, capture_output=True, timeout=timeout)


def test_consume_transform_produce_survives_sigkill_with_exactly_once_output(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create_topic(broker, "ctp-in")
        create_topic(broker, "ctp-out")
        inputs = {f"k{i}".encode(): f"value-{i}".encode() for i in range(300)}
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        for i, (k, v) in enumerate(inputs.items()):
            plain.produce("ctp-in", key=k, value=v, partition=i % PARTITIONS)
        plain.flush(10)
        common = ["ctp-in", "ctp-out", "ctp-app", "ctp-group", str(PARTITIONS), "--per-txn", "25"]
        first = run_app(broker, *common, "--die-in-txn", "3")
        assert first.returncode == -9, first.stderr.decode()[-2000:]
        # the dead instance's open transaction holds records that must never be read committed
        uncommitted = consume_all(broker, "ctp-out", "read_uncommitted", idle_s=2.0)
        assert len(uncommitted) > 3 * 25
        second = run_app(broker, *common)
        assert second.returncode == 0, second.stderr.decode()[-2000:]
        out = consume_all(broker, "ctp-out", "read_committed", expected=len(inputs))
        pairs = [(m.key(), m.value()) for m in out]
        assert len(pairs) == len(inputs)  # no duplicates, nothing lost
        assert dict(pairs) == {k: v.upper() for k, v in inputs.items()}


def hold_markers(broker: BrokerProcess, admin_port: int, ms: int) -> None:
    """The test control that holds a prepared transaction's markers back (POST /v1/test/...)."""
    token = (broker.data_dir / "test-controls.token").read_text().strip()
    request = urllib.request.Request(f"http://127.0.0.1:{admin_port}/v1/test/transactions/hold-markers",
                                     data=json.dumps({"ms": ms}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.loads(answer.read())["ok"]


def test_broker_killed_between_prepare_and_markers_completes_after_restart(tmp_path):
    admin_port = free_port()
    broker = BrokerProcess(tmp_path / "data", "--metrics-listen", f"127.0.0.1:{admin_port}", "--test-controls")
    try:
        hold_markers(broker, admin_port, 60_000)
        create_topic(broker, "crash-commit")
        create_topic(broker, "crash-src")
        group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash-group"})
        p = txn_producer(broker, "crash-txn")
        p.begin_transaction()
        for i in range(30):
            p.produce("crash-commit", value=f"c-{i}".encode(), partition=i % PARTITIONS)
        p.send_offsets_to_transaction([TopicPartition("crash-src", 0, 17), TopicPartition("crash-src", 2, 5)],
                                      group.consumer_group_metadata(), 30)
        p.commit_transaction(30)  # answered once PrepareCommit is durable; markers held back
        assert consume_all(broker, "crash-commit", "read_committed", idle_s=1.5) == []
        group.close()
        broker.kill()
        broker.start()  # the hold was the killed process's: the restarted one writes the markers at once
        out = consume_all(broker, "crash-commit", "read_committed", expected=30)
        assert sorted(m.value() for m in out) == sorted(f"c-{i}".encode() for i in range(30))
        assert broker.events("transaction_completed")
        # the transaction's offsets were durable before the crash and are committed by its completion
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash-group"})
        got = reader.committed([TopicPartition("crash-src", p) for p in range(PARTITIONS)], timeout=10)
        reader.close()
        assert {tp.partition: tp.offset for tp in got if tp.offset >= 0} == {0: 17, 2: 5}
        # the same transactional id carries on after the restart
        p2 = txn_producer(broker, "crash-txn")
        p2.begin_transaction()
        p2.produce("crash-commit", value=b"after", partition=0)
        p2.commit_transaction(30)
        assert len(consume_all(broker, "crash-commit", "read_committed", expected=31)) == 31
    finally:
        broker.stop()


def test_open_transaction_at_a_crash_is_timed_out_and_aborted(tmp_path):
    args = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200")
    broker = BrokerProcess(tmp_path / "data", *args)
    try:
        create_topic(broker, "crash-open")
        group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "open-group"})
        p = txn_producer(broker, "open-txn", **{"transaction.timeout.ms": 3000})
        p.begin_transaction()
        for i in range(10):
            p.produce("crash-open", value=f"o-{i}".encode(), partition=0)
        p.flush(10)
        p.send_offsets_to_transaction([TopicPartition("crash-open", 0, 10)], group.consumer_group_metadata(), 30)
        group.close()
        broker.kill()
        broker.start()
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        plain.produce("crash-open", value=b"plain", partition=0)
        plain.flush(10)
        # after the timeout the coordinator aborts it (epoch bumped) and the LSO moves on
        out = consume_all(broker, "crash-open", "read_committed", expected=1, idle_s=8.0)
        assert [m.value() for m in out] == [b"plain"]
        [event] = broker.events("transaction_timed_out")
        assert event["transactional_id"] == "open-txn" and event["bumped_epoch"] == 1
        # the aborted transaction's offsets never reach the group, not even after another restart
        broker.stop()
        broker.start()
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "open-group"})
        got = reader.committed([TopicPartition("crash-open", 0)], timeout=10)
        reader.close()
        assert got[0].offset < 0
    finally:
        broker.stop()


def test_idle_transactional_id_expires_with_a_tombstone(tmp_path):
    from kbroker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
    from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest
    from kbroker.tests.integration.wire import Wire

    args = ("--transactional-id-expiration-ms", "1000",
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200")
    broker = BrokerProcess(tmp_path / "data", *args)
    try:
        wire = Wire(broker.bootstrap)
        first = wire.call(22, 4, InitProducerIdRequest("expiring", 60000, -1, -1))
        assert first.error_code == 0

        def state() -> int:
            return wire.call(65, 0, DescribeTransactionsRequest(["expiring"])).transaction_states[0].error_code

        assert state() == 0
        deadline = time.monotonic() + 20
        while state() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert state() == 105  # TRANSACTIONAL_ID_NOT_FOUND
        wire.close()
        broker.stop()
        broker.start()  # the tombstone keeps it gone
        wire = Wire(broker.bootstrap)
        assert state() == 105
        again = wire.call(22, 4, InitProducerIdRequest("expiring", 60000, -1, -1))
        assert again.error_code == 0 and again.producer_id != first.producer_id and again.producer_epoch == 0
        wire.close()
    finally:
        broker.stop()
