"""JoinGroup, branch by branch (handleJoinGroup, acceptJoiningMember, doUnknownJoinGroup,
doJoinGroup by state, addMemberAndRebalance, updateMemberAndRebalance, initial delayed join,
completing the join, static membership)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.classic.group import GroupState
from kbroker.coordinator.groups.events import RebalanceCompleted
from kbroker.protocol.records.classic_records import GroupMetadataRecord
from kbroker.coordinator.groups.results import JoinGroupResult, SyncGroupResult
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
J = join_request


@pytest.fixture
def h() -> Harness:
    return Harness()


def two_protocols(first: str, second: str) -> tuple[tuple[str, bytes], ...]:
    return ((first, f"{first}-meta".encode()), (second, f"{second}-meta".encode()))


# -- handleJoinGroup ------------------------------------------------------------------------------


@pytest.mark.parametrize("session_ms", [5_999, 1_800_001])
def test_handleJoinGroup_invalid_session_timeout(h: Harness, session_ms: int) -> None:
    result = h.call(J(member_id="m-1", session_timeout_ms=session_ms))
    assert result == JoinGroupResult(E.INVALID_SESSION_TIMEOUT, member_id="m-1")
    assert h.group("g") is None


def test_handleJoinGroup_session_timeout_bounds_are_inclusive(h: Harness) -> None:
    assert h.call(J(session_timeout_ms=6_000)).error is E.MEMBER_ID_REQUIRED
    assert h.call(J(session_timeout_ms=1_800_000)).error is E.MEMBER_ID_REQUIRED


def test_handleJoinGroup_known_member_of_unknown_group_is_rejected(h: Harness) -> None:
    assert h.call(J(member_id="ghost")).error is E.UNKNOWN_MEMBER_ID
    assert h.group("g") is None


def test_handleJoinGroup_unknown_member_creates_empty_group(h: Harness) -> None:
    h.call(J())
    assert h.group("g").state is S.EMPTY


# -- acceptJoiningMember --------------------------------------------------------------------------


def test_acceptJoiningMember_empty_group_always_accepts() -> None:
    h = Harness(GroupConfig(group_max_size=1))
    h.call(J())  # creates the group (Empty)
    assert h.call(J(client_id="other")).error is E.MEMBER_ID_REQUIRED


def test_acceptJoiningMember_preparing_rebalance_full() -> None:
    h = Harness(GroupConfig(group_max_size=2))
    a, b = h.new_member_id(), h.new_member_id()
    ha, hb = h.send(J(member_id=a)), h.send(J(member_id=b))
    assert h.group("g").num_members_awaiting_join == 2
    # A third member is turned away while two are waiting...
    third = h.call(J(require_known_member_id=False, client_id="late"))
    assert third == JoinGroupResult(E.GROUP_MAX_SIZE_REACHED, member_id="")
    # ...but a member already waiting may send its JoinGroup again.
    ha2 = h.send(J(member_id=a))
    assert h.take(ha2) is None and h.group("g").get(a).awaiting_join == ha2
    h.advance(6_000)  # b arrived during the initial delay, which extended it once
    assert h.take(ha2).generation_id == 1 and h.take(hb).generation_id == 1
    del ha


def test_acceptJoiningMember_preparing_rebalance_counts_waiting_members_not_size() -> None:
    h = Harness()
    leader, m2, m3 = h.stable_group(members=3)
    h.set_config(replace(h.config, group_max_size=2))  # an operator lowered the limit
    h.send(J(member_id=leader, client_id="client0"))  # leader rejoin: PreparingRebalance
    h2 = h.send(J(member_id=m2, client_id="client1"))
    assert h.take(h2) is None  # accepted: one member was waiting
    rejected = h.call(J(member_id=m3, client_id="client2"))
    assert rejected.error is E.GROUP_MAX_SIZE_REACHED
    assert not h.group("g").has(m3)


def test_acceptJoiningMember_stable_group_full() -> None:
    h = Harness(GroupConfig(group_max_size=2))
    leader, follower = h.stable_group(members=2)
    assert h.call(J(client_id="third")).error is E.GROUP_MAX_SIZE_REACHED
    # An existing member is still accepted.
    assert h.call(J(member_id=follower, client_id="client1")).error is E.NONE


# -- doUnknownJoinGroup ---------------------------------------------------------------------------


def test_doUnknownJoinGroup_member_id_required_v4(h: Harness) -> None:
    result = h.call(J(client_id="my-client", session_timeout_ms=12_000))
    assert result.error is E.MEMBER_ID_REQUIRED
    assert result.member_id.startswith("my-client-")
    group = h.group("g")
    assert group.is_pending_member(result.member_id)
    assert group.size == 0 and group.state is S.EMPTY
    key = c.pending_key("g", result.member_id)
    assert h.deadline(key) == h.clock.now_ms() + 12_000


def test_doUnknownJoinGroup_below_v4_joins_at_once(h: Harness) -> None:
    handle = h.send(J(require_known_member_id=False, client_id="old-client"))
    assert h.take(handle) is None  # parked until the join phase completes
    group = h.group("g")
    assert group.state is S.PREPARING_REBALANCE
    (member,) = group.members.values()
    assert member.member_id.startswith("old-client-") and member.is_new


def test_doUnknownJoinGroup_dead_group(h: Harness) -> None:
    h.call(J())
    h.group("g").transition_to(S.DEAD, 0)
    assert h.call(J()) == JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE, member_id="")


@pytest.mark.parametrize(
    "changes",
    [
        {"protocol_type": "connect"},
        {"protocols": (("roundrobin", b""),)},
    ],
)
def test_doUnknownJoinGroup_inconsistent_group_protocol(h: Harness, changes: dict) -> None:
    h.stable_group(members=1)
    result = h.call(J(**changes))
    assert result == JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id="")


@pytest.mark.parametrize("changes", [{"protocol_type": ""}, {"protocols": ()}])
def test_doUnknownJoinGroup_empty_protocol_list_or_type_is_inconsistent(h: Harness, changes: dict) -> None:
    assert h.call(J(**changes)).error is E.INCONSISTENT_GROUP_PROTOCOL


# -- doJoinGroup ----------------------------------------------------------------------------------


def test_doJoinGroup_pending_member_is_added(h: Harness) -> None:
    member_id = h.new_member_id()
    assert h.armed(c.pending_key("g", member_id))
    handle = h.send(J(member_id=member_id))
    group = h.group("g")
    assert group.has(member_id) and not group.is_pending_member(member_id)
    assert not h.armed(c.pending_key("g", member_id))
    # New members get the 5-minute join timeout, not the session timeout.
    assert h.deadline(c.heartbeat_key("g", member_id)) == h.clock.now_ms() + 300_000
    assert group.get(member_id).awaiting_join == handle


def test_doJoinGroup_unknown_member_id(h: Harness) -> None:
    h.stable_group(members=1)
    assert h.call(J(member_id="not-a-member")).error is E.UNKNOWN_MEMBER_ID


def test_doJoinGroup_dead_group(h: Harness) -> None:
    (m,) = h.stable_group(members=1)
    h.group("g").transition_to(S.DEAD, 0)
    assert h.call(J(member_id=m)) == JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE, member_id=m)


def test_doJoinGroup_inconsistent_protocol(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    assert h.call(J(member_id=follower, protocols=(("other", b""),))).error is E.INCONSISTENT_GROUP_PROTOCOL


def test_doJoinGroup_preparing_rebalance_updates_member_and_waits(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    h.send(J(member_id=leader, client_id="client0"))
    assert h.group("g").state is S.PREPARING_REBALANCE
    new_protocols = two_protocols("range", "roundrobin")
    hf = h.send(J(member_id=follower, protocols=new_protocols, session_timeout_ms=20_000))
    member = h.group("g").get(follower)
    assert member.protocols == new_protocols and member.session_timeout_ms == 20_000
    # Both rejoined: the join phase completes at once.
    result = h.take(hf)
    assert result.error is E.NONE and result.generation_id == 2


def test_doJoinGroup_completing_rebalance_matching_protocols_returns_current_state(h: Harness) -> None:
    a, b = h.new_member_id(client_id="a"), h.new_member_id(client_id="b")
    ha, hb = h.send(J(member_id=a, client_id="a")), h.send(J(member_id=b, client_id="b"))
    h.advance(6_000)
    first_a, first_b = h.take(ha), h.take(hb)
    assert h.group("g").state is S.COMPLETING_REBALANCE
    leader = first_a.leader_id
    # Both lost their responses and ask again with the same metadata.
    again_leader = h.call(J(member_id=leader, client_id="a"))
    again_follower = h.call(J(member_id=b if leader == a else a, client_id="b"))
    assert again_leader == (first_a if leader == a else first_b)
    assert again_leader.members and not again_follower.members
    assert again_follower.generation_id == 1 and again_follower.leader_id == leader
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_doJoinGroup_completing_rebalance_changed_protocols_triggers_rebalance(h: Harness) -> None:
    a, b = h.new_member_id(client_id="a"), h.new_member_id(client_id="b")
    ha, hb = h.send(J(member_id=a, client_id="a")), h.send(J(member_id=b, client_id="b"))
    h.advance(6_000)
    leader = h.take(ha).leader_id
    h.take(hb)
    follower = b if leader == a else a
    parked_sync = h.send(c.SyncGroup("g", 1, follower))
    h.send(J(member_id=leader, protocols=two_protocols("range", "sticky")))
    assert h.group("g").state is S.PREPARING_REBALANCE
    # Whoever waited in SyncGroup must rejoin.
    assert h.take(parked_sync) == SyncGroupResult(E.REBALANCE_IN_PROGRESS)


def test_doJoinGroup_stable_leader_rejoin_triggers_rebalance(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    handle = h.send(J(member_id=leader, client_id="client0", reason="new partitions"))
    assert h.take(handle) is None
    group = h.group("g")
    assert group.state is S.PREPARING_REBALANCE
    assert group.rebalance.reason == f"leader {leader} rejoined"
    assert group.rebalance.client_reason == "new partitions"
    assert h.call(c.Heartbeat("g", 1, follower)).error is E.REBALANCE_IN_PROGRESS


def test_doJoinGroup_stable_follower_changed_metadata_triggers_rebalance(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    h.send(J(member_id=follower, client_id="client1", protocols=(("range", b"new-subscription"),)))
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert h.group("g").rebalance.reason == f"member {follower} updated its metadata"


def test_doJoinGroup_stable_follower_same_metadata_gets_current_generation(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    result = h.call(J(member_id=follower, client_id="client1"))
    assert result == JoinGroupResult(
        E.NONE, member_id=follower, generation_id=1, protocol_type="consumer",
        protocol_name="range", leader_id=leader,
    )
    assert h.group("g").state is S.STABLE


def test_doJoinGroup_empty_group_with_member_id_is_unknown(h: Harness) -> None:
    (m,) = h.stable_group(members=1)
    h.call(c.LeaveGroup("g", (c.LeavingMember(m),)))
    assert h.group("g").state is S.EMPTY
    assert h.call(J(member_id=m)).error is E.UNKNOWN_MEMBER_ID


# -- addMemberAndRebalance and the join phase -----------------------------------------------------


def test_addMemberAndRebalance_first_generation_is_one_and_leader_gets_members(h: Harness) -> None:
    a, b = h.new_member_id(client_id="a"), h.new_member_id(client_id="b")
    ha = h.send(J(member_id=a, client_id="a", protocols=(("range", b"A"),)))
    hb = h.send(J(member_id=b, client_id="b", protocols=(("range", b"B"),)))
    group = h.group("g")
    assert group.get(a).is_new and group.new_member_added
    h.advance(6_000)
    ra, rb = h.take(ha), h.take(hb)
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader_id == rb.leader_id == a
    assert [(m.member_id, m.metadata) for m in ra.members] == [(a, b"A"), (b, b"B")]
    assert rb.members == ()
    assert group.state is S.COMPLETING_REBALANCE
    assert not group.get(a).is_new
    assert group.pending_sync_members == {a, b}
    assert h.deadline(c.heartbeat_key("g", a)) == h.clock.now_ms() + 10_000
    assert h.deadline(c.sync_key("g")) == h.clock.now_ms() + 30_000


def test_onCompleteJoin_logs_one_rebalance_event(h: Harness) -> None:
    a = h.new_member_id()
    h.send(J(member_id=a, reason="starting up"))
    h.advance(3_000)
    (event,) = [e for e in h.events if isinstance(e, RebalanceCompleted)]
    assert event == RebalanceCompleted(
        group_id="g", old_generation=0, new_generation=1, reason=f"member {a} joined",
        client_reason="starting up", trigger_member=a, members_in=(a,), members_out=(),
        member_count=1, duration_ms=3_000,
    )


def test_InitialDelayedJoin_completes_after_delay(h: Harness) -> None:
    a = h.new_member_id()
    handle = h.send(J(member_id=a))
    h.advance(2_999)
    assert h.take(handle) is None
    h.advance(1)
    assert h.take(handle).generation_id == 1


def test_InitialDelayedJoin_is_not_cut_short_when_everyone_joined(h: Harness) -> None:
    a = h.new_member_id()
    handle = h.send(J(member_id=a))
    assert h.group("g").has_all_members_joined()
    assert h.take(handle) is None


def test_InitialDelayedJoin_rearmed_while_new_members_arrive(h: Harness) -> None:
    a = h.new_member_id(client_id="a")
    ha = h.send(J(member_id=a, client_id="a"))
    h.advance(2_000)
    b = h.new_member_id(client_id="b")
    hb = h.send(J(member_id=b, client_id="b"))
    h.advance(1_000)  # t=3000: a member arrived, wait another delay
    assert h.take(ha) is None
    h.advance(2_999)
    assert h.take(ha) is None
    h.advance(1)  # t=6000: nobody new, complete
    assert h.take(ha).generation_id == 1 and h.take(hb).generation_id == 1


def test_InitialDelayedJoin_bounded_by_rebalance_timeout(h: Harness) -> None:
    handles = []
    start = h.clock.now_ms()
    for i, at in enumerate([0, 1_000, 4_000, 7_000, 9_500]):
        h.advance(at - (h.clock.now_ms() - start))
        mid = h.new_member_id(client_id=f"m{i}")
        handles.append(h.send(J(member_id=mid, client_id=f"m{i}", rebalance_timeout_ms=10_000)))
    h.advance(10_000 - (h.clock.now_ms() - start) - 1)
    assert all(h.take(x) is None for x in handles)
    h.advance(1)  # remaining time ran out exactly at the rebalance timeout
    assert all(h.take(x).generation_id == 1 for x in handles)


def test_InitialDelayedJoin_not_extended_for_group_that_had_generations(h: Harness) -> None:
    (m,) = h.stable_group(members=1)
    h.call(c.LeaveGroup("g", (c.LeavingMember(m),)))
    assert h.group("g").generation_id == 2 and h.group("g").state is S.EMPTY
    x = h.new_member_id(client_id="x")
    hx = h.send(J(member_id=x, client_id="x"))
    h.advance(1_000)
    y = h.new_member_id(client_id="y")
    hy = h.send(J(member_id=y, client_id="y"))
    h.advance(2_000)
    assert h.take(hx).generation_id == 3 and h.take(hy).generation_id == 3


def test_onCompleteJoin_removes_dynamic_members_that_did_not_rejoin(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    hl = h.send(J(member_id=leader, client_id="client0"))
    for _ in range(5):  # the follower keeps heartbeating but never rejoins
        h.advance(5_000)
        assert h.call(c.Heartbeat("g", 1, follower)).error is E.REBALANCE_IN_PROGRESS
    h.advance(5_000)  # 30 s rebalance timeout
    result = h.take(hl)
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [leader]
    assert not h.group("g").has(follower)
    assert h.call(c.Heartbeat("g", 1, follower)).error is E.UNKNOWN_MEMBER_ID
    event = h.events[-1]
    assert isinstance(event, RebalanceCompleted) and event.members_out == (follower,)


def test_onCompleteJoin_reelects_leader_that_did_not_rejoin(h: Harness) -> None:
    leader, follower = h.stable_group(members=2)
    hf = h.send(J(member_id=follower, client_id="client1", protocols=(("range", b"changed"),)))
    for _ in range(6):
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, leader))
    result = h.take(hf)
    assert result.leader_id == follower and result.generation_id == 2
    assert [m.member_id for m in result.members] == [follower]


# -- static membership ----------------------------------------------------------------------------


def static_group(h: Harness, instances: list[str], protocols=None) -> dict[str, str]:  # noqa: ANN001
    kw = {} if protocols is None else {"protocols": protocols}
    handles = {i: h.send(J(instance_id=i, client_id=i, **kw)) for i in instances}
    h.advance(3_000 * len(instances))
    results = {i: h.take(x) for i, x in handles.items()}
    leader = next(iter(results.values())).leader_id
    member_ids = {i: r.member_id for i, r in results.items()}
    followers = [h.send(c.SyncGroup("g", 1, m, i)) for i, m in member_ids.items() if m != leader]
    lead_instance = next(i for i, m in member_ids.items() if m == leader)
    h.call(c.SyncGroup("g", 1, leader, lead_instance, assignments=tuple(
        (m, f"A-{i}".encode()) for i, m in member_ids.items()
    )))
    for x in followers:
        assert h.take(x).error is E.NONE
    assert h.group("g").state is S.STABLE
    return member_ids


def test_static_member_joins_without_member_id_round_trip(h: Harness) -> None:
    handle = h.send(J(instance_id="i-1", client_id="app"))
    assert h.take(handle) is None
    group = h.group("g")
    (member_id,) = group.members
    assert member_id.startswith("i-1-")
    assert group.static_members == {"i-1": member_id}


def test_updateStaticMemberAndRebalance_stable_takeover_without_rebalance(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2"])
    leader_before = h.group("g").leader_id
    log_before = len(h.log)
    # i-2 restarts and comes back without its member id.
    result = h.call(J(instance_id="i-2", client_id="i-2"))
    assert result.error is E.NONE
    new_id = result.member_id
    assert new_id != ids["i-2"] and new_id.startswith("i-2-")
    assert (result.generation_id, result.leader_id, result.members) == (1, leader_before, ())
    group = h.group("g")
    assert group.state is S.STABLE and group.generation_id == 1
    assert group.static_members["i-2"] == new_id
    assert group.get(new_id).assignment == b"A-i-2"  # keeps its assignment
    (record,) = h.log[log_before:]
    assert isinstance(record, GroupMetadataRecord)
    assert {m.member_id for m in record.members} == {ids["i-1"], new_id}
    # The restarted instance fetches its assignment with the same generation.
    assert h.call(c.SyncGroup("g", 1, new_id, "i-2")).assignment == b"A-i-2"


def test_static_leader_takeover_reports_old_leader_to_old_clients(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2"])
    leader_instance = next(i for i, m in ids.items() if m == h.group("g").leader_id)
    result = h.call(J(instance_id=leader_instance, client_id=leader_instance))
    # The new id must not look like the leader, or the client would compute a useless assignment.
    assert result.leader_id == ids[leader_instance] != result.member_id
    assert h.group("g").leader_id == result.member_id


def test_static_leader_takeover_skip_assignment_v9(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2"])
    leader_instance = next(i for i, m in ids.items() if m == h.group("g").leader_id)
    result = h.call(J(instance_id=leader_instance, client_id=leader_instance, supports_skip_assignment=True))
    assert result.skip_assignment is True
    assert result.leader_id == result.member_id
    assert len(result.members) == 2


def test_replaceStaticMember_fences_old_member_id(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2"])
    h.call(J(instance_id="i-2", client_id="i-2"))
    old = ids["i-2"]
    assert h.call(c.Heartbeat("g", 1, old, "i-2")).error is E.FENCED_INSTANCE_ID
    assert h.call(J(member_id=old, instance_id="i-2")).error is E.FENCED_INSTANCE_ID
    assert h.call(c.SyncGroup("g", 1, old, "i-2")).error is E.FENCED_INSTANCE_ID


def test_replaceStaticMember_fences_a_parked_join_of_the_old_id(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2", "i-3"])
    leader = h.group("g").leader_id
    by_member = {m: i for i, m in ids.items()}
    h.send(J(member_id=leader, instance_id=by_member[leader]))
    follower = next(m for m in ids.values() if m != leader)
    parked = h.send(J(member_id=follower, instance_id=by_member[follower]))
    assert h.take(parked) is None  # the third member has not rejoined yet
    h.send(J(instance_id=by_member[follower], client_id="restarted"))  # takes over the slot
    assert h.take(parked) == JoinGroupResult(E.FENCED_INSTANCE_ID, member_id=follower)


def test_updateStaticMemberAndRebalance_protocol_change_triggers_rebalance(h: Harness) -> None:
    both = two_protocols("range", "roundrobin")
    ids = static_group(h, ["i-1", "i-2", "i-3"], protocols=both)
    assert h.group("g").protocol_name == "range"
    h.send(J(instance_id="i-1", client_id="i-1", protocols=two_protocols("roundrobin", "range")))
    h.send(J(instance_id="i-2", client_id="i-2", protocols=two_protocols("roundrobin", "range")))
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert ids


def test_updateStaticMemberAndRebalance_completing_rebalance_triggers_rebalance(h: Harness) -> None:
    handles = [h.send(J(instance_id=i, client_id=i)) for i in ("i-1", "i-2")]
    h.advance(6_000)
    for x in handles:
        h.take(x)
    assert h.group("g").state is S.COMPLETING_REBALANCE
    h.send(J(instance_id="i-2", client_id="i-2"))
    assert h.group("g").state is S.PREPARING_REBALANCE


def test_updateStaticMemberAndRebalance_write_failure_restores_the_old_member(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2"])
    h.fail_next_append = E.NOT_LEADER_OR_FOLLOWER
    result = h.call(J(instance_id="i-2", client_id="i-2"))
    assert result.error is E.NOT_COORDINATOR and result.member_id == ""
    group = h.group("g")
    assert group.static_members["i-2"] == ids["i-2"] and group.has(ids["i-2"])
    assert group.num_members_awaiting_join == 0
    assert h.call(c.Heartbeat("g", 1, ids["i-2"], "i-2")).error is E.NONE


def test_static_member_with_unknown_instance_and_member_id_is_unknown(h: Harness) -> None:
    static_group(h, ["i-1"])
    assert h.call(J(member_id="whoever", instance_id="nobody")).error is E.UNKNOWN_MEMBER_ID


def test_onCompleteJoin_keeps_static_members_that_did_not_rejoin(h: Harness) -> None:
    ids = static_group(h, ["i-1", "i-2"])
    leader = h.group("g").leader_id
    by_member = {m: i for i, m in ids.items()}
    other = next(m for m in ids.values() if m != leader)
    handle = h.send(J(member_id=leader, instance_id=by_member[leader]))
    for _ in range(6):  # the other static member stays alive but never rejoins
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, other, by_member[other]))
    result = h.take(handle)
    assert result.generation_id == 2
    assert h.group("g").has(other)  # a dynamic member would have been dropped


# -- the initial delay on every path (coordinator/groups/classic/transitions.py: maybe_complete_join_phase) ------


def test_members_arriving_during_the_initial_delay_wait_for_it() -> None:
    h = Harness()  # group.initial.rebalance.delay.ms 3 000
    a, b = h.new_member_id(client_id="a"), h.new_member_id(client_id="b")
    ha, hb = h.send(J(member_id=a, client_id="a")), h.send(J(member_id=b, client_id="b"))
    assert h.group("g").has_all_members_joined()
    assert h.take(ha) is None and h.take(hb) is None  # everyone is in, but the delay decides
    h.advance(2_999)
    assert h.take(ha) is None
    h.advance(3_001)  # b's arrival extended the delay once
    assert h.take(ha).generation_id == 1 and h.take(hb).generation_id == 1


def test_a_leave_during_the_initial_delay_completes_the_join() -> None:
    """Kafka 4's Java coordinator (and ours): a removal ends the join phase at once when everyone
    left has joined; the seeds' Scala coordinator would wait for the delay."""
    h = Harness()
    a, b = h.new_member_id(client_id="a"), h.new_member_id(client_id="b")
    ha, hb = h.send(J(member_id=a, client_id="a")), h.send(J(member_id=b, client_id="b"))
    left = h.call(c.LeaveGroup("g", (c.LeavingMember(b),)))
    assert left.error is E.NONE
    assert h.take(hb).error is E.UNKNOWN_MEMBER_ID  # its parked join is answered
    joined = h.take(ha)  # no time passed
    assert joined is not None and joined.generation_id == 1 and joined.leader_id == a
    assert h.group("g").state is S.COMPLETING_REBALANCE

