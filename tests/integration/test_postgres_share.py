"""Share groups on three `kbroker serve --cluster` nodes over one real PostgreSQL (issues 42, 44): the
share coordinator's `__share_group_state` partitions follow their leadership as `__consumer_offsets`
does (loaded on the node elected, unloaded where it resigned), FindCoordinator's key type SHARE answers
the leader on every node, and a kill -9 of the node leading a share-partition's data partition and its
state partition keeps what was acknowledged and gives back what was acquired; a pause of that node
past its lease moves both away and the preferred-leader check brings them back, served from the state
the other node wrote (not from what the paused node held); three franz-go share
consumers acknowledge every record exactly once there, and kafka-share-groups.sh --describe, given every
node, shows the share-partition with nothing left to deliver.

A share-partition whose `__share_group_state` partition another node leads reaches its state through
the state RPCs to that node (share_persister.py): served, and a kill -9 of the state's leader loses
nothing acknowledged (`test_state_led_elsewhere_survives_a_kill_of_its_leader`), and a deposed data
leader's epoch is fenced there (`test_a_deposed_data_leaders_writes_are_fenced_by_its_leader_epoch`);
the first test picks a group whose state partition is led, and failed over, with the data partition."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer

from kbroker.broker.coordinators.share_state import kafka_uuid
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.share_acknowledge_request import AcknowledgementBatch as AcknowledgeBatch
from kbroker.protocol.messages.share_acknowledge_request import (AcknowledgePartition, AcknowledgeTopic,
                                                                 ShareAcknowledgeRequest)
from kbroker.protocol.messages.share_fetch_request import (AcknowledgementBatch, FetchPartition, FetchTopic,
                                                           ShareFetchRequest)
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.cluster_scenarios import create_topic
from kbroker.tests.integration.test_postgres_nodes import NODES, metadata, running_nodes, wait_for

ACCEPT, RELEASE, REJECT = 1, 2, 3
SHARE = 2
STATE_PARTITIONS = 50


@contextmanager
def share_nodes(url: str, base, *extra: str) -> Iterator[dict[int, BrokerProcess]]:
    """The three nodes, each with its metrics on a port of its own (`admin_url`)."""
    ports = {node: free_port() for node in NODES}
    with running_nodes(url, base, *extra, per_node=lambda node: ("--metrics-listen", f"127.0.0.1:{ports[node]}")) as started:
        for node, broker in started.items():
            broker.admin_url = f"http://127.0.0.1:{ports[node]}"
        yield started


def loaded_state_partitions(broker: BrokerProcess) -> int:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "kbroker_share_state_partitions_loaded":
            return int(family.samples[0].value)
    return 0


def find(broker: BrokerProcess, key: str, key_type: int) -> tuple[int, int]:
    """(error, node) of FindCoordinator v6 for one key."""
    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap)
    try:
        found = wire.call(10, 6, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])).coordinators[0]
        return found.error_code, found.node_id
    finally:
        wire.close()


def placement(postgres, database: str, topic: str, partition: int) -> tuple[int, list[int]]:
    """(leader, replicas) of a partition as the database holds them."""
    row = postgres.psql(f"SELECT leader, replicas FROM partitions WHERE topic = '{topic}' AND partition = {partition}",
                        database=database).strip()
    leader, replicas = row.split("|")
    return int(leader), [int(r) for r in replicas.strip("{}").split(",")]


def co_located_group(postgres, database: str, nodes: dict[int, BrokerProcess], topic_id: uuid.UUID, leader: int,
                     successor: int) -> tuple[str, str]:
    """A group (and its share key for partition 0) whose share-partition's state is led, and would fail
    over, with the data partition (led by `leader`, then `successor`); every node answers its
    FindCoordinator alike, as the database places its partition."""
    for i in range(500):
        group = f"pgsg-{i}-{uuid.uuid4().hex[:4]}"
        key = f"{group}:{kafka_uuid(topic_id)}:0"
        answers = {find(b, key, SHARE) for b in nodes.values()}
        assert len(answers) == 1, answers  # every node agrees
        error, state_leader = answers.pop()
        assert error == E.NONE
        in_database, state_replicas = placement(postgres, database, "__share_group_state", _partition_of(key))
        assert in_database == state_leader
        if state_leader == leader and next(r for r in state_replicas if r != leader) == successor:
            return group, key
    pytest.fail("no group's state partition is placed with the data partition")


def topic_led_by_one(nodes: dict[int, BrokerProcess], postgres, database: str) -> tuple[str, uuid.UUID, int, int]:
    """A topic of one partition that every node knows, and the share state topic: (name, id, leader,
    the replica it fails over to)."""
    topic = f"pgs-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, topic, 1)
    wait_for(lambda: all(metadata(b, [topic]).topics[0].partitions and
                         metadata(b, [topic]).topics[0].partitions[0].leader_id >= 0 for b in nodes.values()),
             "every node knows the topic's leader")
    topic_id = metadata(nodes[1], [topic]).topics[0].topic_id
    wait_for(lambda: all(find(b, f"probe:{kafka_uuid(topic_id)}:0", SHARE)[0] == E.NONE for b in nodes.values()),
             "the share state topic")
    leader, replicas = placement(postgres, database, topic, 0)
    return topic, topic_id, leader, next(r for r in replicas if r != leader)


class ShareMember:
    """A share group member: heartbeats to the group's coordinator, fetches from the partition's leader."""

    def __init__(self, nodes: dict[int, BrokerProcess], group: str, topic: str, topic_id: uuid.UUID) -> None:
        from kbroker.tests.integration.wire import Wire

        self.group, self.topic_id, self.id, self.epoch = group, topic_id, str(uuid.uuid4()), 0
        live = list(nodes.values())
        deadline = time.monotonic() + 60
        while True:  # the coordinator found, and loaded (COORDINATOR_LOAD_IN_PROGRESS meanwhile)
            error, node = find(live[0], group, 0)
            if error == E.NONE and node in nodes:
                coordinator = Wire(nodes[node].bootstrap)
                joined = coordinator.call(76, 1, ShareGroupHeartbeatRequest(
                    group_id=group, member_id=self.id, member_epoch=0, rack_id=None, subscribed_topic_names=[topic]))
                coordinator.close()
                if joined.error_code == E.NONE:
                    break
            assert time.monotonic() < deadline, f"no share group coordinator for {group}"
            time.sleep(0.2)
        self.wire: Wire | None = None
        self.nodes = nodes

    def at(self, broker: BrokerProcess) -> ShareMember:
        from kbroker.tests.integration.wire import Wire

        self.wire = Wire(broker.bootstrap, client_id="pg-share")
        return self

    def fetch(self, acks=(), max_wait_ms=0, max_records=100):
        batches = [AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=list(t)) for f, last, t in acks]
        assert self.wire is not None
        response = self.wire.call(78, 1, ShareFetchRequest(
            group_id=self.group, member_id=self.id, share_session_epoch=self.epoch, max_wait_ms=max_wait_ms,
            min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
            topics=[FetchTopic(topic_id=self.topic_id, partitions=[FetchPartition(
                partition_index=0, acknowledgement_batches=batches)])], forgotten_topics_data=[]))
        if response.error_code == E.NONE:
            self.epoch += 1
        return response

    def acknowledge(self, acks) -> list[int]:
        assert self.wire is not None
        response = self.wire.call(79, 1, ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.id, share_session_epoch=self.epoch,
            topics=[AcknowledgeTopic(topic_id=self.topic_id, partitions=[AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[
                    AcknowledgeBatch(first_offset=f, last_offset=last, acknowledge_types=list(t))
                    for f, last, t in acks])])]))
        if response.error_code == E.NONE:
            self.epoch += 1
        return [p.error_code for t in response.responses for p in t.partitions]


def acquired(response) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


def partition_errors(response) -> list[int]:
    return [p.error_code for t in response.responses for p in t.partitions]


def fetched_when_served(member: ShareMember, max_records: int) -> list[tuple[int, int, int]]:
    """The first fetch whose share-partition is served (COORDINATOR_NOT_AVAILABLE while its state
    partition loads on the new leader, as Kafka's persister errors are answered)."""
    deadline = time.monotonic() + 60
    while True:
        response = member.fetch(max_records=max_records, max_wait_ms=1000)
        errors = partition_errors(response)
        if response.error_code == E.NONE and errors in ([], [E.NONE]) and acquired(response):
            return acquired(response)
        assert time.monotonic() < deadline, (response.error_code, errors)
        time.sleep(0.2)


def test_share_state_follows_its_partition_and_survives_a_kill_of_its_leader(postgres, tmp_path):
    database = postgres.create_database()
    with share_nodes(postgres.url(database), tmp_path) as nodes:
        # The first share key looked up makes __share_group_state; then every node answers alike, the
        # leader of the key's partition, and each node's share coordinator loads just what it leads.
        topic, topic_id, leader, successor = topic_led_by_one(nodes, postgres, database)
        led = {n: int(postgres.psql("SELECT count(*) FROM partitions WHERE topic = '__share_group_state' "
                                    f"AND leader = {n}", database=database)) for n in NODES}
        assert sum(led.values()) == STATE_PARTITIONS
        wait_for(lambda: {n: loaded_state_partitions(b) for n, b in nodes.items()} == led,
                 "each node loads the state partitions it leads")

        group, key = co_located_group(postgres, database, nodes, topic_id, leader, successor)

        # A group whose share-partition's state another node leads: served here, its state read and
        # written through the state RPCs to that node (COORDINATOR_NOT_AVAILABLE before they were built)
        elsewhere = next(g for g in (f"pgse-{i}" for i in range(500))
                         if find(nodes[1], f"{g}:{kafka_uuid(topic_id)}:0", SHARE)[1] != leader)
        away = ShareMember(nodes, elsewhere, topic, topic_id).at(nodes[leader])
        assert partition_errors(away.fetch()) == [E.NONE]
        assert nodes[leader].events("share_state_read_failed") == []

        member = ShareMember(nodes, group, topic, topic_id).at(nodes[leader])
        assert partition_errors(member.fetch()) == [E.NONE]  # starts at the (empty) log's end, persisted
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                             "linger.ms": 0})
        for i in range(12):  # a batch each (a fetch acquires whole batches)
            producer.produce(topic, f"v{i}".encode(), partition=0)
            assert producer.flush(30) == 0
        assert fetched_when_served(member, 8) == [(0, 7, 1)]
        # accept 0-2, reject 3, release 4: answered, so durable; 5-7 stay acquired, 8-11 never delivered
        assert member.acknowledge([(0, 4, [ACCEPT, ACCEPT, ACCEPT, REJECT, RELEASE])]) == [E.NONE]

        nodes[leader].kill()
        survivors = {n: b for n, b in nodes.items() if n != leader}
        wait_for(lambda: all(metadata(b, [topic]).topics[0].partitions[0].leader_id == successor
                             for b in survivors.values()), "the data partition moved")
        wait_for(lambda: all(find(b, key, SHARE) == (E.NONE, successor) for b in survivors.values()),
                 "the share state partition moved with it")
        wait_for(lambda: sum(loaded_state_partitions(b) for b in survivors.values()) == STATE_PARTITIONS,
                 "the survivors load every state partition")

        again = ShareMember(survivors, group, topic, topic_id).at(survivors[successor])
        got = fetched_when_served(again, 100)
        offsets = sorted(o for first, last, _ in got for o in range(first, last + 1))
        assert offsets == list(range(4, 12)), got  # nothing acknowledged or rejected comes back
        counts = {o: count for first, last, count in got for o in range(first, last + 1)}
        assert counts[4] == 2 and all(counts[o] == 1 for o in range(8, 12)), got
        assert again.acknowledge([(4, 11, [ACCEPT])]) == [E.NONE]
        assert acquired(again.fetch(max_wait_ms=200)) == []
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in survivors.values())})
        producer.produce(topic, b"v12", partition=0)
        assert producer.flush(30) == 0
        assert fetched_when_served(again, 100) == [(12, 12, 1)]


