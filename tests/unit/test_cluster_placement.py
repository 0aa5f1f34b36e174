"""Kafka's rack-unaware placement (broker/partitions/placement.py), checked against the answers of
AdminUtils.assignReplicasToBrokersRackUnaware for fixed start and shift, and its controller's checks."""

from __future__ import annotations

from collections import Counter

import pytest

from kbroker.broker.partitions.placement import assign, check_assignment
from kbroker.protocol.errors import ErrorCode, KafkaError


def test_round_robin_with_start_and_shift_as_kafka() -> None:
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start 0, shift 0
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign([0, 1, 2, 3, 4], 10, 3, start=0, shift=0) == expected


def test_leaders_and_replicas_spread_evenly() -> None:
    placed = assign([1, 2, 3], 50, 3)
    assert Counter(r[0] for r in placed.values()).most_common()[0][1] <= 17
    assert all(sorted(r) == [1, 2, 3] for r in placed.values())
    grown = assign([1, 2, 3], 2, 2, first_partition=50, start=0, shift=0)
    assert sorted(grown) == [50, 51] and all(len(set(r)) == 2 for r in grown.values())


def test_refusals_are_kafkas() -> None:
    with pytest.raises(KafkaError) as e:
        assign([1, 2, 3], 1, 4)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 3 broker(s)" in str(e.value)
    for replicas, needle in (([], "empty replica list"), ([1, 9], "broker 9"), ([2, 2], "more than once")):
        with pytest.raises(KafkaError) as e:
            check_assignment(0, replicas, [1, 2, 3], None)
        assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and needle in str(e.value)
    with pytest.raises(KafkaError):
        check_assignment(3, [1], [1, 2, 3], 2)
