"""Where a topic's partitions live on several nodes (issue 41): Kafka's placement and its checks.

`assign` is what Kafka 4.4's KRaft controller does without racks (metadata/placement/
StripedReplicaPlacer: one rack, every broker unfenced): the nodes sorted, a random offset; each
partition's replicas are rf consecutive nodes from the offset, the offset moving on by one per
partition, and the list shuffled after every n partitions, so each run of n partitions has every
node lead once and followers spread. (Kafka 4.x no longer uses the old AdminUtils round robin.)
`check_assignment` is the controller's check of an explicit assignment (CreateTopics,
CreatePartitions), with its messages. Pure functions: the catalogue (catalogue.py) calls them with
the nodes that are up (Kafka also places followers on fenced brokers that are still registered:
a deliberate difference, docs/cluster.md).
"""

from __future__ import annotations

import random
from collections.abc import Container, Hashable, Iterable, Sequence
from typing import TypeVar

from ...protocol.errors import ErrorCode, KafkaError


def replication_error(rf: int, usable: int) -> KafkaError:
    return KafkaError(f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                      f"cannot be reached because only {usable} broker(s) are registered or some brokers have all "
                      f"their log directories cordoned.",
                      ErrorCode.INVALID_REPLICATION_FACTOR)


def assign(nodes: Sequence[int], num_partitions: int, rf: int, *, first_partition: int = 0,
           start: int | None = None, rng: random.Random | None = None) -> dict[int, list[int]]:
    """partition -> replicas (the first the preferred leader) for partitions first_partition.. of a
    topic, over `nodes` (the ids of the nodes that are up); `start`: the offset into the sorted
    nodes of the first partition's leader (random, as Kafka's)."""
    n = len(nodes)
    if rf < 1:
        raise KafkaError("Replication factor must be larger than 0, or -1 to use the default value.",
                         ErrorCode.INVALID_REPLICATION_FACTOR)
    if rf > n:
        raise replication_error(rf, n)
    pick = rng or random
    brokers = sorted(nodes)
    offset = pick.randrange(n) if start is None else start
    out: dict[int, list[int]] = {}
    placed_in_round = 0
    for partition in range(first_partition, first_partition + num_partitions):
        if placed_in_round == n and n > 1:  # RackList.place: a new round over a shuffled list
            pick.shuffle(brokers)
            placed_in_round = 0
        if partition > first_partition:  # BrokerList.next: each partition starts one further on
            offset = (offset + 1) % n
        out[partition] = [brokers[(offset + j) % n] for j in range(rf)]
        placed_in_round += 1
    return out


Key = TypeVar("Key", bound=Hashable)


def preferred_leader_moves(partitions: Iterable[tuple[Key, int, Sequence[int]]],
                           live: Container[int]) -> list[tuple[Key, int]]:
    """Kafka's leader imbalance (auto.leader.rebalance.enable; QuorumController's
    maybeBalancePartitionLeaders, every leader.imbalance.check.interval.seconds): of `partitions`
    (key, leader, replicas), each whose preferred replica (the first) is up but does not lead, with
    that replica, the leader it goes back to. Kafka 4.x's KRaft controller balances every such
    partition at each check: leader.imbalance.per.broker.percentage went with ZooKeeper (Kafka 4.4
    does not know it). Replicas are a view over one log here, so a replica that is up is in sync."""
    return [(key, replicas[0]) for key, leader, replicas in partitions
            if replicas and replicas[0] in live and leader != replicas[0]]


def check_assignment(partition: int, replicas: Sequence[int], usable: Sequence[int], expected_rf: int | None) -> None:
    """One partition of an explicit assignment, as Kafka's controller checks it (raises KafkaError):
    ReplicationControlManager.validateManualPartitionAssignment, which walks the broker ids sorted
    (the smallest unknown or repeated id is the one named) and names no partition."""
    if not replicas:
        raise KafkaError("The manual partition assignment includes an empty replica list.",
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    previous = None
    for node in sorted(replicas):
        if node not in usable:
            raise KafkaError(f"The manual partition assignment includes broker {node}, but no such broker "
                             f"is registered.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if node == previous:
            raise KafkaError(f"The manual partition assignment includes the broker {node} more than once.",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        previous = node
    if expected_rf is not None and len(replicas) != expected_rf:
        raise KafkaError(f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                         f"but this is not consistent with previous partitions, which have {expected_rf} replica(s).",
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