def _partition_of(key: str) -> int:
    from kbroker.broker.coordinators.share_state import kafka_partition_for

    return kafka_partition_for(key, STATE_PARTITIONS)


def set_earliest(nodes: dict[int, BrokerProcess], group: str) -> None:
    """share.auto.offset.reset=earliest on every node: a node keeps group configs in its data directory."""
    from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                             IncrementalAlterConfigsRequest)
    from kbroker.tests.integration.wire import Wire

    for broker in nodes.values():
        wire = Wire(broker.bootstrap)
        answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))
        wire.close()
        assert answer.responses[0].error_code == 0


def test_franz_share_consumers_and_kafka_share_groups_on_the_cluster(postgres, tmp_path):
    """Three franz-go share consumers of one group acknowledge every record exactly once on a topic
    whose partitions' leaders are spread over the three nodes (most share-partitions' states led by
    another node than their data: reached through the state RPCs), and kafka-share-groups.sh
    --describe, given any one node, shows every share-partition's offsets (those whose states other
    nodes serve asked of them with ReadShareGroupStateSummary) with nothing left to deliver."""
    from kbroker.tests.integration.test_postgres_clients import tool
    from kbroker.tests.integration.test_share_franz import acknowledged_once
    from kbroker.tests.reference.client_matrix import go_binary, require_go

    require_go()
    binary = go_binary("franz")
    partitions, records = 6, 60
    database = postgres.create_database()
    with share_nodes(postgres.url(database), tmp_path) as nodes:
        topic, group = f"pgf-{uuid.uuid4().hex[:6]}", f"pgfg-{uuid.uuid4().hex[:6]}"
        create_topic(nodes[1].bootstrap, topic, partitions)
        wait_for(lambda: all(len(metadata(b, [topic]).topics[0].partitions) == partitions and
                             all(p.leader_id >= 0 for p in metadata(b, [topic]).topics[0].partitions)
                             for b in nodes.values()), "every node knows the topic's leaders")
        topic_id = metadata(nodes[1], [topic]).topics[0].topic_id
        wait_for(lambda: find(nodes[1], f"probe:{kafka_uuid(topic_id)}:0", SHARE)[0] == E.NONE, "the share state topic")
        data_leaders = [placement(postgres, database, topic, p)[0] for p in range(partitions)]
        state_leaders = [find(nodes[1], f"{group}:{kafka_uuid(topic_id)}:{p}", SHARE)[1] for p in range(partitions)]
        assert set(data_leaders) == set(NODES)  # spread over every node
        assert any(d != s for d, s in zip(data_leaders, state_leaders)), (data_leaders, state_leaders)
        set_earliest(nodes, group)
        servers = ",".join(b.bootstrap for b in nodes.values())
        producer = Producer({"bootstrap.servers": servers, "acks": "all"})
        for i in range(records):
            producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
        assert producer.flush(30) == 0

        acknowledged_once(binary, nodes[2].bootstrap, topic, group, records)

        # GROUP TOPIC PARTITION START-OFFSET LAG for every partition, nothing left to deliver, through
        # each node (the start shown is the persisted one, a write behind as in Kafka: docs/share-groups.md)
        rows = [re.compile(rf"^{group}\s+{topic}\s+{p}\s+\d+\s+0\s*$", re.MULTILINE) for p in range(partitions)]
        for broker in nodes.values():
            deadline = time.monotonic() + 60
            while not all(row.search(table := tool("consumer.group.ShareGroupCommand", "--bootstrap-server",
                                                   broker.bootstrap, "--describe", "--group", group)) for row in rows):
                assert time.monotonic() < deadline, table
                time.sleep(1)


