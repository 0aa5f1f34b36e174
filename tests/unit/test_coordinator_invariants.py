"""Random command sequences against the bookkeeping invariants of a classic group.

Whatever clients do and whenever timers fire: vote counts match the members' protocols, the
awaiting-join counter matches the parked JoinGroups, the leader is a member, the static map
points at members with that instance id, no JoinGroup/SyncGroup is answered twice, the
generation never goes back, and an Empty group has no members.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.classic.group import ClassicGroup, GroupState
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState

PROTOCOL_SETS = [
    (("range", b"r"),),
    (("range", b"r2"),),
    (("roundrobin", b"x"), ("range", b"r")),
]

action = st.one_of(
    st.tuples(st.just("join_new"), st.integers(0, 5), st.integers(0, 2)),
    st.tuples(st.just("join_static"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("rejoin"), st.integers(0, 20), st.integers(0, 2)),
    st.tuples(st.just("sync"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("sync_leader"), st.just(0), st.booleans()),
    st.tuples(st.just("sync_leader"), st.just(0), st.booleans()),
    st.tuples(st.just("heartbeat"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("leave"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("commit"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([1, 500, 2_999, 3_000, 6_000, 10_000, 30_000]), st.booleans()),
    st.tuples(st.just("expire_offsets"), st.just(0), st.booleans()),
)


def check(group: ClassicGroup | None, last_generation: int) -> int:
    if group is None:
        return 0
    members = group.members
    votes = Counter(name for m in members.values() for name in m.protocol_names)
    assert +group.supported_protocols == votes
    assert group.num_members_awaiting_join == sum(m.is_awaiting_join for m in members.values())
    assert (group.leader_id in members) if members else group.leader_id is None
    for instance, member_id in group.static_members.items():
        assert members[member_id].group_instance_id == instance
    assert len(group.static_members) == sum(m.is_static for m in members.values())
    assert group.pending_sync_members <= set(members)
    assert not (group.pending_members & set(members))
    if group.state is S.EMPTY:
        assert not members
    if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
        assert members and group.protocol_name is not None
    assert group.generation_id >= last_generation
    return group.generation_id


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, min_size=1, max_size=80))
def test_random_command_sequences_keep_group_invariants(actions: list[tuple]) -> None:
    h = Harness(GroupConfig(offsets_retention_minutes=1))
    known: list[tuple[str, str | None]] = []  # (member id, instance id) ever handed out
    answered: Counter[int] = Counter()
    handles: list[int] = []
    generation = 0

    def pick(i: int) -> tuple[str, str | None] | None:
        return known[i % len(known)] if known else None

    def current_generation() -> int:
        g = h.group("g")
        return g.generation_id if g is not None else 0

    for kind, a, b in actions:
        if kind == "join_new":
            result = h.call(join_request(client_id=f"c{a}", protocols=PROTOCOL_SETS[b]))
            if result is not None and result.error is E.MEMBER_ID_REQUIRED:
                known.append((result.member_id, None))
                handles.append(h.send(join_request(member_id=result.member_id, client_id=f"c{a}",
                                                   protocols=PROTOCOL_SETS[b])))
        elif kind == "join_static":
            handles.append(h.send(join_request(instance_id=f"i{a}", client_id=f"s{a}", protocols=PROTOCOL_SETS[b])))
            group = h.group("g")
            if group is not None and f"i{a}" in group.static_members:
                known.append((group.static_members[f"i{a}"], f"i{a}"))
        elif (chosen := pick(a)) is not None:
            member_id, instance = chosen
            if kind == "rejoin":
                handles.append(h.send(join_request(member_id=member_id, instance_id=instance,
                                                   protocols=PROTOCOL_SETS[b])))
            elif kind == "sync":
                group = h.group("g")
                assignment = tuple((m, b"a") for m in group.members) if (b and group is not None) else ()
                handles.append(h.send(c.SyncGroup("g", current_generation(), member_id, instance,
                                                  assignments=assignment)))
            elif kind == "heartbeat":
                h.call(c.Heartbeat("g", current_generation(), member_id, instance))
            elif kind == "leave":
                h.call(c.LeaveGroup("g", (c.LeavingMember("" if (b and instance) else member_id, instance),)))
            elif kind == "commit":
                h.call(c.OffsetCommit("g", current_generation() if b else -1, member_id if b else "",
                                      (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 1),)),)))
        if kind == "sync_leader":
            group = h.group("g")
            if group is not None and group.leader_id is not None:
                leader = group.get(group.leader_id)
                handles.append(h.send(c.SyncGroup("g", group.generation_id, leader.member_id,
                                                  leader.group_instance_id,
                                                  assignments=tuple((m, b"a") for m in group.members))))
        if kind == "advance":
            h.advance(a)
        elif kind == "expire_offsets":
            h.send(c.OffsetExpiryCheck("g"))

        for handle in list(h.replies):
            answered[handle] += len(h.replies.pop(handle))
        generation = check(h.group("g"), generation if h.group("g") is not None else 0)

    assert all(n == 1 for n in answered.values()), answered
