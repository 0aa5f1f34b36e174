"""The cluster failover scenarios (issue 41), shared by the tests that run them with each client against
`kbroker serve --nodes 3` and against a 3-node Apache Kafka cluster (tests/reference/kafka.py KafkaCluster).

A workload is an idempotent producer (acks=all) and a consumer group committing after each poll on one
RF=3 topic of 3 partitions: confluent-kafka in threads here (ConfluentWorkload), or another client's program
(ProgramWorkload: tests/clients/java/Failover.java, tests/clients/franz/failover.go,
tests/clients/failover/kafka_python.py) printing one line per event. A target applies one disruption while
it runs (KbrokerTarget: the cluster test controls; KafkaTarget: Kafka's controlled shutdown of a node), and
`verify` checks the outcome: no acknowledged record lost, none in the log twice, every record consumed,
the committed offsets at the end of each partition. The seconds until both clients made progress again and
the errors the client reported are returned for the report, never asserted.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Protocol

from kbroker.admin.cluster import ClusterControls
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.tests.integration.wire import Wire

PARTITIONS = 3
SCENARIOS = ("move-leader", "stop-start", "shuffle")


def start_cluster(base: Path, nodes: int = 3, spare_ports: int = 0, *extra: str):
    """`kbroker serve --nodes N --test-controls` on N consecutive free ports (and `spare_ports` more after
    them, for nodes added later), its HTTP endpoint elsewhere: (broker, ClusterControls, first port).
    `extra`: more arguments of `kbroker serve`."""
    from kbroker.tests.integration.broker_process import BrokerProcess, free_port, free_ports

    port = free_ports(nodes + spare_ports)
    admin_port = free_port()
    while port <= admin_port < port + nodes + spare_ports:  # the nodes' ports are not handed out one by one
        admin_port = free_port()
    data = base / "data"
    broker = BrokerProcess(data, "--nodes", str(nodes), "--profile", "test", "--test-controls",
                           "--metrics-listen", f"127.0.0.1:{admin_port}", *extra, port=port)
    token = (data / "test-controls.token").read_text().strip()
    return broker, ClusterControls(f"http://127.0.0.1:{admin_port}", token), port


def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 3, config=configs or {})]).values():
        future.result(30)


def leaders(address: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, sorted ISR), as the node at `address` answers Metadata."""
    wire = Wire(address)
    try:
        md = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=False))
        return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for t in md.topics for p in t.partitions}
    finally:
        wire.close()


class Workload(Protocol):
    acked: set[bytes]
    consumed: list[bytes]
    errors: list[str]
    last_ack: float
    last_consumed: float

    def start(self) -> None: ...

    def stop(self) -> None: ...


def recovery_s(clients: Workload, since: float, timeout: float = 60) -> tuple[float, float]:
    """Seconds from `since` until both clients made progress again."""
    deadline = since + timeout
    while time.monotonic() < deadline and (clients.last_ack <= since or clients.last_consumed <= since):
        time.sleep(0.05)
    return round(clients.last_ack - since, 2), round(clients.last_consumed - since, 2)


class ConfluentWorkload:
    """confluent-kafka (librdkafka): the producer and the consumer in threads of this process."""

    name = "confluent-kafka"

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

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
        self.consumer.close()


# Kafka's error names and the clients' exception names, as they show in a client's errors and its log.
_ERROR_NAME = re.compile(r"\b([A-Z][A-Z]+(?:_[A-Z]+)+|[A-Z][A-Za-z]+(?:Exception|Error))\b")


class ProgramWorkload:
    """Another client's failover program, one line per event on stdout: `A value` (acknowledged), `C value`
    (consumed, then committed), `E text` (an error the client handed the application), `P` (the producer
    flushed), `DONE`; "stop" on its stdin ends the producing. Its log (stderr, warnings) is kept beside."""

    def __init__(self, name: str, command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name, self.command, self.log_path, self.env = name, command, log, env
        self.acked: set[bytes] = set()
        self.consumed: list[bytes] = []
        self.errors: list[str] = []
        self.last_ack = self.last_consumed = time.monotonic()
        self.done = threading.Event()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, bufsize=1, env=self.env)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "A":
                self.acked.add(rest.encode())
                self.last_ack = time.monotonic()
            elif kind == "C":
                self.consumed.append(rest.encode())
                self.last_consumed = time.monotonic()
            elif kind == "E":
                self.errors.append(rest)
            elif kind == "DONE":
                self.done.set()
        self.done.set()

    def stop(self, timeout: float = 150) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        self.done.wait(timeout)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def seen(self) -> list[str]:
        """The error names the client reported or logged (its log's warnings included)."""
        text = "\n".join(self.errors) + "\n" + self.log_path.read_text(errors="replace")
        return sorted(set(_ERROR_NAME.findall(text)))


def errors_seen(clients: Workload) -> list[str]:
    if isinstance(clients, ProgramWorkload):
        return clients.seen()
    return sorted(set(_ERROR_NAME.findall("\n".join(clients.errors))))


