"""Server-side assignors of consumer groups: `uniform` (Kafka's default) and `range`.

An assignor is a pure function of the members' subscriptions (topic ids), their current target
assignment and the topics' partition counts; it returns every member's new target assignment.

- uniform: balanced (partition counts of members subscribed to the same topics differ by at most
  one) and sticky (a partition stays with its current target owner unless balance requires it to
  move), for homogeneous and heterogeneous subscriptions alike, as Kafka's UniformAssignor
  promises. The algorithm is ours: keep what is still valid, hand out the rest to the least
  loaded eligible member, then move partitions from the most to the least loaded until balanced.
- range: per topic, the subscribed members in member id order take contiguous ranges, the first
  `partitions % members` one partition more (Kafka's RangeAssignor co-partitioning rule).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from .consumer_group import Assignment

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    subscribed_topic_ids: frozenset[uuid.UUID]
    instance_id: str | None = None
    rack_id: str | None = None
    # The member's current target assignment, which the uniform assignor keeps where it can.
    current: Assignment = field(default_factory=dict)


class PartitionAssignorError(Exception):
    pass


def assign(name: str, members: Mapping[str, MemberSubscription],
           topics: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    if name == UNIFORM:
        return uniform_assign(members, topics)
    if name == RANGE:
        return range_assign(members, topics)
    raise PartitionAssignorError(f"unknown assignor {name!r}")


def _freeze(raw: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in raw.items()}


def range_assign(members: Mapping[str, MemberSubscription],
                 topics: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for topic_id, num_partitions in sorted(topics.items(), key=lambda kv: str(kv[0])):
        subscribers = sorted(m for m, s in members.items() if topic_id in s.subscribed_topic_ids)
        if not subscribers:
            continue
        base, extra = divmod(num_partitions, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            count = base + (1 if i < extra else 0)
            if count:
                out[member_id][topic_id] = set(range(start, start + count))
            start += count
    return _freeze(out)


def uniform_assign(members: Mapping[str, MemberSubscription],
                   topics: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    subscriptions = {s.subscribed_topic_ids for s in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, topics, next(iter(subscriptions)))
    return _uniform_heterogeneous(members, topics)


def _uniform_homogeneous(members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, int],
                         subscribed: frozenset[uuid.UUID]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Everyone subscribes to the same topics: each member's quota is partitions // members, and the
    members that already hold the most get the `partitions % members` extra ones; a member keeps
    what it holds up to its quota, and the rest fills the members below quota. Linear time."""
    ids = sorted((t for t in subscribed if t in topics), key=str)
    index = {t: i for i, t in enumerate(ids)}
    # A partition is the int (topic index << 32 | partition): cheap to hash and sorts in topic order.
    valid = {(i << 32) | p for i, t in enumerate(ids) for p in range(topics[t])}
    kept: dict[str, list[int]] = {}
    taken: set[int] = set()
    for member_id in sorted(members):
        mine: list[int] = []
        for topic_id, partitions in members[member_id].current.items():
            i = index.get(topic_id)
            if i is None:
                continue
            for p in partitions:
                key = (i << 32) | p
                if key in valid and key not in taken:
                    taken.add(key)
                    mine.append(key)
        mine.sort()
        kept[member_id] = mine
    base, extra = divmod(len(valid), len(members)) if members else (0, 0)
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    out = {m: kept[m][:quota[m]] for m in members}
    owned = {key for keys in out.values() for key in keys}
    free = iter(sorted(valid - owned))
    for member_id in sorted(members):
        keys = out[member_id]
        while len(keys) < quota[member_id]:
            keys.append(next(free))
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for member_id, keys in out.items():
        by_topic = result[member_id]
        for key in keys:
            by_topic.setdefault(ids[key >> 32], set()).add(key & 0xFFFFFFFF)
    return _freeze(result)


def _uniform_heterogeneous(members: Mapping[str, MemberSubscription],
                           topics: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load: dict[str, int] = {m: 0 for m in members}
    held: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}

    def give(tp: tuple[uuid.UUID, int], member_id: str) -> None:
        previous = owner.get(tp)
        if previous is not None:
            held[previous].discard(tp)
            load[previous] -= 1
        owner[tp] = member_id
        held[member_id].add(tp)
        load[member_id] += 1

    # 1. Stickiness: keep every still-valid partition of the current target assignment.
    for member_id in sorted(members):
        sub = members[member_id]
        for topic_id, partitions in sub.current.items():
            if topic_id not in sub.subscribed_topic_ids or topic_id not in topics:
                continue
            for p in partitions:
                tp = (topic_id, p)
                if p < topics[topic_id] and tp not in owner:
                    give(tp, member_id)

    # 2. Everything else to the least loaded eligible member.
    eligible: dict[uuid.UUID, list[str]] = {
        t: sorted(m for m, s in members.items() if t in s.subscribed_topic_ids) for t in topics
    }
    for topic_id in sorted(topics, key=str):
        candidates = eligible[topic_id]
        if not candidates:
            continue
        for p in range(topics[topic_id]):
            if (topic_id, p) not in owner:
                give((topic_id, p), min(candidates, key=lambda m: (load[m], m)))

    # 3. Balance: move from a member to an eligible one holding at least two fewer partitions.
    # Each move lowers the sum of squared loads, so this ends.
    # One move at a time from the most loaded member, so that each member gives up only what
    # balance needs and the moves go to the least loaded.
    moved = True
    while moved:
        moved = False
        for member_id in sorted(members, key=lambda m: (-load[m], m)):
            for tp in sorted(held[member_id], key=lambda x: (str(x[0]), -x[1])):
                target = min(eligible[tp[0]], key=lambda m: (load[m], m))
                if load[target] + 1 < load[member_id]:
                    give(tp, target)
                    moved = True
                    break
            if moved:
                break

    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for (topic_id, p), member_id in owner.items():
        out[member_id].setdefault(topic_id, set()).add(p)
    return _freeze(out)