def create_led_by(address: str, name: str, replicas: list[int], configs: dict[str, str] | None = None) -> uuid.UUID:
    """A topic of one partition with these replicas, the first its leader (CreateTopics v7)."""
    from kbroker.protocol.messages.create_topics_request import (CreatableReplicaAssignment, CreatableTopic,
                                                                 CreatableTopicConfig, CreateTopicsRequest)
    from kbroker.tests.integration.wire import Wire

    wire = Wire(address)
    try:
        answer = wire.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1, assignments=[CreatableReplicaAssignment(0, replicas)],
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
            timeout_ms=10_000, validate_only=False)).topics[0]
        assert answer.error_code == 0, answer.error_message
        return answer.topic_id
    finally:
        wire.close()


def test_a_paused_leaders_share_partitions_move_away_and_back_from_their_persisted_state(postgres, tmp_path):
    """SIGSTOP the node leading a share-partition's data and state partitions past its lease: both move
    and the member's acquired records come back there; SIGCONT: the preferred-leader check brings both
    back, and the node serves the share-partition from the state written meanwhile, not from what it
    held before the pause (it dropped that when the data partition moved)."""
    import signal

    database = postgres.create_database()
    with share_nodes(postgres.url(database), tmp_path, "--leader-imbalance-check-interval-seconds", "1") as nodes:
        topic, topic_id, leader, successor = topic_led_by_one(nodes, postgres, database)
        group, key = co_located_group(postgres, database, nodes, topic_id, leader, successor)
        first = ShareMember(nodes, group, topic, topic_id).at(nodes[leader])
        assert partition_errors(first.fetch()) == [E.NONE]
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                             "linger.ms": 0})
        for i in range(12):  # a batch each
            producer.produce(topic, f"v{i}".encode(), partition=0)
            assert producer.flush(30) == 0
        assert fetched_when_served(first, 8) == [(0, 7, 1)]
        assert first.acknowledge([(0, 3, [ACCEPT, ACCEPT, ACCEPT, REJECT])]) == [E.NONE]  # 4-7 stay acquired

        survivors = {n: b for n, b in nodes.items() if n != leader}
        nodes[leader].proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: all(find(b, key, SHARE) == (E.NONE, successor) and
                                 metadata(b, [topic]).topics[0].partitions[0].leader_id == successor
                                 for b in survivors.values()), "both partitions move from the paused node")
            second = ShareMember(survivors, group, topic, topic_id).at(survivors[successor])
            assert fetched_when_served(second, 100) == [(4, 7, 2), (8, 11, 1)]  # the paused member's come back
            assert second.acknowledge([(4, 7, [ACCEPT])]) == [E.NONE]  # 8-11 stay acquired
        finally:
            nodes[leader].proc.send_signal(signal.SIGCONT)
        wait_for(lambda: all(find(b, key, SHARE) == (E.NONE, leader) and
                             metadata(b, [topic]).topics[0].partitions[0].leader_id == leader
                             for b in nodes.values()), "both partitions back on their preferred leader")
        third = ShareMember(nodes, group, topic, topic_id).at(nodes[leader])
        # 0-7 done; 8-11 delivered a second time, as the state the other node wrote has them (the paused
        # node's own picture, 4-7 acquired and 8-11 never delivered, is gone)
        assert fetched_when_served(third, 100) == [(8, 11, 2)]


