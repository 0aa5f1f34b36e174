"""Kafka's rack-unaware placement (broker/partitions/placement.py), checked against the answers of
Kafka 4.4's StripedReplicaPlacer (StripedReplicaPlacerTest) for a fixed start, and its controller's
checks (ReplicationControlManager.validateManualPartitionAssignment)."""

from __future__ import annotations

import random

import pytest

from kbroker.broker.partitions.placement import assign, check_assignment
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
