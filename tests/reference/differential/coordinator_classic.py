"""The classic group protocol's state machine, row by row (the seeds' JoinGroup / SyncGroup / Heartbeat /
LeaveGroup walk-throughs, and OffsetCommit / OffsetFetch against a group's state): each row drives one
edge case through its steps on both brokers, every answer compared.

Both brokers run with group.max.size=3, group.min.session.timeout.ms=500 and no initial rebalance delay
(see SUITE_CONFIG in suite.py); rows that wait on a timeout (session expiry, a member that does not
rejoin) give it in the request, short, so they cost a second or two.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .apis_data import DATA
from .craft import DESCRIBE_GROUPS, OFFSET_FETCH, make, table_row
from .members import Classic, stable, subscription, wait_state
from .runner import Check, Session

row = table_row("classic", "classic")


async def describe(s: Session, group: str, label: str = "describe") -> Any:
    return await s.call(DESCRIBE_GROUPS, 5, make(DESCRIBE_GROUPS, groups=[group]), label)


async def grow(s: Session, members: list[Classic], name: str, version: int = 5, **join_args: Any) -> Classic:
    """One more member: it joins, the others rejoin in the rebalance it starts, everyone syncs."""
    new = await Classic.connect(s, members[0].group, name)
    joining = asyncio.create_task(new.join(version, **join_args))
    await wait_state(s, new.group, "PreparingRebalance")
    await asyncio.gather(*(m.join(version, what="rejoin") for m in members))
    await joining
    members = [*members, new]
    await asyncio.gather(*(m.sync() for m in members))
    return new


async def stable_group(s: Session, group: str, n: int) -> list[Classic]:
    members = [await stable(s, group, "a")]
    for name in "bcdefg"[: n - 1]:
        members.append(await grow(s, members, name))
    return members


# --- JoinGroup ------------------------------------------------------------------------------------------

@row("JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED, then joins with it",
     "a joins (v5) with member id \"\"; a joins again with the id it was given")
async def member_id_required(s: Session, group: str) -> None:
    await (await Classic.connect(s, group, "a")).join(5)


@row("JoinGroup v3 without a member id: joins at once", "a joins (v3) with member id \"\"")
async def no_member_id_required(s: Session, group: str) -> None:
    member = await Classic.connect(s, group, "a")
    await member.join(3)
    await member.sync(3)


@row("JoinGroup of an unknown member id to a new group", "a joins a group that does not exist with member id \"ghost\"")
async def join_unknown_member_new_group(s: Session, group: str) -> None:
    await (await Classic.connect(s, group, "a")).join(5, member_id="dw-ghost")


@row("JoinGroup of an unknown member id to a stable group", "a is stable; b joins with member id \"ghost\"")
async def join_unknown_member(s: Session, group: str) -> None:
    await stable(s, group, "a")
    await (await Classic.connect(s, group, "b")).join(5, member_id="dw-ghost")


@row("JoinGroup with a session timeout below group.min.session.timeout.ms", "a joins with a 100 ms session")
async def session_too_short(s: Session, group: str) -> None:
    await (await Classic.connect(s, group, "a")).join(5, session_ms=100)


@row("JoinGroup with a session timeout above group.max.session.timeout.ms", "a joins with a 2,000,000 ms session")
async def session_too_long(s: Session, group: str) -> None:
    await (await Classic.connect(s, group, "a")).join(5, session_ms=2_000_000)


@row("JoinGroup with an empty protocol type", "a joins with protocol type \"\"")
async def empty_protocol_type(s: Session, group: str) -> None:
    await (await Classic.connect(s, group, "a")).join(5, protocol_type="")


@row("JoinGroup with no protocols", "a joins with an empty protocol list")
async def no_protocols(s: Session, group: str) -> None:
    await (await Classic.connect(s, group, "a")).join(5, protocols=())


@row("JoinGroup with another protocol type than the group's", "a is stable (consumer); b joins as \"connect\"")
async def inconsistent_protocol_type(s: Session, group: str) -> None:
    await stable(s, group, "a")
    await (await Classic.connect(s, group, "b")).join(5, protocol_type="connect")


@row("JoinGroup with no protocol in common", "a is stable (range); b joins offering only roundrobin")
async def no_common_protocol(s: Session, group: str) -> None:
    await stable(s, group, "a")
    await (await Classic.connect(s, group, "b")).join(5, protocols=("roundrobin",))


@row("JoinGroup past group.max.size", "a, b and c are stable (group.max.size=3); d joins")
async def group_full(s: Session, group: str) -> None:
    await stable_group(s, group, 3)
    await (await Classic.connect(s, group, "d")).join(5)
    await describe(s, group)


@row("JoinGroup of a second member: rebalance, both rejoin, leader assigns",
     "a is stable; b joins; a's heartbeat; a rejoins; both sync; describe")
async def second_member(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    b = await Classic.connect(s, group, "b")
    joining = asyncio.create_task(b.join(5))
    await wait_state(s, group, "PreparingRebalance")
    await a.heartbeat(3, what="heartbeat during the rebalance")
    await a.join(5, what="rejoin")
    await joining
    await asyncio.gather(a.sync(3), b.sync(3))
    await describe(s, group)


@row("JoinGroup of the leader in Stable: a new rebalance", "a and b are stable; the leader rejoins; the other rejoins")
async def leader_rejoins(s: Session, group: str) -> None:
    a, b = await stable_group(s, group, 2)
    leader, other = (a, b) if a.leader == a.member_id else (b, a)
    rejoin = asyncio.create_task(leader.join(5, what="leader rejoins"))
    await wait_state(s, group, "PreparingRebalance")
    await other.join(5, what="other rejoins")
    await rejoin
    await describe(s, group)


@row("JoinGroup of a follower with the same protocols in Stable: no rebalance",
     "a and b are stable; the follower rejoins with what it had")
async def follower_rejoins(s: Session, group: str) -> None:
    a, b = await stable_group(s, group, 2)
    follower = b if a.leader == a.member_id else a
    await follower.join(5, what="follower rejoins")
    await describe(s, group)


@row("JoinGroup of a follower with new metadata in Stable: a rebalance",
     "a and b are stable; the follower rejoins subscribing to another topic; the leader rejoins")
async def follower_changes(s: Session, group: str) -> None:
    a, b = await stable_group(s, group, 2)
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    rejoin = asyncio.create_task(follower.join(5, what="follower rejoins", metadata=subscription(DATA, "dw-produce")))
    await wait_state(s, group, "PreparingRebalance")
    await leader.join(5, what="leader rejoins")
    await rejoin


@row("A member that does not rejoin in time is dropped from the generation",
     "a and b (rebalance timeouts 3 s) are stable; b rejoins; a stays silent; b's join completes without a")
async def rebalance_timeout(s: Session, group: str) -> None:
    a = await Classic.connect(s, group, "a")
    await a.join(5, rebalance_ms=3000)
    await a.sync(3)
    b = await grow(s, [a], "b", rebalance_ms=3000)
    await b.join(5, what="rejoin, a silent", rebalance_ms=3000)
    await a.heartbeat(3, what="a's heartbeat afterwards")
    await describe(s, group)


@row("A member whose session expires is removed", "a joins with a 1.5 s session and syncs, then is silent for 5 s")
async def session_expiry(s: Session, group: str) -> None:
    a = await Classic.connect(s, group, "a")
    await a.join(5, session_ms=1500)
    await a.sync(3)
    await asyncio.sleep(5.0)
    await describe(s, group)
    await a.heartbeat(3, what="heartbeat after expiry")


# --- static members -------------------------------------------------------------------------------------

@row("A static member joins without MEMBER_ID_REQUIRED", "a joins (v5) with instance id i-a")
async def static_join(s: Session, group: str) -> None:
    await stable(s, group, "a", instance_id="dw-i-a")
    await describe(s, group)


@row("A static member rejoins with a new member id: the old one is fenced",
     "a (instance i-a) is stable; a new process with i-a joins with member id \"\"; the old a heartbeats")
async def static_replaced(s: Session, group: str) -> None:
    old = await stable(s, group, "a", instance_id="dw-i-a")
    new = await Classic.connect(s, group, "a2", "dw-i-a")
    await new.join(5)
    await new.sync(3)
    await old.heartbeat(3, what="the old member's heartbeat")
    await old.sync(3, what="the old member's sync")
    await describe(s, group)


@row("A static member joins with a member id not its own", "a (instance i-a) is stable; i-a joins with member id \"ghost\"")
async def static_wrong_id(s: Session, group: str) -> None:
    await stable(s, group, "a", instance_id="dw-i-a")
    await (await Classic.connect(s, group, "a2", "dw-i-a")).join(5, member_id="dw-ghost")


@row("A static member leaves with a wrong member id", "a (instance i-a) is stable; LeaveGroup v4 for i-a with member id \"ghost\"")
async def static_leave_wrong_id(s: Session, group: str) -> None:
    a = await stable(s, group, "a", instance_id="dw-i-a")
    await a.leave(4, what="leave as ghost", member_id="dw-ghost")
    await describe(s, group)


# --- SyncGroup ------------------------------------------------------------------------------------------

@row("SyncGroup of an unknown member", "a is stable; sync with member id \"ghost\"")
async def sync_unknown(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    a.member_id = "dw-ghost"
    await a.sync(3, what="sync as ghost")


@row("SyncGroup with a wrong generation", "a is stable; a syncs with generation + 1")
async def sync_wrong_generation(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.sync(3, what="sync, wrong generation", generation=a.generation + 1)


@row("SyncGroup while the group prepares a rebalance", "a is stable; b joins; a syncs its old generation")
async def sync_during_rebalance(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    b = await Classic.connect(s, group, "b")
    joining = asyncio.create_task(b.join(5))
    await wait_state(s, group, "PreparingRebalance")
    await a.sync(3, what="sync during the rebalance")
    await a.join(5, what="rejoin")
    await joining


@row("SyncGroup of a follower waits for the leader's", "a and b join; the follower syncs; the leader syncs")
async def follower_waits(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    b = await Classic.connect(s, group, "b")
    joining = asyncio.create_task(b.join(5))
    await wait_state(s, group, "PreparingRebalance")
    await a.join(5, what="rejoin")
    await joining
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    waiting = asyncio.create_task(follower.sync(3, what="follower syncs"))
    await wait_state(s, group, "CompletingRebalance")
    await describe(s, group, "describe while the follower waits")
    await leader.sync(3, what="leader syncs")
    await waiting


@row("SyncGroup v5 with another protocol type or name", "a joins; a syncs (v5) naming \"connect\", then \"roundrobin\", then none")
async def sync_protocol_mismatch(s: Session, group: str) -> None:
    a = await Classic.connect(s, group, "a")
    await a.join(5)
    await a.sync(5, what="sync as connect", protocol_type="connect")
    await a.sync(5, what="sync as roundrobin", protocol_name="roundrobin")
    await a.sync(5, what="sync naming no protocol", protocol_type=None, protocol_name=None)


@row("SyncGroup with an assignment for a member the group lacks", "a joins; the leader assigns to itself and to \"ghost\"")
async def sync_foreign_assignment(s: Session, group: str) -> None:
    a = await Classic.connect(s, group, "a")
    await a.join(5)
    await a.sync(3, {a.member_id: b"mine", "dw-ghost": b"theirs"})
    await describe(s, group)


# --- Heartbeat ------------------------------------------------------------------------------------------

@row("Heartbeat of an unknown member", "a is stable; heartbeat as \"ghost\"; heartbeat to a group that does not exist")
async def heartbeat_unknown(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.heartbeat(3, what="heartbeat as ghost", member_id="dw-ghost")
    a.group = group + "-nowhere"
    await a.heartbeat(3, what="heartbeat to no group")


@row("Heartbeat with a wrong generation", "a is stable; heartbeat with generation + 1 and - 1")
async def heartbeat_generation(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.heartbeat(3, what="generation + 1", generation=a.generation + 1)
    await a.heartbeat(3, what="generation - 1", generation=a.generation - 1)


@row("Heartbeat between JoinGroup and SyncGroup", "a and b join; the leader heartbeats before syncing")
async def heartbeat_completing(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    b = await Classic.connect(s, group, "b")
    joining = asyncio.create_task(b.join(5))
    await wait_state(s, group, "PreparingRebalance")
    await a.join(5, what="rejoin")
    await joining
    await a.heartbeat(3, what="heartbeat before sync")
    await b.heartbeat(3, what="heartbeat before sync")


@row("Heartbeat after leaving", "a is stable; a leaves; a heartbeats")
async def heartbeat_after_leave(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.leave(3)
    await a.heartbeat(3, what="heartbeat after leaving")
    await describe(s, group)


# --- LeaveGroup -----------------------------------------------------------------------------------------

@row("LeaveGroup of an unknown member (v0-v2, v3+)", "a is stable; \"ghost\" leaves with v1, then v3")
async def leave_unknown(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.leave(1, what="v1 leave as ghost", member_id="dw-ghost")
    await a.leave(3, what="v3 leave as ghost", member_id="dw-ghost")


@row("LeaveGroup of a group that does not exist", "\"ghost\" leaves a group nobody made, v1 and v3")
async def leave_no_group(s: Session, group: str) -> None:
    a = await Classic.connect(s, group, "a")
    await a.leave(1, what="v1 leave", member_id="dw-ghost")
    await a.leave(3, what="v3 leave", member_id="dw-ghost")


@row("LeaveGroup of one member of two: a rebalance", "a and b are stable; b leaves; a's heartbeat; a rejoins")
async def leave_one_of_two(s: Session, group: str) -> None:
    a, b = await stable_group(s, group, 2)
    await b.leave(3)
    await a.heartbeat(3, what="a's heartbeat")
    await a.join(5, what="a rejoins")
    await describe(s, group)


@row("LeaveGroup v3 of several members at once", "a and b are stable; one LeaveGroup names both and a ghost")
async def leave_batch(s: Session, group: str) -> None:
    from .craft import LEAVE_GROUP

    a, b = await stable_group(s, group, 2)
    await s.call(LEAVE_GROUP, 5, make(LEAVE_GROUP, group_id=group, members=[
        {"member_id": m, "group_instance_id": None, "reason": "done"} for m in (a.member_id, b.member_id, "dw-ghost")]),
        "leave all")
    await describe(s, group)


# --- OffsetCommit and OffsetFetch against the group's state ------------------------------------------

async def fetch(s: Session, group: str, label: str = "fetch", version: int = 8) -> Any:
    return await s.call(OFFSET_FETCH, version, make(OFFSET_FETCH, groups=[
        {"group_id": group, "topics": [{"name": DATA, "partition_indexes": [0, 1]}]}]), label)


@row("OffsetCommit of a member of a stable group", "a is stable; a commits (v8); fetch")
async def commit_member(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.commit(8, {0: 5, 1: 6})
    await fetch(s, group)


@row("OffsetCommit of a non-member", "a is stable; \"ghost\" commits with a's generation (v8, v9)")
async def commit_non_member(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.commit(8, what="v8 commit as ghost", member_id="dw-ghost")
    await a.commit(9, what="v9 commit as ghost", member_id="dw-ghost")


@row("OffsetCommit with a wrong generation", "a is stable; a commits with generation + 1")
async def commit_wrong_generation(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.commit(8, what="commit, generation + 1", generation=a.generation + 1)


@row("OffsetCommit with generation -1 to a group with members", "a is stable; commit with generation -1 and no member id")
async def commit_simple_to_live_group(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.commit(8, what="simple commit", generation=-1, member_id="")
    await fetch(s, group)


@row("OffsetCommit while the group completes a rebalance", "a and b join; before syncing, a commits")
async def commit_completing(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    b = await Classic.connect(s, group, "b")
    joining = asyncio.create_task(b.join(5))
    await wait_state(s, group, "PreparingRebalance")
    await a.commit(8, what="commit while preparing")
    await a.join(5, what="rejoin")
    await joining
    await a.commit(8, what="commit while completing")


@row("OffsetCommit to an empty group with a generation", "a joins, syncs and leaves; a commits with its old generation (v8, v9)")
async def commit_empty_group(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.leave(3)
    await a.commit(8, what="v8 commit after leaving")
    await a.commit(9, what="v9 commit after leaving")
    await a.commit(8, what="simple commit", generation=-1, member_id="")
    await describe(s, group)


@row("OffsetCommit of a static member with a wrong member id", "a (instance i-a) is stable; i-a commits as \"ghost\"")
async def commit_static_fenced(s: Session, group: str) -> None:
    a = await stable(s, group, "a", instance_id="dw-i-a")
    await a.commit(8, what="commit as ghost", member_id="dw-ghost")


@row("OffsetFetch v9 naming a member of a classic group", "a is stable and commits; fetch (v9) naming a and its generation, then a ghost")
async def fetch_with_member(s: Session, group: str) -> None:
    a = await stable(s, group, "a")
    await a.commit(8, {0: 3})
    for label, member, epoch in (("fetch as a", a.member_id, a.generation), ("fetch as ghost", "dw-ghost", 7)):
        await s.call(OFFSET_FETCH, 9, make(OFFSET_FETCH, groups=[{"group_id": group, "member_id": member,
                                                                  "member_epoch": epoch, "topics": None}]), label)


ROWS: list[Check] = [value for value in list(globals().values()) if isinstance(value, Check)]