def read_state(broker: BrokerProcess, group: str, topic_id: uuid.UUID):
    """ReadShareGroupState of partition 0's key, asked of `broker` (no leader epoch: not fenced)."""
    from kbroker.tests.integration.test_share_state_rpcs import read
    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap)
    try:
        return read(wire, topic_id, 0, group=group)
    finally:
        wire.close()


def states_by_offset(answer) -> dict[int, tuple[int, int]]:
    return {o: (b.delivery_state, b.delivery_count) for b in answer.state_batches
            for o in range(b.first_offset, b.last_offset + 1)}


def test_state_led_elsewhere_survives_a_kill_of_its_leader(postgres, tmp_path):
    """The data partition's leader serves a share-partition whose state partition another node leads:
    each acknowledgement is answered once that node made it durable (read back there with
    ReadShareGroupState); kill -9 of that node: its state partition moves, the persister's writes go to
    the new leader (retried meanwhile), which replayed every acknowledgement; what was acknowledged
    never comes back, what was acquired does."""
    database = postgres.create_database()
    with share_nodes(postgres.url(database), tmp_path) as nodes:
        topic, topic_id, leader, _ = topic_led_by_one(nodes, postgres, database)
        group = state_leader = key = None
        for i in range(500):
            group, key = f"pgre-{i}", f"pgre-{i}:{kafka_uuid(topic_id)}:0"
            state_leader = find(nodes[1], key, SHARE)[1]
            if state_leader != leader:
                break
        member = ShareMember(nodes, group, topic, topic_id).at(nodes[leader])
        assert partition_errors(member.fetch()) == [E.NONE]  # its start, read and written over there
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                             "linger.ms": 0})
        for i in range(12):  # a batch each
            producer.produce(topic, f"v{i}".encode(), partition=0)
            assert producer.flush(30) == 0
        assert fetched_when_served(member, 8) == [(0, 7, 1)]
        assert member.acknowledge([(0, 4, [ACCEPT, ACCEPT, ACCEPT, REJECT, RELEASE])]) == [E.NONE]
        there = read_state(nodes[state_leader], group, topic_id)
        done = states_by_offset(there)  # durable there: 0-2 acknowledged, 3 archived, 4 available again
        assert there.error_code == E.NONE and [done.get(o) for o in range(5)] == [(2, 1)] * 3 + [(4, 1), (0, 1)], there

        nodes[state_leader].kill()
        survivors = {n: b for n, b in nodes.items() if n != state_leader}
        wait_for(lambda: all(find(b, key, SHARE)[0] == E.NONE and find(b, key, SHARE)[1] != state_leader
                             for b in survivors.values()), "the share state partition moved")
        assert member.acknowledge([(5, 6, [ACCEPT])]) == [E.NONE]  # to the new state leader
        moved = find(survivors[leader], key, SHARE)[1]
        replayed = read_state(survivors[moved], group, topic_id)
        replayed_states = states_by_offset(replayed)
        # below the start (moved past 0-3, all done), then 4 available, 5-6 acknowledged
        assert replayed.start_offset == 4 and [replayed_states.get(o) for o in (4, 5, 6)] == [(0, 1), (2, 1), (2, 1)]
        assert member.wire is not None
        member.wire.close()  # its session ends: 7 goes back
        again = ShareMember(survivors, group, topic, topic_id).at(survivors[leader])
        got = fetched_when_served(again, 100)
        offsets = sorted(o for first, last, _ in got for o in range(first, last + 1))
        assert offsets == [4, 7, 8, 9, 10, 11], got  # nothing acknowledged or rejected comes back


