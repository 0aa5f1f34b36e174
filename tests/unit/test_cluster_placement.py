"""Kafka's rack-unaware placement (broker/partitions/placement.py), checked against the answers of
Kafka 4.4's StripedReplicaPlacer (StripedReplicaPlacerTest) for a fixed start, its controller's
checks (ReplicationControlManager.validateManualPartitionAssignment), and its leader imbalance (the
partitions auto.leader.rebalance.enable moves back to their preferred replica)."""

from __future__ import annotations

import random

import pytest

from kbroker.broker.partitions.placement import assign, check_assignment, preferred_leader_moves
from kbroker.protocol.errors import ErrorCode, KafkaError


def test_striped_as_kafka() -> None:
    # StripedReplicaPlacerTest.testAvoidFencedReplicaIfPossibleOnSingleRack: unfenced 0, 2, 3, 4 (the
    # fenced 1 is never needed at RF 4), the random offset 2: a round of rotations, then a shuffle
    placed = assign([3, 0, 4, 2], 5, 4, start=2, rng=random.Random(1))
    assert [placed[p] for p in range(4)] == [[3, 4, 0, 2], [4, 0, 2, 3], [0, 2, 3, 4], [2, 3, 4, 0]]
    assert sorted(placed[4]) == [0, 2, 3, 4]
    # testBrokerList: 0..3 from offset 0, the next partition one on
    placed = assign([0, 1, 2, 3], 2, 4, start=0)
    assert placed == {0: [0, 1, 2, 3], 1: [1, 2, 3, 0]}


def test_leaders_and_replicas_spread_evenly() -> None:
    placed = assign([1, 2, 3], 50, 3)
    for first in range(0, 48, 3):  # each round of 3 partitions: every node leads once
        assert sorted(placed[p][0] for p in range(first, first + 3)) == [1, 2, 3]
    assert all(sorted(r) == [1, 2, 3] for r in placed.values())
    grown = assign([1, 2, 3], 2, 2, first_partition=50, start=0)
    assert grown == {50: [1, 2], 51: [2, 3]}


def test_refusals_are_kafkas() -> None:
    with pytest.raises(KafkaError) as e:
        assign([1, 2, 3], 1, 4)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 3 broker(s)" in str(e.value)
    for replicas, needle in (([], "empty replica list."), ([9, 1, 8], "broker 8, but"), ([2, 3, 2], "broker 2 more than once.")):
        with pytest.raises(KafkaError) as e:
            check_assignment(0, replicas, [1, 2, 3], None)
        assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and needle in str(e.value)
    with pytest.raises(KafkaError):
        check_assignment(3, [1], [1, 2, 3], 2)


def test_preferred_leader_moves_each_partition_whose_first_replica_is_up_and_does_not_lead() -> None:
    partitions = [("a", 2, [1, 2, 3]),   # node 1 back: moves to it
                  ("b", 2, [2, 3, 1]),   # its preferred leader leads: stays
                  ("c", 3, [1, 3, 2]),   # moves to 1
                  ("d", 2, [4, 2, 1]),   # preferred node 4 is down: stays with 2
                  ("e", -1, [1, 2, 3]),  # no leader, its preferred up: moves (the lost-leader pass took none)
                  ("f", 1, [])]          # no replicas: nothing to prefer
    assert preferred_leader_moves(partitions, {1, 2, 3}) == [("a", 1), ("c", 1), ("e", 1)]
    assert preferred_leader_moves(partitions, {2, 3}) == []
    # no per-broker threshold (Kafka 4.x's KRaft controller has none): one imbalanced partition out of
    # many still moves
    balanced = [(p, 1, [1, 2, 3]) for p in range(99)] + [(99, 2, [1, 2, 3])]
    assert preferred_leader_moves(balanced, {1, 2, 3}) == [(99, 1)]