class KbrokerTarget:
    name = "kbroker"

    def __init__(self, controls: ClusterControls, port: int) -> None:
        self.controls, self.port = controls, port
        self.bootstrap = ",".join(f"127.0.0.1:{port + k}" for k in range(3))

    def disrupt(self, scenario: str, topic: str, group: str, clients: Workload) -> tuple[float, float]:
        """Apply the scenario's disruption; (producer, consumer) seconds until both made progress after it."""
        if scenario == "move-leader":
            since = time.monotonic()
            self.controls.move_leader(topic, 0)
            return recovery_s(clients, since)
        if scenario == "stop-start":
            # the node leading partition 0 is made the group's coordinator too, then stopped (the clients
            # must recover while it is down) and started again
            leader = leaders(f"127.0.0.1:{self.port}", topic)[0][0]
            self.controls.move_coordinator(group, node=leader)
            since = time.monotonic()
            self.controls.stop_node(leader)
            recovered = recovery_s(clients, since)
            self.controls.start_node(leader)
            return recovered
        if scenario == "shuffle":
            since = time.monotonic()
            self.controls.shuffle_leaders(seed=41)
            return recovery_s(clients, since)
        raise AssertionError(scenario)


class KafkaTarget:
    """A 3-node Apache Kafka cluster: only stop-start is practical (Kafka has no control that moves one
    leader or a coordinator at will); the node stopped is one leading a partition of the topic (never
    node 1, the quorum's controller), and it coordinates the group when it happens to."""

    name = "kafka"

    def __init__(self, kafka) -> None:
        self.kafka = kafka

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def disrupt(self, scenario: str, topic: str, group: str, clients: Workload) -> tuple[float, float]:
        assert scenario == "stop-start", scenario
        led = leaders(self.kafka.node(1).bootstrap, topic)
        node = next(leader for leader, _ in led.values() if leader != 1)
        since = time.monotonic()
        self.kafka.stop_node(node)
        recovered = recovery_s(clients, since)
        self.kafka.start_node(node)
        return recovered


class PostgresTarget:
    """Three `kbroker serve --cluster` nodes over one PostgreSQL (issue 44; tests/integration/
    test_postgres_clients.py): stop-start is a kill -9 of the node leading partition 0 (its lease expires,
    the controller moves its partitions), then the node started again once they moved."""

    name = "kbroker-postgres"

    def __init__(self, nodes: dict) -> None:
        self.nodes = nodes  # node id -> BrokerProcess

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.nodes.values())

    def disrupt(self, scenario: str, topic: str, group: str, clients: Workload) -> tuple[float, float]:
        assert scenario == "stop-start", scenario
        node = leaders(next(iter(self.nodes.values())).bootstrap, topic)[0][0]
        other = next(b for n, b in self.nodes.items() if n != node)
        since = time.monotonic()
        self.nodes[node].kill()
        recovered = recovery_s(clients, since, timeout=90)
        deadline = time.monotonic() + 60
        while {node, -1} & {leader for leader, _ in leaders(other.bootstrap, topic).values()}:
            assert time.monotonic() < deadline, f"node {node}'s partitions did not move"
            time.sleep(0.1)
        self.nodes[node].start()
        return recovered


def run(target, make_workload, scenario: str, capsys) -> dict:
    """One scenario with one client against one target; its outcome verified; the report's row."""
    topic, group = f"fo-{scenario}-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(target.bootstrap, topic, PARTITIONS)
    for address in target.bootstrap.split(","):  # every node knows the topic before a client asks
        deadline = time.monotonic() + 30
        while not (len(led := leaders(address, topic)) == PARTITIONS and all(p[0] >= 0 for p in led.values())):
            assert time.monotonic() < deadline, f"{address} does not know {topic}"
            time.sleep(0.1)
    clients = make_workload(target.bootstrap, topic, group)
    clients.start()
    try:
        deadline = time.monotonic() + 60
        while len(clients.consumed) < 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert clients.consumed, f"nothing consumed before the disruption: {clients.errors[:5]}"
        produce_s, consume_s = target.disrupt(scenario, topic, group, clients)
        time.sleep(2)
    finally:
        clients.stop()
    row = {"broker": target.name, "client": clients.name, "scenario": scenario, "acked": len(clients.acked),
           "consumed": len(clients.consumed), "producer_s": produce_s, "consumer_s": consume_s,
           "errors": errors_seen(clients)}
    with capsys.disabled():
        print(f"\n[cluster {target.name} {clients.name} {scenario}] acked={row['acked']} consumed={row['consumed']} "
              f"producer recovered in {produce_s} s, consumer in {consume_s} s; errors seen: {row['errors']}")
    verify(target.bootstrap, topic, group, clients)
    return row


def verify(bootstrap: str, topic: str, group: str, clients: Workload) -> None:
    log = read_all(bootstrap, topic)
    assert clients.acked, "nothing was acknowledged"
    assert len(log) == len(set(log)), "a record is in the log twice (the idempotent producer's retry)"
    lost = sorted(clients.acked - set(log))
    assert not lost, f"{len(lost)} acknowledged record(s) lost: {lost[:10]} (log holds {len(log)})"
    assert set(clients.consumed) == set(log), (
        f"the group did not consume every record ({len(set(log) - set(clients.consumed))} missing)")
    # the committed offsets survive: the group, asked again, has nothing left to read
    from confluent_kafka import Consumer, TopicPartition

    again = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        committed = again.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
        ends = {p: again.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        again.close()


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                       "enable.auto.commit": False, "log_level": 0})
    try:
        ends = {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
        return out
    finally:
        reader.close()
