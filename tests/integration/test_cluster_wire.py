"""Several brokers in one process (issue 41): `kbroker serve --nodes 3`, checked on the wire.

Every node answers Metadata and DescribeCluster with the three brokers on the request's listener;
partitions are placed as Kafka places them (round robin: leaders spread, RF up to 3, explicit
assignments honoured); a produce or fetch on a node that does not lead the partition gets
NOT_LEADER_OR_FOLLOWER with KIP-951's leader hint; stale and future epochs are fenced as Kafka
fences them; a group's coordinator is its __consumer_offsets partition's leader, and the other
nodes answer NOT_COORDINATOR; DescribeLogDirs lists each node's replicas. The expected answers
are Kafka 4.4's (KafkaApis, ReplicationControlManager), read from its source.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from kbroker.coordinator.partitioning import partition_for
from kbroker.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kbroker.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kbroker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kbroker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess, free_ports
from kbroker.tests.integration.wire import Wire

NODES = 3
FIRST_ID = 1
NOT_LEADER, FENCED, UNKNOWN_EPOCH, NOT_COORDINATOR = 6, 74, 75, 16


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    port = free_ports(NODES)
    broker = BrokerProcess(tmp_path_factory.mktemp("cluster") / "data", "--nodes", str(NODES), "--profile", "test",
                           port=port)
    wires = [Wire(f"127.0.0.1:{port + k}") for k in range(NODES)]
    yield broker, port, wires
    for wire in wires:
        wire.close()
    broker.stop()


def _metadata(wire: Wire, *topics: str):
    return wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics] or None,
                                            allow_auto_topic_creation=False))


def _create(wire: Wire, topic: CreatableTopic):
    return wire.call(19, 7, CreateTopicsRequest(topics=[topic], timeout_ms=10000)).topics[0]


def _by_id(md) -> dict[int, object]:
    return {p.partition_index: p for p in md.topics[0].partitions}


def test_every_node_answers_with_the_three_brokers_on_its_listener(cluster) -> None:
    _, port, wires = cluster
    expected = [(FIRST_ID + k, "127.0.0.1", port + k) for k in range(NODES)]
    for wire in wires:
        md = _metadata(wire)
        assert sorted((b.node_id, b.host, b.port) for b in md.brokers) == expected
        assert md.controller_id == FIRST_ID
        dc = wire.call(60, 1, DescribeClusterRequest())
        assert sorted((b.broker_id, b.host, b.port) for b in dc.brokers) == expected
        assert dc.controller_id == FIRST_ID


def test_placement_is_kafkas_round_robin_and_honours_assignments(cluster) -> None:
    _, _, wires = cluster
    made = _create(wires[0], CreatableTopic(name="rr", num_partitions=6, replication_factor=3))
    assert (made.error_code, made.num_partitions, made.replication_factor) == (0, 6, 3)
    parts = _by_id(_metadata(wires[1], "rr"))
    leaders = Counter(p.leader_id for p in parts.values())
    assert leaders == {1: 2, 2: 2, 3: 2}  # round robin: each node leads two of six
    for p in parts.values():
        assert sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
        assert p.leader_id == p.replica_nodes[0] and p.leader_epoch == 0 and p.offline_replicas == []
    # RF above the nodes: Kafka's controller message
    too_many = _create(wires[0], CreatableTopic(name="rf4", num_partitions=1, replication_factor=4))
    assert too_many.error_code == 38  # INVALID_REPLICATION_FACTOR
    assert "only 3 broker(s) are registered" in too_many.error_message
    # an explicit assignment is what the partitions get
    explicit = _create(wires[0], CreatableTopic(name="explicit", num_partitions=-1, replication_factor=-1,
                                                assignments=[CreatableReplicaAssignment(0, [3, 1]),
                                                             CreatableReplicaAssignment(1, [2, 3])]))
    assert (explicit.error_code, explicit.replication_factor) == (0, 2)
    parts = _by_id(_metadata(wires[2], "explicit"))
    assert [(p.leader_id, p.replica_nodes) for _, p in sorted(parts.items())] == [(3, [3, 1]), (2, [2, 3])]
    stray = _create(wires[0], CreatableTopic(name="stray", num_partitions=-1, replication_factor=-1,
                                             assignments=[CreatableReplicaAssignment(0, [1, 9])]))
    assert stray.error_code == 39 and "broker 9" in stray.error_message  # INVALID_REPLICA_ASSIGNMENT
    twice = _create(wires[0], CreatableTopic(name="twice", num_partitions=-1, replication_factor=-1,
                                             assignments=[CreatableReplicaAssignment(0, [2, 2])]))
    assert twice.error_code == 39 and "more than once" in twice.error_message
    # CreatePartitions: an explicit assignment for the new partition, the replica count checked
    grown = wires[1].call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic(
        name="explicit", count=3, assignments=[CreatePartitionsAssignment([1, 2])])], timeout_ms=10000))
    assert grown.results[0].error_code == 0, grown.results[0].error_message
    assert _by_id(_metadata(wires[0], "explicit"))[2].replica_nodes == [1, 2]
    short = wires[1].call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic(
        name="explicit", count=4, assignments=[CreatePartitionsAssignment([1])])], timeout_ms=10000))
    assert short.results[0].error_code == 39


def _produce(wire: Wire, topic: str, partition: int, version: int = 11, acks: int = -1):
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    req = ProduceRequest(None, acks, 5000, [TopicProduceData(topic, partition_data=[PartitionProduceData(partition,
                                                                                                        batch)])])
    return wire.call(0, version, req)


def _fetch(wire: Wire, topic: str, partition: int, epoch: int = -1, version: int = 16):
    from kbroker.protocol.messages.metadata_request import MetadataRequest as _  # noqa: F401 - keeps imports tidy

    topic_id = _metadata(wire, topic).topics[0].topic_id
    req = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(
        topic=topic, topic_id=topic_id,
        partitions=[FetchPartition(partition=partition, current_leader_epoch=epoch, fetch_offset=0,
                                   partition_max_bytes=1 << 20)])])
    return wire.call(1, version, req)


def test_produce_and_fetch_on_a_follower_get_the_leader_hint(cluster) -> None:
    _, port, wires = cluster
    _create(wires[0], CreatableTopic(name="hint", num_partitions=3, replication_factor=2))
    parts = _by_id(_metadata(wires[0], "hint"))
    for partition, p in parts.items():
        leader = p.leader_id
        follower = next(n for n in p.replica_nodes if n != leader)
        ok = _produce(wires[leader - FIRST_ID], "hint", partition).responses[0].partition_responses[0]
        assert ok.error_code == 0
        answer = _produce(wires[follower - FIRST_ID], "hint", partition)
        refused = answer.responses[0].partition_responses[0]
        assert refused.error_code == NOT_LEADER
        assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (leader, p.leader_epoch)
        assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [
            (leader, "127.0.0.1", port + leader - FIRST_ID)]
        # a follower serves a consumer's Fetch v11+ (KIP-392, as Kafka 4.4: test_cluster_vs_kafka.py),
        # a node with no replica refuses it with the hint, v10 is refused on the follower too
        assert _fetch(wires[follower - FIRST_ID], "hint", partition).responses[0].partitions[0].error_code == 0
        assert _fetch(wires[follower - FIRST_ID], "hint", partition, version=10).responses[0].partitions[0] \
            .error_code == NOT_LEADER
        outside = next(n for n in (1, 2, 3) if n not in p.replica_nodes)
        fetched = _fetch(wires[outside - FIRST_ID], "hint", partition)
        data = fetched.responses[0].partitions[0]
        assert data.error_code == NOT_LEADER and data.current_leader.leader_id == leader
        assert [e.node_id for e in fetched.node_endpoints] == [leader]
        # on the leader: the epoch checks as Kafka's (older: fenced, newer: unknown)
        on_leader = wires[leader - FIRST_ID]
        assert _fetch(on_leader, "hint", partition, epoch=p.leader_epoch).responses[0].partitions[0].error_code == 0
        assert _fetch(on_leader, "hint", partition, epoch=p.leader_epoch + 1).responses[0].partitions[0].error_code \
            == UNKNOWN_EPOCH


def test_a_groups_coordinator_is_the_leader_of_its_offsets_partition(cluster) -> None:
    _, port, wires = cluster
    offsets = _by_id(_metadata(wires[0], "__consumer_offsets"))
    assert len(offsets) == 50 and {p.leader_id for p in offsets.values()} == {1, 2, 3}
    assert all(len(p.replica_nodes) == 3 for p in offsets.values())
    for group in ("alpha", "beta", "gamma", "delta"):
        leader = offsets[partition_for(group, 50)].leader_id
        for wire in wires:
            found = wire.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
            assert (found.error_code, found.node_id, found.port) == (0, leader, port + leader - FIRST_ID)
        for node, wire in enumerate(wires, FIRST_ID):
            beat = wire.call(12, 4, HeartbeatRequest(group_id=group, generation_id=1, member_id="m"))
            assert beat.error_code == (NOT_COORDINATOR if node != leader else 25)  # 25: UNKNOWN_MEMBER_ID


def test_a_share_keys_coordinator_is_the_leader_of_its_share_state_partition(cluster) -> None:
    """FindCoordinator key type SHARE ("group:topicId:partition", v6): every node answers the same
    node, the leader of the key's `__share_group_state` partition (made with the first lookup), so
    the keys spread over the nodes as the partitions' leaders do."""
    _, port, wires = cluster
    keys = [f"g{i}:AAAAAAAAAAAAAAAAAAAAAA:{i}" for i in range(12)]
    found = {}
    for key in keys:
        answers = {(c.error_code, c.node_id, c.port) for wire in wires
                   for c in wire.call(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key])).coordinators}
        assert len(answers) == 1, answers
        error, node, node_port = answers.pop()
        assert error == 0 and node_port == port + node - FIRST_ID
        found[key] = node
    assert len(set(found.values())) > 1, found


def test_describe_log_dirs_lists_each_nodes_replicas(cluster) -> None:
    _, _, wires = cluster
    _create(wires[0], CreatableTopic(name="dirs", num_partitions=-1, replication_factor=-1,
                                     assignments=[CreatableReplicaAssignment(0, [1, 2]),
                                                  CreatableReplicaAssignment(1, [2, 3])]))
    held = {}
    for node, wire in enumerate(wires, FIRST_ID):
        answer = wire.call(35, 4, DescribeLogDirsRequest(topics=None))
        held[node] = sorted(p.partition_index for t in answer.results[0].topics if t.name == "dirs"
                            for p in t.partitions)
    assert held == {1: [0], 2: [0, 1], 3: [1]}
