"""Reassignments on `kbroker serve --nodes 3` (issue 41, third round): a node added with the control gets
partitions by AlterPartitionReassignments (45), answered as Kafka 4.4's controller answers it (codes and
messages of ReplicationControlManager.alterPartitionReassignment); one adding a stopped node stays under
way (ListPartitionReassignments (46) lists it) until that node starts, or until it is cancelled; the
added node and the new replica sets are kept across a restart."""

from __future__ import annotations

import time

import pytest

from kbroker.admin.cluster import ClusterControls
from kbroker.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kbroker.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kbroker.protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.cluster_scenarios import start_cluster
from kbroker.tests.integration.wire import Wire

NONE, UNKNOWN, INVALID_REPLICATION_FACTOR, INVALID_ASSIGNMENT, NO_REASSIGNMENT = 0, 3, 38, 39, 85


def _call(address: str, api_key: int, version: int, body):
    wire = Wire(address)
    try:
        return wire.call(api_key, version, body)
    finally:
        wire.close()


def _reassign(address: str, targets: dict[tuple[str, int], list[int] | None], version: int = 0,
              allow_rf_change: bool = True) -> dict:
    topics: dict[str, list[ReassignablePartition]] = {}
    for (topic, partition), replicas in targets.items():
        topics.setdefault(topic, []).append(ReassignablePartition(partition, replicas))
    answer = _call(address, 45, version, AlterPartitionReassignmentsRequest(
        timeout_ms=10000, allow_replication_factor_change=allow_rf_change,
        topics=[ReassignableTopic(t, ps) for t, ps in topics.items()]))
    assert answer.error_code == 0, answer.error_message
    return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in answer.responses for p in t.partitions}


def _ongoing(address: str, topics=None) -> dict:
    answer = _call(address, 46, 0, ListPartitionReassignmentsRequest(timeout_ms=10000, topics=topics))
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in answer.topics for p in t.partitions}


def _partitions(address: str, topic: str) -> dict[int, tuple[int, int, list[int], list[int]]]:
    md = _call(address, 3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                               allow_auto_topic_creation=False))
    return {p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes), sorted(p.isr_nodes))
            for t in md.topics for p in t.partitions}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    broker, controls, port = start_cluster(tmp_path_factory.mktemp("reassign"), 3, 1,
                                           "--no-auto-leader-rebalance-enable")
    yield broker, controls, port
    broker.stop()


def test_a_node_added_gets_partitions_by_reassignment(cluster) -> None:
    broker, controls, port = cluster
    node1 = f"127.0.0.1:{port}"
    made = _call(node1, 19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name="moving", num_partitions=-1, replication_factor=-1, assignments=[
            CreatableReplicaAssignment(i, r) for i, r in enumerate([[1, 2, 3], [2, 3, 1], [3, 1, 2]])])],
        timeout_ms=10000))
    assert made.topics[0].error_code == 0
    assert controls.add_node()["node"] == 4
    assert _reassign(node1, {("moving", 0): [4, 2, 3], ("moving", 1): [2, 3, 4], ("moving", 7): [1],
                             ("nope", 0): [1], ("moving", 2): None}) == {
        ("moving", 0): (NONE, None), ("moving", 1): (NONE, None),
        ("moving", 7): (UNKNOWN, "Unable to find partition moving:7."),
        ("nope", 0): (UNKNOWN, "Unable to find a topic named nope."),
        ("moving", 2): (NO_REASSIGNMENT, None)}
    assert _reassign(node1, {("moving", 2): [3, 3], ("moving", 1): [9], ("moving", 0): []}) == {
        ("moving", 2): (INVALID_ASSIGNMENT, "The manual partition assignment includes the broker 3 more than once."),
        ("moving", 1): (INVALID_ASSIGNMENT, "The manual partition assignment includes broker 9, but no such broker "
                                            "is registered."),
        ("moving", 0): (INVALID_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")}
    parts = _partitions(node1, "moving")
    # moving-0 lost its leader (1): the first in-sync replica of the target leads, a new epoch;
    # moving-1 kept its leader (2) and lost a replica (1): a new epoch too, as Kafka's
    assert parts[0] == (4, 1, [4, 2, 3], [2, 3, 4]) and parts[1] == (2, 1, [2, 3, 4], [2, 3, 4])
    assert parts[2] == (3, 0, [3, 1, 2], [1, 2, 3])
    assert _ongoing(node1) == {}
    # node 4 leads moving-0 and takes writes for it
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"on node 4")])
    answer = _call(f"127.0.0.1:{port + 3}", 0, 9, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
        TopicProduceData(name="moving", partition_data=[PartitionProduceData(index=0, records=batch)])]))
    assert answer.responses[0].partition_responses[0].error_code == 0


