"""SyncGroup, Heartbeat and LeaveGroup by state; session, new-member, pending-member and sync
timeouts."""

from __future__ import annotations

import pytest

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.classic.group import GroupState
from kbroker.coordinator.groups.events import RebalanceCompleted
from kbroker.protocol.records.classic_records import GroupMetadataRecord
from kbroker.coordinator.groups.results import (
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
J = join_request


@pytest.fixture
def h() -> Harness:
    return Harness()


def joined_pair(h: Harness) -> tuple[str, str]:
    """Two members through the join phase; the group is CompletingRebalance. Leader first."""
    a, b = h.new_member_id(client_id="a"), h.new_member_id(client_id="b")
    ha, hb = h.send(J(member_id=a, client_id="a")), h.send(J(member_id=b, client_id="b"))
    h.advance(6_000)
    leader = h.take(ha).leader_id
    h.take(hb)
    return leader, (b if leader == a else a)


# -- SyncGroup ------------------------------------------------------------------------------------


def test_handleSyncGroup_unknown_group(h: Harness) -> None:
    assert h.call(c.SyncGroup("nope", 1, "m")) == SyncGroupResult(E.UNKNOWN_MEMBER_ID)


def test_handleSyncGroup_dead_group(h: Harness) -> None:
    leader, _ = h.stable_group()
    h.group("g").transition_to(S.DEAD, 0)
    assert h.call(c.SyncGroup("g", 1, leader)).error is E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"member_id": "stranger"}, E.UNKNOWN_MEMBER_ID),
        ({"generation_id": 7}, E.ILLEGAL_GENERATION),
        ({"protocol_type": "connect"}, E.INCONSISTENT_GROUP_PROTOCOL),
        ({"protocol_name": "roundrobin"}, E.INCONSISTENT_GROUP_PROTOCOL),
    ],
)
def test_handleSyncGroup_validation(h: Harness, changes: dict, error: ErrorCode) -> None:
    leader, _ = h.stable_group()
    args = {"group_id": "g", "generation_id": 1, "member_id": leader} | changes
    assert h.call(c.SyncGroup(**args)).error is error


def test_handleSyncGroup_v5_matching_protocol_type_and_name_is_fine(h: Harness) -> None:
    leader, _ = h.stable_group()
    result = h.call(c.SyncGroup("g", 1, leader, protocol_type="consumer", protocol_name="range"))
    assert result.error is E.NONE


def test_handleSyncGroup_preparing_rebalance_answers_rebalance_in_progress(h: Harness) -> None:
    leader, follower = h.stable_group()
    h.send(J(member_id=leader, client_id="client0"))
    assert h.call(c.SyncGroup("g", 1, follower)).error is E.REBALANCE_IN_PROGRESS


def test_handleSyncGroup_completing_rebalance_follower_waits_for_leader(h: Harness) -> None:
    leader, follower = joined_pair(h)
    hf = h.send(c.SyncGroup("g", 1, follower))
    assert h.take(hf) is None
    log_before = len(h.log)
    hl = h.send(c.SyncGroup("g", 1, leader, assignments=((leader, b"L"), (follower, b"F"))))
    assert h.take(hf) == SyncGroupResult(E.NONE, "consumer", "range", b"F")
    assert h.take(hl) == SyncGroupResult(E.NONE, "consumer", "range", b"L")
    assert h.group("g").state is S.STABLE
    (record,) = h.log[log_before:]
    assert isinstance(record, GroupMetadataRecord)
    assert (record.generation, record.protocol, record.leader) == (1, "range", leader)
    assert {m.member_id: m.assignment for m in record.members} == {leader: b"L", follower: b"F"}
    assert not h.armed(c.sync_key("g"))  # everyone synced


def test_handleSyncGroup_leader_omitting_a_member_gives_it_an_empty_assignment(h: Harness) -> None:
    leader, follower = joined_pair(h)
    h.call(c.SyncGroup("g", 1, leader, assignments=((leader, b"L"),)))
    assert h.call(c.SyncGroup("g", 1, follower)) == SyncGroupResult(E.NONE, "consumer", "range", b"")


