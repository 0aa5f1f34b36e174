"""Several brokers in one process (issue 41): what real clients see when leaders move, a node stops
and starts, and every leader shuffles, driven by the cluster test controls (broker/cluster.py,
kbroker.admin.cluster.ClusterControls); and acks=all against min.insync.replicas.

Each failover scenario (tests/integration/cluster_scenarios.py) runs an idempotent confluent-kafka
producer and a consumer group (confluent-kafka, committing after each batch) on an RF=3 topic while one
disruption happens; then no acknowledged record is lost, none is duplicated, every record was consumed,
the committed offsets survive (a new consumer of the group starts where the old one stopped), and the
time until both clients made progress again is printed (the report's figures; never asserted). The other
clients run the same scenarios in test_cluster_clients.py.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.cluster_scenarios import (
    SCENARIOS,
    ConfluentWorkload,
    KbrokerTarget,
    create_topic,
    leaders,
    run,
    start_cluster,
)
from kbroker.tests.integration.wire import Wire

NODES = 3
NOT_ENOUGH_REPLICAS = 19


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    broker, controls, port = start_cluster(tmp_path_factory.mktemp("failover"))
    bootstrap = ",".join(f"127.0.0.1:{port + k}" for k in range(NODES))
    yield broker, controls, bootstrap, port
    broker.stop()


def _create(bootstrap: str, topic: str, partitions: int, configs: dict | None = None) -> None:
    create_topic(bootstrap, topic, partitions, configs)


def _leaders(port: int, topic: str) -> dict[int, tuple[int, list[int]]]:
    return leaders(f"127.0.0.1:{port}", topic)


def test_acks_all_needs_min_insync_replicas(cluster) -> None:
    """RF=3, min.insync.replicas=2: one node down, acks=all goes on; two down, acks=all gets
    NOT_ENOUGH_REPLICAS and acks=1 still works; the nodes back, the ISR is whole again."""
    broker, controls, bootstrap, port = cluster
    topic = f"isr-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 1, {"min.insync.replicas": "2"})
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")])

    def produce(acks: int) -> int:
        wire = Wire(f"127.0.0.1:{port}")  # node 1, which the test never stops
        try:
            req = ProduceRequest(None, acks, 5000, [TopicProduceData(topic, partition_data=[
                PartitionProduceData(0, batch)])])
            part = wire.call(0, 9, req).responses[0].partition_responses[0]
            return part.error_code
        finally:
            wire.close()

    controls.move_leader(topic, 0, node=1)
    assert produce(-1) == 0
    controls.stop_node(2)
    assert _leaders(port, topic)[0] == (1, [1, 3])
    assert produce(-1) == 0
    controls.stop_node(3)
    assert _leaders(port, topic)[0] == (1, [1])
    assert produce(-1) == NOT_ENOUGH_REPLICAS
    assert produce(1) == 0
    controls.start_node(2)
    controls.start_node(3)
    assert _leaders(port, topic)[0] == (1, [1, 2, 3])
    assert produce(-1) == 0
    events = [e for e in broker.events("cluster_control")]
    assert [e["control"] for e in events][-4:] == ["stop_node", "stop_node", "start_node", "start_node"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_confluent_kafka_clients_ride_through(cluster, scenario, capsys) -> None:
    _, controls, _, port = cluster
    run(KbrokerTarget(controls, port), ConfluentWorkload, scenario, capsys)


def test_the_cli_describes_and_drives_the_cluster(cluster) -> None:
    """`kbroker topic describe` shows leaders, replicas and ISR as kafka-topics.sh --describe does, and
    `kbroker test node-stop|node-start|cluster` drive the same controls."""
    import json
    import subprocess
    import sys

    broker, controls, bootstrap, port = cluster
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 2)
    admin_url = controls.admin_url
    token = controls.token or ""

    def kbroker(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "kbroker", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    described = kbroker("topic", "describe", topic, "--bootstrap-server", f"127.0.0.1:{port}")
    assert "replication factor 3" in described
    assert all(sorted(map(int, row.split()[2].split(","))) == [1, 2, 3]
               for row in described.splitlines() if row.split()[:1] in (["0"], ["1"])), described
    leader = _leaders(port, topic)[0][0]
    kbroker("test", "node-stop", str(leader), "--admin-url", admin_url, "--token", token)
    state = json.loads(kbroker("test", "cluster", "--admin-url", admin_url, "--token", token, "--json"))
    assert [n["up"] for n in state["nodes"]] == [n != leader for n in (1, 2, 3)]
    on_other = next(p for p in range(NODES) if p + 1 != leader)
    moved = _leaders(port + on_other, topic)[0]
    assert moved[0] != leader and leader not in moved[1]
    described = kbroker("topic", "describe", topic, "--bootstrap-server", f"127.0.0.1:{port + on_other}", "--json")
    assert json.loads(described)["partitions"][0]["offline"] == [leader]
    kbroker("test", "node-start", str(leader), "--admin-url", admin_url, "--token", token)
    assert _leaders(port, topic)[0][1] == [1, 2, 3]


def test_a_transactional_producer_rides_through_its_coordinator_moving(cluster) -> None:
    """The __transaction_state partition of a transactional id changes leader while a transaction is
    open, twice: the partition is unloaded and replayed on the new leader (a coordinator_moved event),
    the producer finds its new coordinator and commits (then aborts) as Kafka's clients do after a
    coordinator failover, and a read_committed consumer sees exactly the committed records."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from kbroker.coordinator.partitioning import partition_for

    broker, controls, bootstrap, port = cluster
    topic, txn_id = f"txn-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "log_level": 0,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    state_partition = partition_for(txn_id, 50)

    def moves() -> list[dict]:
        return [e for e in broker.events("coordinator_moved") if e.get("topic") == "__transaction_state"
                and e.get("partition") == state_partition]

    moved_before = len(moves())  # the module's other scenarios move leaders too

    def transaction(first: int, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(first, first + 10):
            producer.produce(topic, value=b"v%03d" % i)
        producer.flush(30)
        moved = controls.move_leader("__transaction_state", state_partition)  # open transaction, new coordinator
        assert moved["leader"] == _leaders(port, "__transaction_state")[state_partition][0]
        (producer.commit_transaction if commit else producer.abort_transaction)(60)

    producer.begin_transaction()
    producer.produce(topic, value=b"v000")
    producer.commit_transaction(30)
    transaction(1, commit=True)
    transaction(11, commit=False)
    transaction(21, commit=True)
    assert len(moves()) - moved_before == 3, moves()
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}", "log_level": 0,
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 21 and time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value())
    finally:
        reader.close()
    assert seen == [b"v%03d" % i for i in (0, *range(1, 11), *range(21, 31))]