def test_a_reassignment_to_a_stopped_node_waits_for_it(cluster) -> None:
    broker, controls, port = cluster
    node1 = f"127.0.0.1:{port}"
    controls.stop_node(4)
    try:
        assert _reassign(node1, {("moving", 2): [4, 1]}, version=1, allow_rf_change=False) == {
            ("moving", 2): (INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")}
        assert _reassign(node1, {("moving", 2): [4, 1, 2]}, version=1, allow_rf_change=False) == {
            ("moving", 2): (NONE, None)}
        # under way: 4 is added but down, 3 is removed once 4 is in sync; the leader (3) stays meanwhile
        assert _ongoing(node1) == {("moving", 2): ([4, 1, 2, 3], [4], [3])}
        assert _ongoing(node1, []) == {}
        # the factor compared is the target's under way (3), not the replicas listed meanwhile (4)
        assert _reassign(node1, {("moving", 2): [4, 1]}, version=1, allow_rf_change=False) == {
            ("moving", 2): (INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")}
        assert _partitions(node1, "moving")[2] == (3, 0, [4, 1, 2, 3], [1, 2, 3])
    finally:
        controls.start_node(4)
    assert _ongoing(node1) == {}
    assert _partitions(node1, "moving")[2] == (4, 1, [4, 1, 2], [1, 2, 4])  # 3 went: the target's first leads


def test_a_reassignment_under_way_is_cancelled(cluster) -> None:
    _, controls, port = cluster
    node2 = f"127.0.0.1:{port + 1}"
    before = _partitions(node2, "moving")[1]
    controls.stop_node(1)
    try:
        assert _reassign(node2, {("moving", 1): [1, 2, 3]}) == {("moving", 1): (NONE, None)}
        assert _ongoing(node2) == {("moving", 1): ([1, 2, 3, 4], [1], [4])}
        assert _reassign(node2, {("moving", 1): None}) == {("moving", 1): (NONE, None)}
        assert _ongoing(node2) == {}
        leader, epoch, replicas, _ = _partitions(node2, "moving")[1]
        assert (leader, replicas) == (before[0], before[2]) and epoch == before[1] + 1  # the added replica went
    finally:
        controls.start_node(1)


def test_the_added_node_and_the_reassigned_replicas_survive_a_restart(cluster) -> None:
    broker, controls, port = cluster
    node1 = f"127.0.0.1:{port}"
    before = _partitions(node1, "moving")
    controls.stop_node(1)
    assert _reassign(f"127.0.0.1:{port + 1}", {("moving", 1): [1, 2, 3]}) == {("moving", 1): (NONE, None)}
    assert _ongoing(f"127.0.0.1:{port + 1}") == {("moving", 1): ([1, 2, 3, 4], [1], [4])}
    broker.restart()  # every node up again: the reassignment left under way completes as the cluster starts
    controls = ClusterControls(controls.admin_url, (broker.data_dir / "test-controls.token").read_text().strip())
    assert [n["node_id"] for n in controls.describe()["nodes"]] == [1, 2, 3, 4]
    md = _call(f"127.0.0.1:{port + 3}", 3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert sorted((b.node_id, b.port) for b in md.brokers) == [(n + 1, port + n) for n in range(4)]
    after = _partitions(node1, "moving")
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1] == (before[1][0], before[1][1] + 1, [1, 2, 3], [1, 2, 3])  # 4 went: a new epoch
    assert _ongoing(node1) == {}
    assert any(e["nodes"] == 4 for e in broker.events("cluster_nodes_restored"))
