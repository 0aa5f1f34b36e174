"""The rebalance history ring, the stuck-rebalance trace and the test controls, driven through the
real service with a manual clock."""

from __future__ import annotations

import asyncio

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.classic.controls import ExpireMember, ExpireSessions, ForceRebalance
from kbroker.coordinator.groups.history import RebalanceHistory
from kbroker.coordinator.groups.events import RebalanceCompleted
from kbroker.protocol.errors import ErrorCode
from kbroker.tests.coordinator_harness import join_request
from kbroker.tests.unit.test_coordinator_actor import advance, make_service, stable_group

E = ErrorCode
J = join_request


def _event(group: str, gen: int) -> RebalanceCompleted:
    return RebalanceCompleted(group, gen - 1, gen, "member joined", None, "m", ("m",), (), 1, 5)


def test_ring_is_bounded_per_group_and_listeners_see_every_entry() -> None:
    history = RebalanceHistory(depth=3)
    seen = []
    history.subscribe(seen.append)
    for gen in range(1, 6):
        history.record_rebalance(_event("a", gen), now_ms=gen)
    history.record_rebalance(_event("b", 1), now_ms=9)
    assert [e.new_generation for e in history.entries("a")] == [3, 4, 5]
    assert [e.group_id for e in history.entries("b")] == ["b"]
    assert len(seen) == 6
    history.forget("a")
    assert history.entries("a") == [] and history.groups() == ["b"]


def test_the_number_of_groups_kept_is_bounded_too() -> None:
    history = RebalanceHistory(depth=2, max_groups=2)
    history.record_rebalance(_event("a", 1), now_ms=1)
    history.record_rebalance(_event("b", 1), now_ms=2)
    history.record_rebalance(_event("a", 2), now_ms=3)  # a is now the most recent
    history.record_rebalance(_event("c", 1), now_ms=4)  # b, the stalest, goes
    assert history.groups() == ["a", "c"]


async def test_completed_rebalances_land_in_the_history_with_their_reason() -> None:
    service, clock, _ = await make_service()
    try:
        ids = await stable_group(service, clock, 2)
        entries = service.history.entries("g")
        assert [(e.kind, e.old_generation, e.new_generation, e.member_count) for e in entries] == [
            ("rebalance", 0, 1, 2)]
        assert set(entries[0].members_in) == set(ids)
        assert entries[0].time_ms == clock.wall_ms()
    finally:
        await service.stop()


async def test_a_stuck_rebalance_says_who_it_waits_for_and_how_long_is_left() -> None:
    service, clock, _ = await make_service()
    try:
        leader, follower = await stable_group(service, clock, 2)
        # The leader rejoins (a rebalance starts); the follower does not.
        rejoin = asyncio.create_task(service.join_group(J("g", leader, client_id="c0", reason="test")))
        await service.quiesce()
        await advance(service, clock, 5_000)
        status = service.group_status("g")
        stuck = status["rebalance_in_progress"]
        assert status["state"] == "PreparingRebalance"
        assert stuck["members_waiting"] == [follower]
        assert stuck["client_reason"] == "test"
        assert stuck["why"] == "waiting for 1 of 2 members to rejoin, 25 s of 30 s rebalance timeout left"
        rejoin.cancel()
    finally:
        await service.stop()


async def test_force_rebalance_moves_a_stable_group_and_is_recorded() -> None:
    service, clock, _ = await make_service(groups=("g", "nope"))
    try:
        await stable_group(service, clock, 2)
        result = await service.control(ForceRebalance("g", "chaos test"))
        assert result.error is E.NONE
        assert service.group_status("g")["state"] == "PreparingRebalance"
        assert service.group_status("g")["rebalance_in_progress"]["reason"] == "forced by test control: chaos test"
        kinds = [e.kind for e in service.history.entries("g")]
        assert kinds == ["rebalance", "control"]
        missing = await service.control(ForceRebalance("nope"))
        assert missing.error is E.GROUP_ID_NOT_FOUND
    finally:
        await service.stop()


async def test_expire_member_removes_it_and_the_group_rebalances_without_it() -> None:
    service, clock, _ = await make_service()
    try:
        leader, follower = await stable_group(service, clock, 2)
        assert (await service.control(ExpireMember("g", follower))).error is E.NONE
        hb = await service.heartbeat(c.Heartbeat("g", 1, follower))
        assert hb.error is E.UNKNOWN_MEMBER_ID
        assert [m["member_id"] for m in service.group_status("g")["members"]] == [leader]
        assert (await service.control(ExpireMember("g", follower))).error is E.UNKNOWN_MEMBER_ID
        assert (await service.control(ExpireSessions("g"))).error is E.NONE
        await advance(service, clock, 1)
        assert service.group_status("g")["state"] == "Empty"
    finally:
        await service.stop()


async def test_not_coordinator_window_and_failing_the_next_requests() -> None:
    service, clock, _ = await make_service()
    try:
        leader, _follower = await stable_group(service, clock, 2)
        service.faults.not_coordinator_until["g"] = clock.now_ms() + 5_000
        assert (await service.heartbeat(c.Heartbeat("g", 1, leader))).error is E.NOT_COORDINATOR
        clock.advance(5_000)
        assert (await service.heartbeat(c.Heartbeat("g", 1, leader))).error is E.NONE
        service.faults.fail_next[("g", "Heartbeat")] = [2, E.REBALANCE_IN_PROGRESS]
        codes = [(await service.heartbeat(c.Heartbeat("g", 1, leader))).error for _ in range(3)]
        assert codes == [E.REBALANCE_IN_PROGRESS, E.REBALANCE_IN_PROGRESS, E.NONE]
    finally:
        await service.stop()


def test_reasons_fold_into_a_few_kinds_for_metrics() -> None:
    from kbroker.coordinator.groups.history import reason_kind

    assert reason_kind("member c-1 joined") == "member_joined"
    assert reason_kind("member c-1 left") == "member_left"
    assert reason_kind("session expired for member c-1") == "session_expired"
    assert reason_kind("session expired for member c-1 (test control)") == "test_control"
    assert reason_kind("member c-1 updated its metadata") == "metadata_changed"
    assert reason_kind("members a, b did not sync in time") == "sync_timeout"
    assert reason_kind("forced by test control: x") == "test_control"
    assert reason_kind("something new") == "other"


async def test_a_coordinator_move_stops_session_timers_and_rearms_them_at_load() -> None:
    from kbroker.coordinator.groups.classic.controls import CoordinatorMove

    service, clock, _ = await make_service()
    try:
        leader, follower = await stable_group(service, clock, 2)
        assert (await service.control(CoordinatorMove("g", "unload"))).error is E.NONE
        await advance(service, clock, 25_000)  # far past the 10 s session timeout: nobody expires
        assert len(service.group_status("g")["members"]) == 2
        assert (await service.control(CoordinatorMove("g", "load"))).error is E.NONE
        await advance(service, clock, 9_000)
        assert len(service.group_status("g")["members"]) == 2  # re-armed from the load
        await advance(service, clock, 2_000)
        assert service.group_status("g")["state"] in ("PreparingRebalance", "Empty")  # now they expire
    finally:
        await service.stop()