def test_a_deposed_data_leaders_writes_are_fenced_by_its_leader_epoch(postgres, tmp_path):
    """A share-partition whose state a third node serves: its data leader paused past its lease, the
    data partition moves (a new leader epoch) and the new leader reads the state there with that
    epoch and writes with it; the paused leader's epoch is refused from then on (FENCED_LEADER_EPOCH),
    so its late writes cannot overwrite its successor's state, and once it runs again nothing the new
    leader's member acknowledged comes back."""
    import signal

    from kbroker.tests.integration.test_share_state_rpcs import summary, write
    from kbroker.tests.integration.wire import Wire

    database = postgres.create_database()
    with share_nodes(postgres.url(database), tmp_path) as nodes:
        topic, topic_id, leader, successor = topic_led_by_one(nodes, postgres, database)
        third = next(n for n in NODES if n not in (leader, successor))
        group = next(g for g in (f"pgfe-{i}" for i in range(500))
                     if find(nodes[1], f"{g}:{kafka_uuid(topic_id)}:0", SHARE) == (E.NONE, third))
        first = ShareMember(nodes, group, topic, topic_id).at(nodes[leader])
        assert partition_errors(first.fetch()) == [E.NONE]
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                             "linger.ms": 0})
        for i in range(12):  # a batch each
            producer.produce(topic, f"v{i}".encode(), partition=0)
            assert producer.flush(30) == 0
        assert fetched_when_served(first, 8) == [(0, 7, 1)]
        assert first.acknowledge([(0, 1, [ACCEPT])]) == [E.NONE]  # 2-7 stay acquired by the paused leader's member

        survivors = {n: b for n, b in nodes.items() if n != leader}
        nodes[leader].proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: all(metadata(b, [topic]).topics[0].partitions[0].leader_id == successor
                                 for b in survivors.values()), "the data partition moves from the paused node")
            epoch = metadata(survivors[successor], [topic]).topics[0].partitions[0].leader_epoch
            assert epoch > 0
            second = ShareMember(survivors, group, topic, topic_id).at(survivors[successor])
            assert fetched_when_served(second, 100) == [(2, 7, 2), (8, 11, 1)]
            assert second.acknowledge([(2, 11, [ACCEPT])]) == [E.NONE]
            wire = Wire(nodes[third].bootstrap)
            try:
                described = summary(wire, topic_id, 0, group=group)
                assert (described.leader_epoch, described.delivery_complete_count) == (epoch, 12), described
                # what the paused leader's persister would send: its older epoch, refused, nothing written
                late = write(wire, topic_id, 0, -1, epoch - 1, 0, [(2, 7, 0, 1)], group=group)
                assert late.error_code == E.FENCED_LEADER_EPOCH
            finally:
                wire.close()
        finally:
            nodes[leader].proc.send_signal(signal.SIGCONT)
        assert first.wire is not None
        first.wire.close()  # the paused node's member goes: what it held there is released, never written over
        wait_for(lambda: metadata(nodes[leader], [topic]).topics[0].partitions[0].leader_id == successor,
                 "the resumed node sees the data partition moved")
        after = read_state(nodes[third], group, topic_id)
        states = states_by_offset(after)
        assert after.error_code == E.NONE and all(states.get(o, (2, 0))[0] == 2 for o in range(12)), after
