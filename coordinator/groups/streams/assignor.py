"""Kafka's sticky task assignor for streams groups (StickyTaskAssignor), for one node's use: active
tasks first, then standby replicas when `num.standby.replicas` > 0.

Load is counted per process (a Kafka Streams instance may run several members, its stream threads);
a task stays where it was while its owner stays and is not over its fair share; the rest go to the
least loaded process, and within it to its least loaded member. Only stateful tasks (of a subtopology
with a state changelog) get standbys, as in Kafka's assignor; a standby never lands on a process that
holds the task active or already a standby of it. Deterministic: ties broken by id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .topology import Tasks

ASSIGNOR_NAME = "sticky"


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    member_id: str
    process_id: str
    active: Tasks = frozenset()  # what it has now (its previous target): stickiness
    standby: Tasks = frozenset()


@dataclass(frozen=True, slots=True)
class MemberTarget:
    active: Tasks = frozenset()
    standby: Tasks = frozenset()
    warmup: Tasks = frozenset()


def assign(members: Mapping[str, AssignmentMember], tasks: Tasks, num_standby: int,
           stateful: Tasks = frozenset()) -> dict[str, MemberTarget]:
    """`stateful`: the tasks that keep state, the only ones given standby replicas."""
    if not members:
        return {}
    ids = sorted(members)
    processes = sorted({m.process_id for m in members.values()})
    active: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    # Balanced quotas: every member floor(tasks / members), the first `extra` to fill one more.
    floor, extra = divmod(len(tasks), len(ids))
    process_load = {p: 0 for p in processes}

    # 1. Active tasks stay with their previous owner up to its quota (a member past it gives tasks up).
    owner_of: dict[tuple[str, int], str] = {}

    def keep(m: str, limit: int) -> None:
        for t in sorted(members[m].active):
            if len(active[m]) >= limit:
                return
            if t in tasks and t not in owner_of:
                owner_of[t] = m
                active[m].add(t)
                process_load[members[m].process_id] += 1

    for m in ids:
        keep(m, floor)
    for m in ids:
        if extra and len(active[m]) == floor:
            keep(m, floor + 1)
            extra -= len(active[m]) - floor
    # 2. The rest to the least loaded process, then its least loaded member.
    for t in sorted(tasks - owner_of.keys()):
        room = ([i for i in ids if len(active[i]) < floor]
                or [i for i in ids if len(active[i]) == floor and extra] or ids)
        m = min(room, key=lambda i: (process_load[members[i].process_id], len(active[i]), i))
        if len(active[m]) == floor:
            extra -= 1
        owner_of[t] = m
        active[m].add(t)
        process_load[members[m].process_id] += 1

    # 3. Standby replicas: each task gets up to num_standby on other processes, stickily first.
    standby: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    if num_standby > 0:
        load = {m: len(active[m]) for m in ids}
        for t in sorted(tasks & stateful):
            holders = {members[owner_of[t]].process_id}
            for _ in range(num_standby):
                candidates = [i for i in ids if members[i].process_id not in holders]
                if not candidates:
                    break
                previous = [i for i in candidates if t in members[i].standby]
                m = min(previous or candidates, key=lambda i: (load[i], i))
                standby[m].add(t)
                load[m] += 1
                holders.add(members[m].process_id)
    return {m: MemberTarget(frozenset(active[m]), frozenset(standby[m])) for m in ids}
