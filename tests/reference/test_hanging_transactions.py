"""The hanging transaction KIP-890 closes, on Apache Kafka 4.4 and on kbroker alike: a producer's write
that arrives after its transaction ended (a retry stuck in the network, a zombie) must not open a new
transaction that nobody will ever end, which would hold the partition's last stable offset, and every
read_committed consumer, for ever. Under transactions v2 the end bumped the producer epoch, so the late
write of the old epoch is refused (INVALID_PRODUCER_EPOCH, nothing appended), and
`kafka-transactions find-hanging` finds nothing. The same raw requests go to both brokers and their
answers are compared; the tool's output too."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kbroker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kbroker.protocol.messages.end_txn_request import EndTxnRequest
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.pair import TRANSACTIONS, Side, await_topic
from kbroker.tests.reference.tool_runner import run_tool

NONE, INVALID_PRODUCER_EPOCH = 0, 47
# REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS: the EndTxn answers the Java producer sends its EndTxn again on
RETRIABLE_END = {7, 14, 15, 16, 51}


class Producer:
    """A transactions v2 producer in raw requests, as the Java producer 4.4 speaks it."""

    def __init__(self, bootstrap: str, txn_id: str, topic: str) -> None:
        self.wire, self.txn_id, self.topic = Wire(bootstrap), txn_id, topic
        # the coordinator: one node on both sides, but Kafka wants FindCoordinator to load its partition
        until(lambda: self.wire.call(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_id]))
              .coordinators[0].error_code == NONE)
        answer = until(lambda: (lambda r: r if r.error_code == NONE else None)(
            self.wire.call(22, 5, InitProducerIdRequest(txn_id, 60000, -1, -1))))
        self.pid, self.epoch = answer.producer_id, answer.producer_epoch
        self.ends: list[int] = []

    def produce(self, partition: int, value: bytes, epoch: int, sequence: int) -> int:
        now = int(time.time() * 1000)
        batch = encode_batch([Record(0, now, None, value)], producer_id=self.pid, producer_epoch=epoch,
                             base_sequence=sequence, is_transactional=True)
        r = self.wire.call(0, 12, ProduceRequest(self.txn_id, -1, 10000, [TopicProduceData(
            self.topic, partition_data=[PartitionProduceData(partition, batch)])]))
        return r.responses[0].partition_responses[0].error_code

    def commit(self) -> tuple[int, int]:
        """EndTxn, retried on the errors the Java producer retries it on (each answer kept in `ends`)."""
        def end():
            r = self.wire.call(26, 5, EndTxnRequest(self.txn_id, self.pid, self.epoch, True))
            self.ends.append(r.error_code)
            return r if r.error_code not in RETRIABLE_END else None
        r = until(end, what=lambda: f"EndTxn answered {self.ends}")
        return r.error_code, r.producer_epoch - self.epoch

    def state(self) -> str:
        return self.wire.call(65, 0, DescribeTransactionsRequest([self.txn_id])).transaction_states[0].transaction_state

    def stable(self, partition: int) -> tuple[int, int]:
        r = self.wire.call(1, 12, FetchRequest(max_wait_ms=0, min_bytes=0, isolation_level=1, topics=[
            FetchTopic(topic=self.topic, partitions=[FetchPartition(partition=partition, fetch_offset=0,
                                                                    partition_max_bytes=1 << 20)])]))
        p = r.responses[0].partitions[0]
        return p.high_watermark, p.last_stable_offset


def until(get, timeout: float = 30.0, what: object = "not reached"):
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if value or time.monotonic() > deadline:
            assert value, what() if callable(what) else what
            return value
        time.sleep(0.05)


def scenario(side: Side, run_id: str) -> dict[str, object]:
    bootstrap = side.bootstrap
    topic = f"hang-{run_id}"
    wire = Wire(bootstrap)
    wire.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(topic, 2, 1)], timeout_ms=30000))
    wire.close()
    await_topic(bootstrap, topic)
    producer = Producer(bootstrap, f"hang-{run_id}", topic)
    seen: dict[str, object] = {"write": producer.produce(0, b"in the transaction", producer.epoch, 0)}
    seen["commit, epoch bumped by"] = producer.commit()
    states: list[str] = []
    until(lambda: states.append(producer.state()) or states[-1] == "CompleteCommit",
          what=lambda: f"{side.name}: still {states[-1]} after the commit ({len(states)} looks; "
                       f"EndTxn answered {producer.ends})")
    # the late write of the old epoch, to a partition the ended transaction never held
    seen["late write of the old epoch"] = producer.produce(1, b"late", producer.epoch, 1)
    seen["late write, again"] = producer.produce(1, b"late", producer.epoch, 1)
    seen["state after"] = producer.state()
    high, stable = producer.stable(1)
    seen["partition 1 stable"] = high == stable
    producer.wire.close()
    return seen


@pytest.mark.timeout(300)
def test_a_late_write_after_the_end_is_refused_as_kafka_refuses_it(kafka_reference, kbroker, run_id):
    sides = (Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker))
    kafka, ours = (scenario(side, run_id) for side in sides)
    assert ours == kafka
    assert ours["late write of the old epoch"] == INVALID_PRODUCER_EPOCH
    assert ours["commit, epoch bumped by"] == (NONE, 1) and ours["partition 1 stable"] is True
    topic = f"hang-{run_id}"
    # In a JVM of its own: the shared ToolServer's later runs would otherwise hear this file's kbroker,
    # stopped with the module, from the admin client's lingering network thread.
    runs = [run_tool(TRANSACTIONS, "--bootstrap-server", side.bootstrap, "find-hanging", "--topic", topic,
                     "--max-transaction-timeout", "0", fresh_jvm=True) for side in sides]
    assert runs[0].returncode == runs[1].returncode == 0, runs
    assert runs[1].stdout == runs[0].stdout  # the header alone: nothing hangs