def test_handleSyncGroup_leader_reply_waits_for_the_group_metadata_write(h: Harness) -> None:
    leader, follower = joined_pair(h)
    hf = h.send(c.SyncGroup("g", 1, follower))
    h.fail_next_append = E.NOT_ENOUGH_REPLICAS
    hl = h.send(c.SyncGroup("g", 1, leader, assignments=((leader, b"L"), (follower, b"F"))))
    # The write failed: nobody gets the assignment, the error is translated, the group rebalances.
    assert h.take(hl) == SyncGroupResult(E.COORDINATOR_NOT_AVAILABLE)
    assert h.take(hf) == SyncGroupResult(E.COORDINATOR_NOT_AVAILABLE)
    group = h.group("g")
    assert group.state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    assert h.log == [r for r in h.log if not isinstance(r, GroupMetadataRecord) or r.generation != 1]


def test_handleSyncGroup_stable_returns_current_assignment_and_resets_session(h: Harness) -> None:
    leader, follower = h.stable_group()
    h.advance(4_000)
    result = h.call(c.SyncGroup("g", 1, follower))
    assert result == SyncGroupResult(E.NONE, "consumer", "range", f"assignment-{follower}".encode())
    assert h.deadline(c.heartbeat_key("g", follower)) == h.clock.now_ms() + 10_000


def test_onExpirePendingSync_removes_members_that_never_synced(h: Harness) -> None:
    leader, follower = joined_pair(h)
    h.call(c.SyncGroup("g", 1, leader, assignments=((leader, b"L"), (follower, b"F"))))
    assert h.group("g").state is S.STABLE
    for _ in range(6):  # the follower heartbeats but never sends SyncGroup
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, leader))
        h.call(c.Heartbeat("g", 1, follower))
    group = h.group("g")
    assert not group.has(follower)
    assert group.state is S.PREPARING_REBALANCE
    assert "did not sync" in group.rebalance.reason


def test_onExpirePendingSync_in_completing_rebalance_sends_waiting_members_back(h: Harness) -> None:
    leader, follower = joined_pair(h)
    hf = h.send(c.SyncGroup("g", 1, follower))
    for _ in range(6):  # the leader stays alive but never sends its assignment
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, leader))
    assert h.take(hf) == SyncGroupResult(E.REBALANCE_IN_PROGRESS)
    group = h.group("g")
    assert not group.has(leader) and group.leader_id == follower
    assert group.state is S.PREPARING_REBALANCE


def test_onExpirePendingSync_of_an_older_generation_is_ignored(h: Harness) -> None:
    leader, follower = joined_pair(h)
    h.machine.handle(c.SyncExpired("g", 0), h.clock.wall_ms())
    assert h.group("g").state is S.COMPLETING_REBALANCE and h.group("g").size == 2


# -- Heartbeat ------------------------------------------------------------------------------------


def test_handleHeartbeat_unknown_group(h: Harness) -> None:
    assert h.call(c.Heartbeat("nope", 1, "m")) == HeartbeatResult(E.UNKNOWN_MEMBER_ID)


def test_handleHeartbeat_dead_group(h: Harness) -> None:
    leader, _ = h.stable_group()
    h.group("g").transition_to(S.DEAD, 0)
    assert h.call(c.Heartbeat("g", 1, leader)).error is E.COORDINATOR_NOT_AVAILABLE


def test_handleHeartbeat_unknown_member_and_illegal_generation(h: Harness) -> None:
    leader, _ = h.stable_group()
    assert h.call(c.Heartbeat("g", 1, "stranger")).error is E.UNKNOWN_MEMBER_ID
    assert h.call(c.Heartbeat("g", 0, leader)).error is E.ILLEGAL_GENERATION


def test_handleHeartbeat_by_state(h: Harness) -> None:
    leader, follower = joined_pair(h)
    assert h.call(c.Heartbeat("g", 1, follower)).error is E.NONE  # CompletingRebalance
    h.call(c.SyncGroup("g", 1, leader, assignments=()))
    assert h.call(c.Heartbeat("g", 1, follower)).error is E.NONE  # Stable
    h.send(J(member_id=leader, client_id="a"))
    assert h.call(c.Heartbeat("g", 1, follower)).error is E.REBALANCE_IN_PROGRESS


