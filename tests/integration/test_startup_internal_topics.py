"""A first start creates `__consumer_offsets` while it already serves, and `__transaction_state` with the
first use of transactions.

Making their 100 partition directories was most of an empty broker's start-up, so `Broker()` makes
neither: `start()` makes `__consumer_offsets` in worker threads after the listeners are up (Kafka too
creates it after start-up), and the transaction coordinator, built with its first use, makes its
topic (as Kafka creates it on first use). Until then the groups answer COORDINATOR_LOAD_IN_PROGRESS
(their partitions are loading), a transactional write waits for its topic, Metadata's auto-creation
of either name answers LEADER_NOT_AVAILABLE (retriable, as Kafka answers a topic it is creating), and
/ready says so. A real broker in this process, on a real data directory and listener.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from kbroker.broker.app import Broker
from kbroker.broker.config import load_config
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.tests.integration.broker_process import free_port

INTERNAL = ("__consumer_offsets", "__transaction_state")


def _config(data_dir, offsets: int = 5, txn: int = 4):
    return load_config({"data_dir": str(data_dir), "listen": f"127.0.0.1:{free_port()}", "flush": "never",
                        "offsets_topic_num_partitions": str(offsets),
                        "transaction_state_log_num_partitions": str(txn)}, None)


async def _until(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def test_first_start_creates_offsets_topic_while_serving_and_txn_topic_on_first_use(tmp_path) -> None:
    data = tmp_path / "data"
    broker = Broker(_config(data))
    try:
        # built: nothing internal on disk yet, and nothing claims to be there
        assert not set(INTERNAL) & set(broker.logs.topics())
        assert not any(data.glob("__*"))
        with pytest.raises(KafkaError) as refused:
            await broker.auto_create_topic("__consumer_offsets")
        assert refused.value.code == ErrorCode.LEADER_NOT_AVAILABLE
        assert "__consumer_offsets" not in broker.logs.topics()  # the refusal created nothing
        await broker.start()
        await _until(lambda: not broker.readiness_problems())
        topics = broker.logs.topics()
        assert topics["__consumer_offsets"].num_partitions == 5
        assert topics["__consumer_offsets"].overrides["cleanup.policy"] == "compact"
        assert broker.coordinator.loaded_partitions == 5
        # no transaction yet: no transaction coordinator, no topic
        assert "__transaction_state" not in broker.logs.topics()
        assert broker._transactions is None
        # the first transactional request builds it; its write waits for the topic instead of failing
        error, producer_id, epoch = await asyncio.wait_for(
            broker.transactions.init_producer_id("txn-at-start", 60_000, None), 30)
        assert (error, epoch) == (ErrorCode.NONE, 0) and producer_id >= 0
        await _until(lambda: not broker.readiness_problems())
        txn_topic = broker.logs.topics()["__transaction_state"]
        assert txn_topic.num_partitions == 4 and txn_topic.overrides["cleanup.policy"] == "compact"
    finally:
        await broker.stop()

    # a restart adopts both topics (their partition counts win over the settings) and replays
    # __transaction_state before serving
    again = Broker(_config(data, offsets=50, txn=50))
    try:
        assert again.offsets_topic.num_partitions == 5
        await again.start()
        assert again._transactions is not None and again.transactions.num_partitions == 4
        assert again.transactions.transaction("txn-at-start").producer_id == producer_id  # replayed
        await _until(lambda: not again.readiness_problems())
    finally:
        await again.stop()


async def test_metadata_auto_creation_of_the_txn_topic_starts_the_transaction_coordinator(tmp_path) -> None:
    broker = Broker(_config(tmp_path / "data"))
    await broker.start()
    try:
        with pytest.raises(KafkaError) as refused:
            await broker.auto_create_topic("__transaction_state")
        assert refused.value.code == ErrorCode.LEADER_NOT_AVAILABLE
        await _until(lambda: "__transaction_state" in broker.logs.topics())
        assert broker.logs.topics()["__transaction_state"].overrides["cleanup.policy"] == "compact"
        await _until(lambda: not broker.readiness_problems())
    finally:
        await broker.stop()


def test_a_serving_broker_with_no_transaction_has_not_imported_the_transaction_coordinator(tmp_path) -> None:
    """The import side, in a fresh interpreter (this one has imported everything)."""
    import subprocess

    code = f"""
import asyncio, json, sys
from kbroker.broker.app import Broker
from kbroker.broker.config import load_config
async def main():
    b = Broker(load_config({{"data_dir": {str(tmp_path / "d")!r}, "listen": "127.0.0.1:{free_port()}",
                             "flush": "never"}}, None))
    await b.start()
    while b.readiness_problems():
        await asyncio.sleep(0.01)
    await b.stop()
asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("kbroker.coordinator.txn", "kbroker.broker.txn_"))
                        or m.endswith(".transactions"))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


async def test_an_internal_topic_that_cannot_be_made_is_retried_and_answered_retriably(tmp_path, monkeypatch) -> None:
    """--max-partitions below what the internal topics need (a full disk would do the same): the broker
    keeps serving, the groups stay loading (/ready says so), a transit is answered NOT_COORDINATOR
    after a bounded wait, and both creations go on being retried (with a logged error each time)."""
    from kbroker.broker.coordinators import transactions

    monkeypatch.setattr(transactions, "TOPIC_WAIT_S", 0.2)
    config = load_config({"data_dir": str(tmp_path / "data"), "listen": f"127.0.0.1:{free_port()}",
                          "flush": "never", "offsets_topic_num_partitions": "5",
                          "transaction_state_log_num_partitions": "4", "max_partitions": "3"}, None)
    broker = Broker(config)
    await broker.start()
    try:
        error, _, _ = await asyncio.wait_for(broker.transactions.init_producer_id("t", 60_000, None), 30)
        assert error == ErrorCode.NOT_COORDINATOR
        await asyncio.sleep(0.1)
        problems = broker.readiness_problems()
        assert any("__consumer_offsets" in p for p in problems)
        assert any("__transaction_state" in p for p in problems)
        assert not {"__consumer_offsets", "__transaction_state"} & set(broker.logs.topics())
    finally:
        await asyncio.wait_for(broker.stop(), 30)
