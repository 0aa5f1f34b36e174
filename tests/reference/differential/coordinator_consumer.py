"""The KIP-848 consumer group protocol's state machine, row by row: ConsumerGroupHeartbeat's epochs,
fencing, static members, assignment reconciliation between members, subscriptions (names and regexes),
request validation, offsets committed and fetched by members, and the classic protocol meeting a
consumer group. Each row drives its steps on both brokers, every answer compared.

Both brokers run with group.consumer.session.timeout.ms=10000, heartbeat interval 1000 and
group.consumer.max.size=3 (SUITE_CONFIG in suite.py). Heartbeats that wait for the coordinator to
compute an assignment are repeated unrecorded until it comes (`Consumer.until`), the last one recorded.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .apis_data import DATA, PRODUCED
from .craft import (
    CONSUMER_GROUP_DESCRIBE,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    UNKNOWN_TOPIC_ID,
    make,
    table_row,
)
from .members import Classic, Consumer, stable
from .runner import Check, Session

row = table_row("consumer", "consumer")


def assigned(r: Any) -> bool:
    return r.assignment is not None and bool(r.assignment.topic_partitions)


def reconciled(member: Consumer, partitions: int):
    """Done when the member holds `partitions` partitions in all and the coordinator says nothing new."""
    return lambda r: r.assignment is None and sum(len(p) for _, p in member.assigned) == partitions


async def describe(s: Session, group: str, label: str = "describe") -> Any:
    return await s.call(CONSUMER_GROUP_DESCRIBE, 1, make(CONSUMER_GROUP_DESCRIBE, group_ids=[group]), label)


async def member(s: Session, group: str, name: str, instance_id: str | None = None) -> Consumer:
    return await Consumer.connect(s, group, name, member_id=f"dw-member-{name}-0001", instance_id=instance_id)


async def assigned_member(s: Session, group: str, name: str = "a", **kwargs: Any) -> Consumer:
    m = await member(s, group, name, kwargs.pop("instance_id", None))
    await m.join(**kwargs)
    await m.until(assigned)
    return m


# --- joining, heartbeats, epochs -------------------------------------------------------------------------

@row("A member joins and is assigned every partition", "a joins subscribing to dw-data; a heartbeats until assigned; describe")
async def join_assigned(s: Session, group: str) -> None:
    await assigned_member(s, group)
    await describe(s, group)


@row("A v0 member joins without a member id: the coordinator names it", "a joins (v0) with member id \"\"")
async def join_v0(s: Session, group: str) -> None:
    a = await Consumer.connect(s, group, "a")
    await a.join(0)
    await a.heartbeat(0, what="heartbeat with its id")


@row("A heartbeat of an unknown member", "a heartbeats with member id \"ghost\" at epoch 3 to a group that exists, then to none")
async def heartbeat_unknown(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    await a.heartbeat(what="heartbeat as ghost", member_id="dw-ghost", epoch=3)
    a.group = group + "-nowhere"
    await a.heartbeat(what="heartbeat to no group", member_id="dw-ghost", epoch=3)


@row("A heartbeat with an epoch ahead of the member's", "a is assigned; a heartbeats with its epoch + 5; then with its own")
async def epoch_ahead(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    await a.heartbeat(what="epoch + 5", epoch=a.epoch + 5)
    await a.heartbeat(what="own epoch")


@row("A heartbeat with an older epoch than the member's",
     "a is assigned; b joins; a reconciles to a newer epoch; a heartbeats with its first epoch")
async def epoch_behind(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    first = a.epoch
    b = await member(s, group, "b")
    await b.join()
    await a.until(lambda r: a.epoch > first, what="a heartbeats until its epoch moves")
    await a.heartbeat(what="first epoch", epoch=first, owned=a.owned())


@row("A member leaves (epoch -1)", "a is assigned; a leaves; a heartbeats at its old epoch; describe")
async def leave(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    old = a.epoch
    await a.heartbeat(what="leave", epoch=-1)
    await a.heartbeat(what="heartbeat after leaving", epoch=old)
    await describe(s, group)


@row("A member whose session expires is fenced", "a is assigned; silent for 13 s (session 10 s); describe; a heartbeats")
async def session_expiry(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    await asyncio.sleep(13.0)
    await describe(s, group)
    await a.heartbeat(what="heartbeat after expiry")


@row("Two members: the first revokes before the second is assigned",
     "a is assigned the 3 partitions; b joins; a heartbeats until it holds fewer; b heartbeats until assigned")
async def reconciliation(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    b = await member(s, group, "b")
    await b.join()
    await a.until(lambda r: r.assignment is not None and sum(len(p.partitions) for p in r.assignment.topic_partitions) < 3,
                  what="a heartbeats until revoking")
    await b.until(assigned, what="b heartbeats until assigned")
    await a.heartbeat(what="a heartbeats", owned=a.owned())
    await describe(s, group)


@row("A subscription change", "a is assigned dw-data; a subscribes to dw-data and dw-produce; heartbeats until assigned both")
async def subscription_change(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    await a.heartbeat(what="subscribe to two topics", topics=[DATA, PRODUCED], owned=a.owned())
    await a.until(reconciled(a, 17), what="a heartbeats until it holds both", topics=[DATA, PRODUCED])
    await describe(s, group)


@row("A subscription to no topic", "a joins subscribing to nothing")
async def subscribe_nothing(s: Session, group: str) -> None:
    a = await member(s, group, "a")
    await a.join(topics=[])
    await describe(s, group)


@row("A regex subscription", "a joins (v1) with the regex dw-dat.*; heartbeats until assigned")
async def regex(s: Session, group: str) -> None:
    a = await member(s, group, "a")
    await a.heartbeat(what="join", epoch=0, regex="dw-dat.*", rebalance_ms=30000, owned=[])
    await a.until(assigned, what="a heartbeats until assigned", regex="dw-dat.*")
    await describe(s, group)


@row("An invalid regex", "a joins (v1) with the regex \"((\"")
async def invalid_regex(s: Session, group: str) -> None:
    a = await member(s, group, "a")
    await a.heartbeat(what="join", epoch=0, regex="((", rebalance_ms=30000, owned=[])


@row("A static member leaves for a while (epoch -2) and comes back",
     "a (instance i-a) is assigned; a leaves with -2; a new process with i-a joins with another member id")
async def static_return(s: Session, group: str) -> None:
    a = await assigned_member(s, group, instance_id="dw-i-a")
    await a.heartbeat(what="temporary leave", epoch=-2)
    back = await Consumer.connect(s, group, "a2", member_id="dw-member-a2-0001", instance_id="dw-i-a")
    await back.join()
    await back.until(assigned)
    await describe(s, group)


@row("A static member's instance id held by a live member", "a (instance i-a) is assigned; b joins with instance i-a")
async def instance_in_use(s: Session, group: str) -> None:
    await assigned_member(s, group, instance_id="dw-i-a")
    b = await member(s, group, "b", instance_id="dw-i-a")
    await b.join()


@row("A static member heartbeats with another member id", "a (instance i-a) is assigned; i-a heartbeats as \"ghost\" at a's epoch")
async def static_fenced(s: Session, group: str) -> None:
    a = await assigned_member(s, group, instance_id="dw-i-a")
    await a.heartbeat(what="heartbeat as ghost", member_id="dw-ghost", owned=a.owned())


@row("group.consumer.max.size", "a, b and c join (group.consumer.max.size=3); d joins")
async def group_full(s: Session, group: str) -> None:
    for name in "abc":
        await (await member(s, group, name)).join()
    await (await member(s, group, "d")).join()


# --- what the coordinator refuses -----------------------------------------------------------------------

def invalid(title: str, steps: str, **fields: Any) -> Check:
    async def fn(s: Session, group: str) -> None:
        a = await member(s, group, "a")
        args = {"what": "join", "epoch": 0, "topics": [DATA], "rebalance_ms": 30000, "owned": [], **fields}
        await a.heartbeat(**args)
    return row(title, steps)(fn)


INVALID = [
    invalid("v1 join without a member id", "a joins (v1) with member id \"\"", member_id=""),
    invalid("Join without a rebalance timeout", "a joins with rebalance timeout -1", rebalance_ms=-1),
    invalid("Join with owned partitions", "a joins claiming dw-data partition 0",
            owned=[{"topic_id": UNKNOWN_TOPIC_ID, "partitions": [0]}]),
    invalid("Join with neither topic names nor a regex", "a joins with both subscription fields null", topics=None),
    invalid("An epoch below -2", "a heartbeats at epoch -3", epoch=-3),
    invalid("An empty instance id", "a joins with instance id \"\"", instance_id=""),
    invalid("An empty rack id", "a joins with rack id \"\"", rack_id=""),
    invalid("An unknown server assignor", "a joins asking for the assignor \"planet\"", assignor="planet"),
]


@row("An empty group id", "a joins group \"\"")
async def empty_group(s: Session, group: str) -> None:
    a = await member(s, "", "a")
    await a.join()


# --- offsets of a consumer group -----------------------------------------------------------------------

async def commit(s: Session, a: Consumer, label: str, version: int = 9, epoch: int | None = None,
                 member_id: str | None = None) -> Any:
    return await s.call(OFFSET_COMMIT, version, make(
        OFFSET_COMMIT, group_id=a.group, generation_id_or_member_epoch=a.epoch if epoch is None else epoch,
        member_id=a.member_id if member_id is None else member_id, topics=[{"name": DATA, "partitions": [
            {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}]}]), label, conn=a.conn)


@row("OffsetCommit of a member", "a is assigned; commits at its epoch (v9), at an older one, as a ghost, and with v8")
async def member_commits(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    await commit(s, a, "commit at its epoch")
    await commit(s, a, "commit at an older epoch", epoch=a.epoch - 1)
    await commit(s, a, "commit at a newer epoch", epoch=a.epoch + 1)
    await commit(s, a, "commit as ghost", member_id="dw-ghost")
    await commit(s, a, "commit with v8", version=8)
    await commit(s, a, "simple commit", epoch=-1, member_id="")


@row("OffsetFetch of a member", "a is assigned and commits; fetch (v9) at its epoch, at a stale one, as a ghost")
async def member_fetches(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    await commit(s, a, "commit")
    for label, mid, epoch in (("fetch at its epoch", a.member_id, a.epoch), ("fetch at a stale epoch", a.member_id,
                              a.epoch - 1), ("fetch as ghost", "dw-ghost", a.epoch), ("fetch as nobody", None, -1)):
        await s.call(OFFSET_FETCH, 9, make(OFFSET_FETCH, groups=[{"group_id": group, "member_id": mid,
                                                                  "member_epoch": epoch, "topics": None}]), label)


# --- the classic protocol and consumer groups ----------------------------------------------------------

@row("A classic member joins a consumer group", "a (consumer protocol) is assigned; b joins with JoinGroup v5; a heartbeats")
async def classic_into_consumer(s: Session, group: str) -> None:
    a = await assigned_member(s, group)
    b = await Classic.connect(s, group, "b")
    await b.join(5)
    await a.until(lambda r: r.assignment is not None, what="a heartbeats until its assignment changes")
    await describe(s, group)


@row("A consumer member joins an empty classic group", "a classic member commits and leaves; a consumer-protocol member joins")
async def consumer_into_classic(s: Session, group: str) -> None:
    old = await stable(s, group, "old")
    await old.commit(8, {0: 4})
    await old.leave(3)
    a = await member(s, group, "a")
    await a.join()
    await describe(s, group)
    await s.call(OFFSET_FETCH, 8, make(OFFSET_FETCH, groups=[{"group_id": group, "topics": None}]), "fetch")


@row("A consumer member joins a classic group with members", "a classic member is stable; a consumer-protocol member joins")
async def consumer_into_live_classic(s: Session, group: str) -> None:
    await stable(s, group, "old")
    a = await member(s, group, "a")
    await a.join()


@row("Classic APIs on a consumer group", "a is assigned; DescribeGroups, ListGroups (v5), DeleteGroups, classic Heartbeat")
async def classic_apis(s: Session, group: str) -> None:
    from .craft import HEARTBEAT

    a = await assigned_member(s, group)
    await s.call(DESCRIBE_GROUPS, 5, make(DESCRIBE_GROUPS, groups=[group]), "describe (classic)")
    await s.call(LIST_GROUPS, 5, make(LIST_GROUPS), "list",
                 project=lambda p: {**p, "groups": [g for g in p["groups"] if g["group_id"] == group]})
    await s.call(DELETE_GROUPS, 2, make(DELETE_GROUPS, groups_names=[group]), "delete")
    await s.call(HEARTBEAT, 4, make(HEARTBEAT, group_id=group, generation_id=a.epoch, member_id=a.member_id),
                 "classic heartbeat")


ROWS: list[Check] = [value for value in list(globals().values()) if isinstance(value, Check)] + INVALID