def test_handleHeartbeat_resets_the_session_deadline(h: Harness) -> None:
    leader, follower = h.stable_group()
    for _ in range(12):  # a minute of heartbeats every 5 s with a 10 s session
        h.advance(5_000)
        assert h.call(c.Heartbeat("g", 1, leader)).error is E.NONE
        assert h.call(c.Heartbeat("g", 1, follower)).error is E.NONE
    assert h.group("g").size == 2 and h.group("g").state is S.STABLE


def test_onExpireHeartbeat_removes_member_and_rebalances(h: Harness) -> None:
    leader, follower = h.stable_group()
    h.advance(5_000)
    h.call(c.Heartbeat("g", 1, leader))
    h.advance(5_000)  # the follower's 10 s session is over
    group = h.group("g")
    assert not group.has(follower)
    assert group.state is S.PREPARING_REBALANCE
    assert group.rebalance.reason == f"session expired for member {follower}"
    assert h.call(c.Heartbeat("g", 1, leader)).error is E.REBALANCE_IN_PROGRESS
    result = h.call(J(member_id=leader, client_id="client0"))
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [leader]
    event = h.events[-1]
    assert isinstance(event, RebalanceCompleted)
    assert event.members_out == (follower,) and event.reason.startswith("session expired")


def test_onExpireHeartbeat_of_the_leader_elects_the_next_member(h: Harness) -> None:
    leader, follower = h.stable_group()
    h.advance(5_000)
    h.call(c.Heartbeat("g", 1, follower))
    h.advance(5_000)
    assert h.group("g").leader_id == follower


def test_onExpireHeartbeat_spares_a_member_awaiting_join(h: Harness) -> None:
    leader, follower = h.stable_group()
    hl = h.send(J(member_id=leader, client_id="client0"))
    for _ in range(6):  # the leader waits in JoinGroup (no heartbeats) for 30 s
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, follower))
    result = h.take(hl)
    assert result.error is E.NONE and result.leader_id == leader and result.generation_id == 2


def test_onExpireHeartbeat_new_member_after_new_member_join_timeout(h: Harness) -> None:
    (old,) = h.stable_group(members=1, rebalance_timeout_ms=600_000)
    newcomer = h.new_member_id(client_id="new")
    hn = h.send(J(member_id=newcomer, client_id="new", rebalance_timeout_ms=600_000))
    assert h.group("g").state is S.PREPARING_REBALANCE
    for _ in range(59):  # the old member heartbeats but does not rejoin for 4 min 55 s
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, old))
    assert h.take(hn) is None and h.group("g").has(newcomer)
    h.advance(5_000)  # 5 minutes: the new member's join times out
    assert h.take(hn) == JoinGroupResult(E.UNKNOWN_MEMBER_ID)
    assert not h.group("g").has(newcomer)


def test_onExpireHeartbeat_pending_member_unblocks_the_join_phase(h: Harness) -> None:
    leader, follower = h.stable_group()
    hl = h.send(J(member_id=leader, client_id="client0"))
    pending = h.new_member_id(client_id="shy", session_timeout_ms=8_000)
    hf = h.send(J(member_id=follower, client_id="client1"))
    assert h.take(hf) is None  # everyone rejoined but a member id handed out is still pending
    h.advance(8_000)
    assert not h.group("g").is_pending_member(pending)
    assert h.take(hl).generation_id == 2 and h.take(hf).generation_id == 2


def test_onExpireHeartbeat_pending_member_that_joins_in_time_is_kept(h: Harness) -> None:
    pending = h.new_member_id(session_timeout_ms=8_000)
    h.advance(7_000)
    h.send(J(member_id=pending, session_timeout_ms=8_000))
    h.advance(2_000)
    assert h.group("g").has(pending)


def test_onExpireHeartbeat_stale_expiry_is_dropped(h: Harness) -> None:
    leader, follower = h.stable_group()
    key = c.heartbeat_key("g", follower)
    h.clock.advance(10_000)
    h.timers.advance_to(h.clock.now_ms())  # the expiry fires and waits in the mailbox...
    h.call(c.Heartbeat("g", 1, follower))  # ...while a heartbeat re-arms the key
    h.call(c.Heartbeat("g", 1, leader))
    h.advance(0)
    assert h.stale_expiries >= 1
    assert h.group("g").has(follower) and h.armed(key)


# -- LeaveGroup -----------------------------------------------------------------------------------


