"""Several brokers in one process (issue 41): what real clients see when leaders move, a node stops
and starts, and every leader shuffles, driven by the cluster test controls (broker/cluster.py,
kbroker.admin.cluster.ClusterControls); and acks=all against min.insync.replicas.

Each failover scenario runs an idempotent confluent-kafka producer and a consumer group
(confluent-kafka, committing after each batch) on an RF=3 topic while one disruption happens; then
no acknowledged record is lost, none is duplicated, every record was consumed, the committed
offsets survive (a new consumer of the group starts where the old one stopped), and the time until
both clients made progress again is printed (the report's figures; never asserted).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kbroker.admin.cluster import ClusterControls
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess, free_port, free_ports
from kbroker.tests.integration.wire import Wire

NODES = 3
NOT_ENOUGH_REPLICAS = 19


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    port = free_ports(NODES)
    admin_port = free_port()
    while port <= admin_port < port + NODES:  # the nodes' ports are not handed out one by one
        admin_port = free_port()
    data = tmp_path_factory.mktemp("failover") / "data"
    broker = BrokerProcess(data, "--nodes", str(NODES), "--profile", "test", "--test-controls",
                           "--metrics-listen", f"127.0.0.1:{admin_port}", port=port)
    token = (data / "test-controls.token").read_text().strip()
    controls = ClusterControls(f"http://127.0.0.1:{admin_port}", token)
    bootstrap = ",".join(f"127.0.0.1:{port + k}" for k in range(NODES))
    yield broker, controls, bootstrap, port
    broker.stop()


def _create(bootstrap: str, topic: str, partitions: int, configs: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 3, config=configs or {})]).values():
        future.result(15)


def _leaders(port: int, topic: str) -> dict[int, tuple[int, list[int]]]:
    wire = Wire(f"127.0.0.1:{port}")
    try:
        md = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=False))
        return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for p in md.topics[0].partitions}
    finally:
        wire.close()


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


class _Clients:
    """An idempotent producer and a committing consumer group running in threads."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer, Producer

        self.topic, self.group, self.bootstrap = topic, group, bootstrap
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "log_level": 0, "message.timeout.ms": 60000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.acked: set[bytes] = set()
        self.consumed: list[bytes] = []
        self.errors: list[str] = []
        self.last_ack = self.last_consumed = time.monotonic()
        self._stop = threading.Event()
        self._produced = threading.Event()  # the producer has flushed: `acked` is final
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> None:
        self.consumer.subscribe([self.topic])
        for thread in self._threads:
            thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.add(msg.value())
            self.last_ack = time.monotonic()
        else:
            self.errors.append(f"produce: {err}")

    def _produce(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, key=b"%d" % (i % 16), value=b"r%06d" % i, on_delivery=self._on_delivery)
            i += 1
            self.producer.poll(0.002)
        self.producer.flush(60)
        self._produced.set()

    def _consume(self) -> None:
        while not self._produced.is_set() or not self.acked <= set(self.consumed):
            msg = self.consumer.poll(0.2)
            if msg is None:
                if self._produced.is_set() and time.monotonic() - self.last_consumed > 20:
                    break
                continue
            if msg.error():
                self.errors.append(f"consume: {msg.error()}")
                continue
            self.consumed.append(msg.value())
            self.last_consumed = time.monotonic()
            try:
                self.consumer.commit(msg, asynchronous=False)
            except Exception as e:  # noqa: BLE001 - a commit during a coordinator move is retried by the next
                self.errors.append(f"commit: {e}")

    def recovery_s(self, since: float, timeout: float = 60) -> tuple[float, float]:
        """Seconds from `since` until both clients made progress again."""
        deadline = since + timeout
        while time.monotonic() < deadline and (self.last_ack <= since or self.last_consumed <= since):
            time.sleep(0.05)
        return round(self.last_ack - since, 2), round(self.last_consumed - since, 2)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
        self.consumer.close()


def _disrupt(controls: ClusterControls, port: int, topic: str, group: str, scenario: str,
             clients: _Clients) -> tuple[float, float]:
    """Apply the scenario's disruption; (producer, consumer) seconds until both made progress after it."""
    if scenario == "move-leader":
        since = time.monotonic()
        controls.move_leader(topic, 0)
        return clients.recovery_s(since)
    if scenario == "stop-start":
        # the node leading partition 0 is made the group's coordinator too, then stopped (the clients
        # must recover while it is down) and started again
        leader = _leaders(port, topic)[0][0]
        controls.move_coordinator(group, node=leader)
        since = time.monotonic()
        controls.stop_node(leader)
        recovered = clients.recovery_s(since)
        controls.start_node(leader)
        return recovered
    if scenario == "shuffle":
        since = time.monotonic()
        controls.shuffle_leaders(seed=41)
        return clients.recovery_s(since)
    raise AssertionError(scenario)


@pytest.mark.parametrize("scenario", ["move-leader", "stop-start", "shuffle"])
def test_confluent_kafka_clients_ride_through(cluster, scenario, capsys) -> None:
    broker, controls, bootstrap, port = cluster
    topic, group = f"fo-{scenario}-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 3)
    clients = _Clients(bootstrap, topic, group)
    clients.start()
    try:
        deadline = time.monotonic() + 30
        while len(clients.consumed) < 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert clients.consumed, f"nothing consumed before the disruption: {clients.errors[:5]}"
        produce_s, consume_s = _disrupt(controls, port, topic, group, scenario, clients)
        time.sleep(2)
    finally:
        clients.stop()
    with capsys.disabled():
        print(f"\n[cluster {scenario}] acked={len(clients.acked)} consumed={len(clients.consumed)} "
              f"producer recovered in {produce_s} s, consumer in {consume_s} s; errors seen: "
              f"{sorted(set(e.split(':')[0] + ':' + e.split(':', 1)[1][:60] for e in clients.errors))[:6]}")
    log = _read_all(bootstrap, topic)
    assert len(log) == len(set(log)), "a record is in the log twice (the idempotent producer's retry)"
    assert clients.acked <= set(log), f"{len(clients.acked - set(log))} acknowledged record(s) lost"
    assert set(clients.consumed) == set(log), "the group did not consume every record"
    # the committed offsets survive: the group, joined again, has nothing left to read
    from confluent_kafka import Consumer, TopicPartition

    again = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        committed = again.committed([TopicPartition(topic, p) for p in range(3)], timeout=15)
        ends = {p: again.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)}
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        again.close()


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                       "enable.auto.commit": False, "log_level": 0})
    try:
        ends = {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)}
        reader.assign([TopicPartition(topic, p, 0) for p in range(3)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
        return out
    finally:
        reader.close()


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
