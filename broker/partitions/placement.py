"""Where a topic's partitions live on several nodes (issue 41): Kafka's placement and its checks.

`assign` is Kafka's rack-unaware round robin (AdminUtils.assignReplicasToBrokersRackUnaware): the
first replica of partition p is node (p + start) mod n, the others follow it at a shift that grows
by one every n partitions, so leaders and followers both spread evenly; `start` and `shift` are
random per topic, as in Kafka. `check_assignment` is the controller's check of an explicit
assignment (CreateTopics, CreatePartitions), with its messages. Pure functions: the catalogue
(cluster_catalogue.py) calls them with the nodes that are up.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ...protocol.errors import ErrorCode, KafkaError


def replication_error(rf: int, usable: int) -> KafkaError:
    return KafkaError(f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                      f"cannot be reached because only {usable} broker(s) are registered or some brokers have all "
                      f"their log directories cordoned.",
                      ErrorCode.INVALID_REPLICATION_FACTOR)


def assign(nodes: Sequence[int], num_partitions: int, rf: int, *, first_partition: int = 0,
           start: int | None = None, shift: int | None = None,
           rng: random.Random | None = None) -> dict[int, list[int]]:
    """partition -> replicas (the first the preferred leader) for partitions first_partition.. of a
    topic, over `nodes` (sorted ids of the nodes that are up)."""
    n = len(nodes)
    if rf < 1:
        raise KafkaError("Replication factor must be larger than 0, or -1 to use the default value.",
                         ErrorCode.INVALID_REPLICATION_FACTOR)
    if rf > n:
        raise replication_error(rf, n)
    pick = rng or random
    start = pick.randrange(n) if start is None else start
    shift = pick.randrange(n) if shift is None else shift
    out: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [nodes[first]]
        for j in range(rf - 1):
            replicas.append(nodes[(first + 1 + (shift + j) % (n - 1)) % n])
        out[partition] = replicas
    return out


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