def test_handleLeaveGroup_unknown_group_answers_unknown_member_for_each(h: Harness) -> None:
    result = h.call(c.LeaveGroup("nope", (c.LeavingMember("a"), c.LeavingMember("", "i-1"))))
    assert result == LeaveGroupResult(E.NONE, (
        LeaveMemberResult("a", None, E.UNKNOWN_MEMBER_ID),
        LeaveMemberResult("", "i-1", E.UNKNOWN_MEMBER_ID),
    ))


def test_handleLeaveGroup_dead_group(h: Harness) -> None:
    leader, _ = h.stable_group()
    h.group("g").transition_to(S.DEAD, 0)
    assert h.call(c.LeaveGroup("g", (c.LeavingMember(leader),))) == LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE)


def test_handleLeaveGroup_v3_batch_with_mixed_outcomes(h: Harness) -> None:
    static = h.send(J(instance_id="i-s", client_id="s"))
    h.advance(3_000)
    static_id = h.take(static).member_id
    h.call(c.SyncGroup("g", 1, static_id, "i-s", assignments=()))
    leader = h.group("g").leader_id
    result = h.call(c.LeaveGroup("g", (
        c.LeavingMember("", "i-s", reason="scaling down"),  # by instance id only
        c.LeavingMember("ghost"),
        c.LeavingMember("wrong-id", "i-s"),  # i-s already left in this batch
    )))
    assert [m.error for m in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert leader == static_id and h.group("g").state is S.EMPTY


def test_handleLeaveGroup_with_fenced_instance_id(h: Harness) -> None:
    handle = h.send(J(instance_id="i-1", client_id="x"))
    h.advance(3_000)
    real = h.take(handle).member_id
    result = h.call(c.LeaveGroup("g", (c.LeavingMember("impostor", "i-1"),)))
    assert result.members[0].error is E.FENCED_INSTANCE_ID
    assert h.group("g").has(real)


def test_handleLeaveGroup_of_leader_reelects_and_rebalances_with_reason(h: Harness) -> None:
    leader, follower = h.stable_group()
    result = h.call(c.LeaveGroup("g", (c.LeavingMember(leader, reason="shutting down"),)))
    assert result.members[0].error is E.NONE
    group = h.group("g")
    assert group.leader_id == follower
    assert group.state is S.PREPARING_REBALANCE
    assert group.rebalance.reason == f"member {leader} left"
    assert group.rebalance.client_reason == "shutting down"
    assert not h.armed(c.heartbeat_key("g", leader))


def test_last_member_leaving_empties_the_group_and_writes_metadata(h: Harness) -> None:
    (only,) = h.stable_group(members=1)
    log_before = len(h.log)
    h.call(c.LeaveGroup("g", (c.LeavingMember(only),)))
    group = h.group("g")
    assert group.state is S.EMPTY and group.generation_id == 2 and group.protocol_name is None
    (record,) = h.log[log_before:]
    assert record == GroupMetadataRecord("g", "consumer", 2, None, None, h.clock.wall_ms(), ())
    assert isinstance(h.events[-1], RebalanceCompleted) and h.events[-1].members_out == (only,)


def test_handleLeaveGroup_of_a_pending_member(h: Harness) -> None:
    pending = h.new_member_id()
    result = h.call(c.LeaveGroup("g", (c.LeavingMember(pending),)))
    assert result.members[0].error is E.NONE
    assert not h.group("g").is_pending_member(pending)
    assert not h.armed(c.pending_key("g", pending))


def test_handleLeaveGroup_of_the_last_laggard_completes_the_join_phase(h: Harness) -> None:
    leader, follower = h.stable_group()
    hl = h.send(J(member_id=leader, client_id="client0"))
    h.call(c.LeaveGroup("g", (c.LeavingMember(follower),)))
    result = h.take(hl)
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [leader]


def test_handleLeaveGroup_answers_the_members_own_parked_join(h: Harness) -> None:
    leader, second, third = h.stable_group(members=3)
    h.send(J(member_id=leader, client_id="client0"))
    parked = h.send(J(member_id=second, client_id="client1"))
    assert h.take(parked) is None  # the third member has not rejoined
    h.call(c.LeaveGroup("g", (c.LeavingMember(second),)))
    assert h.take(parked) == JoinGroupResult(E.UNKNOWN_MEMBER_ID)
    assert h.group("g").num_members_awaiting_join == 1
