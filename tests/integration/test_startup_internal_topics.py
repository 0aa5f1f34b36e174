"""A first start creates `__consumer_offsets` and `__transaction_state` while it already serves.

Making their 100 partition directories was most of an empty broker's start-up, so `Broker()` no longer
makes them; `start()` does, in worker threads, after the listeners are up (Kafka too creates them after
start-up, on first use). Until then the groups answer COORDINATOR_LOAD_IN_PROGRESS (their partitions
are loading), a transactional write waits for its topic, Metadata's auto-creation of either name
answers LEADER_NOT_AVAILABLE (retriable, as Kafka answers a topic it is creating), and /ready says so.
A real broker in this process, on a real data directory and listener.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.broker.app import Broker
from kbroker.broker.config import load_config
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.tests.integration.broker_process import free_port

INTERNAL = ("__consumer_offsets", "__transaction_state")


def _config(data_dir):
    return load_config({"data_dir": str(data_dir), "listen": f"127.0.0.1:{free_port()}", "flush": "never",
                        "offsets_topic_num_partitions": "5", "transaction_state_log_num_partitions": "4"}, None)


async def _until_ready(broker: Broker, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while broker.readiness_problems():
        assert time.monotonic() < deadline, broker.readiness_problems()
        await asyncio.sleep(0.01)


async def test_first_start_creates_internal_topics_while_serving(tmp_path) -> None:
    data = tmp_path / "data"
    broker = Broker(_config(data))
    try:
        # built: nothing internal on disk yet, and nothing claims to be there
        assert not set(INTERNAL) & set(broker.logs.topics())
        assert not any(data.glob("__*"))
        for name in INTERNAL:
            with pytest.raises(KafkaError) as refused:
                await broker.auto_create_topic(name)
            assert refused.value.code == ErrorCode.LEADER_NOT_AVAILABLE
        assert not set(INTERNAL) & set(broker.logs.topics())  # the refusal created nothing
        await broker.start()
        # a transactional write issued at once waits for __transaction_state instead of failing
        error, producer_id, epoch = await asyncio.wait_for(
            broker.transactions.init_producer_id("txn-at-start", 60_000, None), 30)
        assert (error, epoch) == (ErrorCode.NONE, 0) and producer_id >= 0
        await _until_ready(broker)
        topics = broker.logs.topics()
        assert topics["__consumer_offsets"].num_partitions == 5
        assert topics["__transaction_state"].num_partitions == 4
        for name in INTERNAL:
            assert topics[name].overrides["cleanup.policy"] == "compact"
        assert broker.coordinator.loaded_partitions == 5
    finally:
        await broker.stop()

    # a restart adopts the existing topics in Broker() (their partition count wins over the setting)
    config = load_config({"data_dir": str(data), "listen": f"127.0.0.1:{free_port()}", "flush": "never",
                          "offsets_topic_num_partitions": "50", "transaction_state_log_num_partitions": "50"}, None)
    again = Broker(config)
    try:
        assert again.offsets_topic.num_partitions == 5
        assert again.transactions.topic_ready.is_set() and again.transactions.num_partitions == 4
        await again.start()
        await _until_ready(again)
        assert again.transactions.machine.txns["txn-at-start"].producer_id == producer_id  # replayed
    finally:
        await again.stop()
