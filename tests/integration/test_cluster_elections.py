"""Leader elections on `kbroker serve --nodes 3` (issue 41, third round): ElectLeaders (43) PREFERRED and
UNCLEAN as Kafka 4.4's controller answers them (ReplicationControlManager.electLeader: its codes and
messages; tests/reference/test_cluster_vs_kafka.py asks a Kafka cluster the same), and
auto.leader.rebalance.enable's periodic balancing, which brings leaders back to a node that stopped and
started again."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kbroker.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kbroker.tests.integration.cluster_scenarios import leaders, start_cluster
from kbroker.tests.integration.wire import Wire

NONE, UNKNOWN, INVALID_REQUEST = 0, 3, 42
PREFERRED_NOT_AVAILABLE, ELIGIBLE_NOT_AVAILABLE, NOT_NEEDED = 80, 83, 84


def _call(address: str, api_key: int, version: int, body):
    wire = Wire(address)
    try:
        return wire.call(api_key, version, body)
    finally:
        wire.close()


def _create(address: str, name: str, assignment: list[list[int]]) -> None:
    made = _call(address, 19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[CreatableReplicaAssignment(i, r) for i, r in enumerate(assignment)])], timeout_ms=10000))
    assert made.topics[0].error_code == 0, made.topics[0].error_message


def _elect(address: str, election_type: int, topics: dict[str, list[int]] | None, version: int = 2) -> dict:
    answer = _call(address, 43, version, ElectLeadersRequest(
        election_type=election_type, timeout_ms=10000,
        topic_partitions=None if topics is None else [TopicPartitions(t, ps) for t, ps in topics.items()]))
    assert answer.error_code == 0
    return {r.topic: [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result]
            for r in answer.replica_election_results}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    broker, controls, port = start_cluster(tmp_path_factory.mktemp("elections"), 3, 0,
                                           "--no-auto-leader-rebalance-enable")
    yield broker, controls, port
    broker.stop()


def test_preferred_and_unclean_elections_answer_as_kafkas_controller(cluster) -> None:
    broker, controls, port = cluster
    node1, node2 = f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"
    _create(node1, "elect", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    _create(node1, "solo", [[3]])
    assert _elect(node2, 0, {"elect": [0, 1, 2, 7], "nope": [0]}) == {
        "elect": [(0, NOT_NEEDED, "Leader election not needed for topic partition."),
                  (1, NOT_NEEDED, "Leader election not needed for topic partition."),
                  (2, NOT_NEEDED, "Leader election not needed for topic partition."),
                  (7, UNKNOWN, "No such partition as elect-7")],
        "nope": [(0, UNKNOWN, "No such topic as nope")]}
    try:
        controls.stop_node(2)  # elect-1 (preferred 2) now led by 3
        assert leaders(node1, "elect")[1] == (3, [1, 3])
        assert _elect(node1, 0, {"elect": [1]}) == {
            "elect": [(1, PREFERRED_NOT_AVAILABLE, "The preferred leader was not available.")]}
        assert _elect(node1, 1, {"elect": [1]}) == {
            "elect": [(1, NOT_NEEDED, "Leader election not needed for topic partition.")]}
        controls.stop_node(3)  # solo-0 has no replica up: no leader
        assert leaders(node1, "solo")[0] == (-1, [])
        assert _elect(node1, 1, {"solo": [0]}) == {
            "solo": [(0, ELIGIBLE_NOT_AVAILABLE, "Eligible topic partition leaders are not available.")]}
        assert _elect(node1, 0, {"solo": [0]}) == {
            "solo": [(0, PREFERRED_NOT_AVAILABLE, "The preferred leader was not available.")]}
    finally:
        controls.start_node(2)
        controls.start_node(3)
    # leaders stay where the stops moved them (rebalance off): node 1 leads all three
    assert {p: leader for p, (leader, _) in leaders(node1, "elect").items()} == {0: 1, 1: 1, 2: 1}
    # v0 (PREFERRED, every partition): each topic named, with only the partitions elected or failed
    everything = _elect(node2, 0, None, version=0)
    assert everything["elect"] == [(1, NONE, None), (2, NONE, None)]
    assert everything["solo"] == []  # led by its preferred replica again since node 3 started
    # the stops moved __consumer_offsets leaders too: they go back with the rest
    assert everything["__consumer_offsets"] and all(e == NONE for _, e, _ in everything["__consumer_offsets"])
    assert {p: leader for p, (leader, _) in leaders(node1, "elect").items()} == {0: 1, 1: 2, 2: 3}
    assert _elect(node1, 0, None) == {t: [] for t in everything}  # balanced now: nothing listed
    elected = [e for e in broker.events("leader_elected") if e.get("topic") == "elect"]
    assert [(e["partition"], e["leader"]) for e in elected[-2:]] == [(1, 2), (2, 3)]


def test_an_unknown_election_type_fails_the_request(cluster) -> None:
    _, _, port = cluster
    answer = _call(f"127.0.0.1:{port}", 43, 1, ElectLeadersRequest(
        election_type=2, topic_partitions=[TopicPartitions("elect", [0])], timeout_ms=1000))
    assert [(p.partition_id, p.error_code) for r in answer.replica_election_results
            for p in r.partition_result] == [(0, INVALID_REQUEST)]


def test_leaders_go_back_on_their_own_after_a_node_returns(tmp_path) -> None:
    """auto.leader.rebalance.enable (on by default) with leader.imbalance.check.interval.seconds=1: node 1
    stops and starts; its partitions' leaders come back to it without any request."""
    broker, controls, port = start_cluster(tmp_path, 3, 0, "--leader-imbalance-check-interval-seconds", "1")
    try:
        node2 = f"127.0.0.1:{port + 1}"
        _create(node2, "rebalanced", [[1, 2, 3], [2, 3, 1], [1, 3, 2]])
        controls.stop_node(1)
        assert {p: leader for p, (leader, _) in leaders(node2, "rebalanced").items()} == {0: 2, 1: 2, 2: 3}
        controls.start_node(1)
        deadline = time.monotonic() + 60
        while {p: leader for p, (leader, _) in leaders(node2, "rebalanced").items()} != {0: 1, 1: 2, 2: 1}:
            assert time.monotonic() < deadline, f"leaders did not go back: {leaders(node2, 'rebalanced')}"
            time.sleep(0.2)
        assert any(e["leaders_moved"] >= 2 for e in broker.events("leader_rebalance"))
    finally:
        broker.stop()
