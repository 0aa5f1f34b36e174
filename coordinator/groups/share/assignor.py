"""Kafka's simple share assignor (SimpleAssignor, KIP-932): the subscribed partitions spread over the
members, a partition shared by several members when there are more members than partitions.

Per topic, with M subscribed members and P partitions: each partition is wanted by
ceil(M / P) members (its desired sharing) and each member takes its share of the
P * sharing slots (Kafka's desired assignment counts, which differ by one at most). Balance comes
first, then stickiness: a member keeps what it had as long as neither its count nor a partition's
sharing is exceeded; then the partitions short of members go to the members short of partitions.
Pure: no clock, no I/O; members in sorted order so every run decides alike.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment of every member: `subscriptions` the topic ids each member subscribes to
    (topics that exist), `partitions` each topic's partition count, `current` the last target."""
    members = sorted(subscriptions)
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    topics = sorted({t for ids in subscriptions.values() for t in ids if partitions.get(t, 0) > 0}, key=str)
    for topic in topics:
        subscribed = [m for m in members if topic in subscriptions[m]]
        for member, parts in _assign_topic(subscribed, partitions[topic],
                                           {m: current.get(m, {}).get(topic, frozenset()) for m in subscribed}).items():
            if parts:
                result[member][topic] = parts
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}


def _desired_counts(n_members: int, n_partitions: int) -> tuple[int, list[int]]:
    sharing = (n_members + n_partitions - 1) // n_partitions
    precise = sharing * n_partitions / n_members
    counts = [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(n_members)]
    return sharing, counts


def _assign_topic(members: list[str], n_partitions: int, current: Mapping[str, frozenset[int]]) -> dict[str, set[int]]:
    if not members:
        return {}
    sharing, counts = _desired_counts(len(members), n_partitions)
    desired = dict(zip(members, counts))
    holders: dict[int, list[str]] = {p: [] for p in range(n_partitions)}
    kept: dict[str, set[int]] = {m: set() for m in members}
    # Stickiness within the bounds: a member keeps its partitions (lowest first) up to its count, a
    # partition its holders up to its sharing.
    for member in members:
        for p in sorted(current.get(member, ())):
            if p < n_partitions and len(kept[member]) < desired[member] and len(holders[p]) < sharing:
                kept[member].add(p)
                holders[p].append(member)
    # Then each partition short of holders, in order, goes to the members short of partitions (the
    # emptiest first) that do not hold it yet.
    for p in range(n_partitions):
        while len(holders[p]) < sharing:
            short = [m for m in members if len(kept[m]) < desired[m] and p not in kept[m]]
            if not short:
                break  # as Kafka: a slight imbalance rather than a reshuffle
            member = min(short, key=lambda m: (len(kept[m]) - desired[m], members.index(m)))
            kept[member].add(p)
            holders[p].append(member)
    return kept
