"""Three kbroker processes over one real PostgreSQL (`kbroker serve --cluster URL --node-id N`, issue 44):
every node answers Metadata and FindCoordinator alike; an idempotent acks=all producer and a consumer
group (confluent-kafka) ride through a kill -9 of the node that leads a partition and coordinates the
group, a leader stopped (SIGSTOP) past its lease, PostgreSQL crashing and coming back, and a rolling
restart with SIGTERM: no
acknowledged record lost or duplicated, every record consumed, committed offsets kept, the recovery
time printed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest

from kbroker.coordinator.partitioning import partition_for
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.cluster_scenarios import (PARTITIONS, ConfluentWorkload, create_topic, errors_seen,
                                                         leaders, recovery_s, verify)
from kbroker.tests.integration.wire import Wire

NODES = (1, 2, 3)
WAIT_S = 60


@pytest.fixture
def nodes(postgres, tmp_path):
    with running_nodes(postgres.url(postgres.create_database()), tmp_path) as started:
        yield started


@contextmanager
def running_nodes(url: str, base, *extra: str,
                  per_node: Callable[[int], Sequence[str]] = lambda _node: ()) -> Iterator[dict[int, BrokerProcess]]:
    """The three nodes over the database at `url` (data directories under `base`; `extra`: more
    arguments of `kbroker serve`, `per_node`: a node's own), once every node sees the three; killed at
    the end."""
    started: dict[int, BrokerProcess] = {}
    try:
        for node in NODES:
            started[node] = start_node(base / f"node{node}", url, node, *extra, *per_node(node))
        wait_for(lambda: all(len(metadata(b).brokers) == len(NODES) for b in started.values()),
                 "every node sees the three brokers")
        yield started
    finally:
        for broker in started.values():
            broker.kill()


def start_node(data_dir, url: str, node: int, *extra: str) -> BrokerProcess:
    """A node on a free port; another, if a process of another session took that port meanwhile."""
    for attempt in range(3):
        try:
            return BrokerProcess(data_dir, "--cluster", url, "--node-id", str(node), *extra)
        except RuntimeError as e:
            if "is already in use" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def wait_for(condition, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def metadata(broker: BrokerProcess, topics: list[str] | None = None):
    from kbroker.protocol.messages.metadata_request import MetadataRequestTopic

    wire = Wire(broker.bootstrap)
    try:
        request = MetadataRequest(topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False)
        return wire.call(3, 12, request)
    finally:
        wire.sock.close()


def view(broker: BrokerProcess, topic: str):
    answer = metadata(broker, [topic])
    parts = sorted((p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes))
                   for t in answer.topics for p in t.partitions)
    return (answer.controller_id, sorted((b.node_id, b.host, b.port) for b in answer.brokers), parts)


def topic_on_every_node(nodes: dict[int, BrokerProcess], prefix: str) -> tuple[str, str, str]:
    """A new topic of PARTITIONS partitions (RF 3) that every node knows with its leaders, and a new group
    id: (the bootstrap servers, the topic, the group)."""
    topic, group = f"{prefix}-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, topic, PARTITIONS)
    for broker in nodes.values():
        wait_for(lambda: len(led := leaders(broker.bootstrap, topic)) == PARTITIONS
                 and all(p[0] >= 0 for p in led.values()), f"{broker.bootstrap} knows {topic}")
    return ",".join(b.bootstrap for b in nodes.values()), topic, group


def test_every_node_answers_metadata_and_find_coordinator_alike(nodes):
    first = nodes[1]
    create_topic(first.bootstrap, "shared", 6)
    wait_for(lambda: all(len(view(b, "shared")[2]) == 6 for b in nodes.values()), "every node knows the topic")
    views = {node: view(broker, "shared") for node, broker in nodes.items()}
    assert len({repr(v) for v in views.values()}) == 1, views
    controller, brokers, parts = views[1]
    assert controller in NODES
    assert [(n, port) for n, _, port in brokers] == [(n, nodes[n].port) for n in NODES]
    assert {leader for _, leader, _, _ in parts} == set(NODES)  # striped over the three nodes
    assert all(len(replicas) == 3 and replicas[0] == leader for _, leader, _, replicas in parts)
    offsets = {p: leader for p, leader, _, _ in view(first, "__consumer_offsets")[2]}
    assert len(offsets) == 50
    for group in ("alpha", "beta", "gamma", "delta"):
        leader = offsets[partition_for(group, 50)]
        for broker in nodes.values():
            wire = Wire(broker.bootstrap)
            try:
                found = wire.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
            finally:
                wire.sock.close()
            assert (found.error_code, found.node_id, found.port) == (0, leader, nodes[leader].port)


def test_metadata_changes_reach_every_node_when_notified_without_waiting_for_the_poll(postgres, tmp_path, capsys):
    """With the poll set to ten minutes, the nodes learn of each other's registration, of a topic created
    on one of them, and of the leaders the controller moved after a kill -9, from the database's
    notifications (LISTEN/NOTIFY) alone."""
    url = postgres.url(postgres.create_database())
    with running_nodes(url, tmp_path, "--cluster-poll-ms", "600000") as started:
        topic = f"notified-{uuid.uuid4().hex[:6]}"
        create_topic(started[1].bootstrap, topic, PARTITIONS)
        wait_for(lambda: all(len(led := leaders(b.bootstrap, topic)) == PARTITIONS and all(p[0] >= 0 for p in led.values())
                             for b in started.values()), "every node knows the topic and its leaders")
        before = {p: (leader, epoch) for p, leader, epoch, _ in view(started[1], topic)[2]}
        victim = before[0][0]
        started[victim].kill()
        killed = time.monotonic()
        others = [b for n, b in started.items() if n != victim]

        def moved(broker: BrokerProcess) -> bool:
            now = {p: (leader, epoch) for p, leader, epoch, _ in view(broker, topic)[2]}
            return all(now[p][0] not in (victim, -1) and now[p][1] == epoch + 1
                       for p, (leader, epoch) in before.items() if leader == victim)

        wait_for(lambda: all(moved(b) for b in others), "both other nodes see the new leaders")
        took_s = round(time.monotonic() - killed, 2)
        assert len({repr(view(b, topic)) for b in others}) == 1
    with capsys.disabled():
        print(f"\n[postgres cluster, poll every 600 s] the leaders moved after a kill -9 reached both other nodes "
              f"in {took_s} s (the lease is 5 s)")


@pytest.mark.parametrize("client", ["confluent-kafka", "franz-go", "java"])
def test_a_kill_of_the_leader_and_coordinator_loses_and_repeats_nothing(nodes, client, tmp_path, capsys):
    bootstrap, topic, group = topic_on_every_node(nodes, "fo")
    coordinator = {p: leader for p, leader, _, _ in view(nodes[1], "__consumer_offsets")[2]}[partition_for(group, 50)]
    assert coordinator in {leader for leader, _ in leaders(nodes[1].bootstrap, topic).values()}
    if client == "confluent-kafka":
        clients = ConfluentWorkload(bootstrap, topic, group)
    else:  # the failover programs of the cluster's client tests (tests/clients/...)
        from kbroker.tests.integration.test_cluster_clients import workload_factory

        clients = workload_factory(client, tmp_path)(bootstrap, topic, group)
    clients.start()
    try:
        wait_for(lambda: len(clients.consumed) >= 200, "the group consumes before the kill", timeout=120)
        killed = time.monotonic()
        nodes[coordinator].kill()
        survivor = next(b for n, b in nodes.items() if n != coordinator)
        wait_for(lambda: not {coordinator, -1} & {leader for leader, _ in leaders(survivor.bootstrap, topic).values()},
                 "the killed node's partitions move")  # (-1 meanwhile: its lease expired, not yet moved)
        moved_s = round(time.monotonic() - killed, 2)
        produce_s, consume_s = recovery_s(clients, killed + moved_s, timeout=90)
        time.sleep(2)
    finally:
        clients.stop()
    with capsys.disabled():
        print(f"\n[postgres cluster, {client}, kill -9 of node {coordinator}] partitions moved after {moved_s} s; "
              f"acked={len(clients.acked)} consumed={len(clients.consumed)}; then the producer made progress in "
              f"{produce_s} s, the consumer in {consume_s} s; errors seen: {errors_seen(clients)}")
    alive = ",".join(b.bootstrap for n, b in nodes.items() if n != coordinator)
    verify(alive, topic, group, clients)


def test_a_leader_stopped_past_its_lease_is_fenced_and_the_log_has_no_gap_or_overlap(nodes, postgres, capsys):
    """SIGSTOP the leader of a partition (and of the group's coordinator) past its lease: its partitions
    move; SIGCONT: whatever it had in flight is refused by the database, nothing acknowledged is lost
    or repeated, and the stored batches of every partition follow each other exactly."""
    import signal

    from kbroker.tests.integration.test_postgres_log import audit_database

    bootstrap, topic, group = topic_on_every_node(nodes, "zombie")
    zombie = leaders(nodes[1].bootstrap, topic)[0][0]
    survivor = next(b for n, b in nodes.items() if n != zombie)
    clients = ConfluentWorkload(bootstrap, topic, group)
    clients.start()
    try:
        wait_for(lambda: len(clients.consumed) >= 200, "the group consumes before the stop")
        stopped = time.monotonic()
        nodes[zombie].proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: not {zombie, -1} & {leader for leader, _ in leaders(survivor.bootstrap, topic).values()},
                     "the stopped leader's partitions move")  # not -1 alone: moved before it resumes
            moved_s = round(time.monotonic() - stopped, 2)
        finally:
            nodes[zombie].proc.send_signal(signal.SIGCONT)
        produce_s, consume_s = recovery_s(clients, stopped, timeout=90)
        time.sleep(3)  # the zombie's rounds in flight meet the database's fence; it learns the new leaders
    finally:
        clients.stop()
    fenced = nodes[zombie].events("append_fenced")
    with capsys.disabled():
        print(f"\n[postgres cluster, confluent-kafka, SIGSTOP of node {zombie}] partitions moved after {moved_s} s; "
              f"acked={len(clients.acked)} consumed={len(clients.consumed)}; producer recovered in {produce_s} s, "
              f"consumer in {consume_s} s; rounds fenced on the zombie: {len(fenced)}; errors seen: "
              f"{errors_seen(clients)}")
    verify(bootstrap, topic, group, clients)
    stored = audit_database(nodes_url(nodes[1]), topic, PARTITIONS)
    assert sum(stored.values()) == len(set(clients.acked) | set(clients.consumed)), stored


def test_postgres_crashing_under_load_loses_nothing_acknowledged_and_the_nodes_reconnect(nodes, postgres, capsys):
    """PostgreSQL stopped with -m immediate (a crash: recovery from its WAL at the next start) under the
    producer and the group, and started again a few seconds later on the same port."""
    bootstrap, topic, group = topic_on_every_node(nodes, "pgcrash")
    clients = ConfluentWorkload(bootstrap, topic, group)
    clients.start()
    try:
        wait_for(lambda: len(clients.consumed) >= 200, "the group consumes before the crash")
        acked_before = len(clients.acked)
        crashed = time.monotonic()
        postgres.stop("immediate")
        time.sleep(3)
        postgres.start()
        produce_s, consume_s = recovery_s(clients, crashed, timeout=90)
        time.sleep(2)
    finally:
        clients.stop()
    with capsys.disabled():
        print(f"\n[postgres cluster, confluent-kafka, PostgreSQL -m immediate for 3 s] acked={len(clients.acked)} "
              f"(before the crash {acked_before}) consumed={len(clients.consumed)}; producer recovered in "
              f"{produce_s} s, consumer in {consume_s} s; errors seen: {errors_seen(clients)}")
    assert all(broker.running for broker in nodes.values())
    assert len(clients.acked) > acked_before
    verify(bootstrap, topic, group, clients)


def test_a_rolling_restart_moves_leaderships_first_and_fails_no_produce(nodes, capsys):
    """Each node in turn stopped with SIGTERM (a controlled shutdown: its partitions move before its
    listeners close) and started again, under the producer and the group: no produce fails, nothing
    acknowledged is lost or repeated, every record consumed, offsets kept."""
    bootstrap, topic, group = topic_on_every_node(nodes, "rolling")
    clients = ConfluentWorkload(bootstrap, topic, group)
    clients.start()
    handed_over = []
    try:
        wait_for(lambda: len(clients.consumed) >= 200, "the group consumes before the restarts")
        for node, broker in nodes.items():
            broker.stop()
            handed_over += [e["partitions_left"] for e in broker.events("controlled_shutdown", broker.starts)]
            broker.start()
            others = [b for n, b in nodes.items() if n != node]
            wait_for(lambda: all(len(metadata(b).brokers) == len(NODES) for b in others), f"node {node} is back")
            before = len(clients.consumed)
            wait_for(lambda: len(clients.consumed) > before + 50, f"the group consumes after node {node}'s restart")
        time.sleep(2)
    finally:
        clients.stop()
    with capsys.disabled():
        print(f"\n[postgres cluster, confluent-kafka, rolling restart] acked={len(clients.acked)} "
              f"consumed={len(clients.consumed)}; partitions left on each node at its exit: {handed_over}; "
              f"errors seen: {errors_seen(clients)}")
    assert handed_over == [0, 0, 0]  # every node handed its partitions over before it closed
    assert not [e for e in clients.errors if e.startswith("produce")], clients.errors
    verify(bootstrap, topic, group, clients)


def nodes_url(broker: BrokerProcess) -> str:
    return broker.extra_args[broker.extra_args.index("--cluster") + 1]
