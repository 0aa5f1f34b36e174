"""Checks of the group APIs, every common version: FindCoordinator, OffsetCommit, OffsetFetch,
DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, one well-formed round of JoinGroup, SyncGroup,
Heartbeat and LeaveGroup per version, ConsumerGroupHeartbeat and ConsumerGroupDescribe. The state
machine's edge cases are the coordinator tables' (coordinator_classic.py, coordinator_consumer.py).

The group "" is every check's that names it (OffsetCommit creates it, DeleteGroups deletes it): those
run one at a time after the others, in the order listed.

The setup (`setup_groups`) leaves dw-group, a simple group (no members) with offsets committed for
dw-data partitions 0 and 1.
"""

from __future__ import annotations

from typing import Any

from kbroker.coordinator.partitioning import one_per_partition

from .apis_data import DATA
from .craft import (
    CONSUMER_GROUP_DESCRIBE,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    UNKNOWN_TOPIC_ID,
    make,
    topic_id,
    unique,
)
from .members import Classic, Consumer, stable, subscription
from .runner import Check, Session
from .versions import sweep

GROUP = "dw-group"
SETUP_GROUPS = (GROUP,)


async def setup_groups(s: Session) -> None:
    """Both coordinators ready on every partition before the checks start. Kafka makes
    __consumer_offsets and __transaction_state on first use and loads their 50 partitions one by one
    (answering 14, 15 or 16 meanwhile), and its producer ids come in blocks from its controller;
    kbroker has them ready from the start. Asked until every answer is clean, the last one recorded."""
    groups = one_per_partition("dw-ready")
    await s.call_until(lambda r: r.error_code == 0, FIND_COORDINATOR, 3, make(FIND_COORDINATOR, key=GROUP),
                       "setup: find the coordinator", tries=600)
    await s.call_until(lambda r: all(g.error_code == 0 for g in r.groups), OFFSET_FETCH, 8, make(
        OFFSET_FETCH, groups=[{"group_id": g, "topics": None} for g in groups]),
        "setup: every __consumer_offsets partition loaded", tries=600)
    await s.call_until(lambda r: r.error_code == 0, INIT_PRODUCER_ID, 4, make(
        INIT_PRODUCER_ID, transactional_id=None, transaction_timeout_ms=-1), "setup: an idempotent producer id", tries=600)
    await s.call_until(lambda r: r.error_code == 0, FIND_COORDINATOR, 3, make(FIND_COORDINATOR, key="dw-txn", key_type=1),
                       "setup: find a transaction coordinator", tries=600)
    for transactional_id in one_per_partition("dw-ready-txn"):
        await s.call_until(lambda r: r.error_code == 0, INIT_PRODUCER_ID, 4, make(
            INIT_PRODUCER_ID, transactional_id=transactional_id, transaction_timeout_ms=60000),
            "setup: every __transaction_state partition loaded", tries=600, record=False)
    await s.call(OFFSET_COMMIT, 8, make(
        OFFSET_COMMIT, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[{"name": DATA, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": "m0"},
            {"partition_index": 1, "committed_offset": 2, "committed_metadata": None}]}]), "setup: commit dw-group's offsets")


def find_coordinator_checks() -> list[Check]:
    def find(*keys: str, key_type: int = 0):
        return lambda s, v: make(FIND_COORDINATOR, key=keys[0], key_type=key_type, coordinator_keys=list(keys))

    return [
        *sweep(FIND_COORDINATOR, "a group", find(GROUP)),
        *sweep(FIND_COORDINATOR, "a transactional id", find("dw-txn-fc", key_type=1), versions=range(1, 7)),
        *sweep(FIND_COORDINATOR, "an unknown key type", find(GROUP, key_type=7), versions=range(1, 7)),
        *sweep(FIND_COORDINATOR, "a share-group key", find("dw-share:AAAAAAAAAAAAAAAAAAAAAA:0", key_type=2),
               versions=range(1, 7)),
        *sweep(FIND_COORDINATOR, "a malformed share-group key", find("dw-share", key_type=2), versions=[6]),
        *sweep(FIND_COORDINATOR, "an empty group id", find(""), serial=True),
        *sweep(FIND_COORDINATOR, "several groups", find(GROUP, "dw-other-group", "dw-third-group"),
               versions=range(4, 7)),
    ]


def _partitions(offsets: dict[int, int], metadata: str | None = "") -> list[dict]:
    return [{"partition_index": p, "committed_offset": o, "committed_metadata": metadata} for p, o in offsets.items()]


def offset_commit_checks() -> list[Check]:
    def commit(group: str | None = None, topic: str = DATA, offsets: dict[int, int] | None = None,
               generation: int = -1, metadata: str | None = "", member: str = "", tid: Any = None, **top: Any):
        async def build(s: Session, v: int) -> Any:
            t: dict = {"name": topic, "partitions": _partitions(offsets or {0: 1}, metadata)}
            if v >= 10:
                t = {"topic_id": tid or (await topic_id(s, topic) if topic == DATA else UNKNOWN_TOPIC_ID),
                     "partitions": t["partitions"]}
            return make(OFFSET_COMMIT, group_id=unique(s, "dw") if group is None else group,
                        generation_id_or_member_epoch=generation, member_id=member, topics=[t], **top)
        return build

    return [
        *sweep(OFFSET_COMMIT, "a simple group's commit", commit(offsets={0: 1, 1: 2})),
        *sweep(OFFSET_COMMIT, "retention time", commit(retention_time_ms=60_000), versions=range(2, 5)),
        *sweep(OFFSET_COMMIT, "unknown topic", commit(topic="dw-nope-oc")),
        *sweep(OFFSET_COMMIT, "partition out of range", commit(offsets={99: 1})),
        *sweep(OFFSET_COMMIT, "metadata too large", commit(metadata="m" * 5000)),
        *sweep(OFFSET_COMMIT, "an empty group id", commit(group=""), serial=True),
        *sweep(OFFSET_COMMIT, "generation 5 of an unknown group", commit(generation=5, member="dw-ghost")),
        *sweep(OFFSET_COMMIT, "a member id without a generation", commit(member="dw-ghost")),
    ]


def offset_fetch_checks() -> list[Check]:
    def fetch(group: str = GROUP, topics: list[tuple[str, list[int]]] | None = None, *, every: bool = False,
              require_stable: bool = False, groups: list[str] | None = None, member: tuple[str, int] | None = None):
        async def build(s: Session, v: int) -> Any:
            wanted = None if every else [(t, ps) for t, ps in (topics or [(DATA, [0, 1, 2])])]
            if v < 8:
                return make(OFFSET_FETCH, group_id=group, require_stable=require_stable,
                            topics=None if wanted is None else [{"name": t, "partition_indexes": ps} for t, ps in wanted])
            entries = []
            for t, ps in wanted or []:
                tid = (await topic_id(s, t) if t == DATA else UNKNOWN_TOPIC_ID) if v >= 10 else None
                entries.append({"name": t, "topic_id": tid, "partition_indexes": ps} if tid else
                               {"name": t, "partition_indexes": ps})
            mid, epoch = member or (None, -1)
            return make(OFFSET_FETCH, require_stable=require_stable, groups=[
                {"group_id": g, "member_id": mid, "member_epoch": epoch, "topics": None if wanted is None else entries}
                for g in (groups or [group])])
        return build

    return [
        *sweep(OFFSET_FETCH, "committed offsets", fetch()),
        *sweep(OFFSET_FETCH, "every topic", fetch(every=True), versions=range(2, 11)),
        *sweep(OFFSET_FETCH, "unknown group", fetch("dw-nobody")),
        *sweep(OFFSET_FETCH, "unknown topic", fetch(topics=[("dw-nope-of", [0])])),
        *sweep(OFFSET_FETCH, "require stable", fetch(require_stable=True), versions=range(7, 11)),
        *sweep(OFFSET_FETCH, "several groups", fetch(groups=[GROUP, "dw-nobody"]), versions=range(8, 11)),
        *sweep(OFFSET_FETCH, "a member epoch for a simple group", fetch(member=("dw-ghost", 3)), versions=range(9, 11)),
        *sweep(OFFSET_FETCH, "an empty group id", fetch(""), serial=True),
    ]


def describe_list_delete_checks() -> list[Check]:
    def describe(*groups: str, ops: bool = False):
        return lambda s, v: make(DESCRIBE_GROUPS, groups=list(groups), include_authorized_operations=ops)

    async def describe_stable(s: Session, v: int) -> None:
        await stable(s, unique(s, "dw"))
        await s.call(DESCRIBE_GROUPS, v, make(DESCRIBE_GROUPS, groups=[unique(s, "dw")]), "describe")

    def only(*groups: str):
        def project(plain: dict) -> dict:
            plain["groups"] = [g for g in plain["groups"] if g["group_id"] in groups]
            return plain
        return project

    async def listed(s: Session, v: int, **filters: Any) -> None:
        group = unique(s, "dw")
        await stable(s, group)
        await s.call(LIST_GROUPS, v, make(LIST_GROUPS, **filters), "list", project=only(GROUP, group))

    async def delete(s: Session, v: int, members: bool) -> None:
        group = unique(s, "dw")
        if members:
            await stable(s, group)
        else:
            await s.call(OFFSET_COMMIT, 8, make(OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1,
                                                topics=[{"name": DATA, "partitions": _partitions({0: 1})}]), "commit")
        await s.call(DELETE_GROUPS, v, make(DELETE_GROUPS, groups_names=[group]), "delete")
        await s.call(DESCRIBE_GROUPS, 5, make(DESCRIBE_GROUPS, groups=[group]), "describe after")

    return [
        *sweep(DESCRIBE_GROUPS, "a simple group", describe(GROUP)),
        *sweep(DESCRIBE_GROUPS, "unknown group", describe("dw-nobody")),
        *sweep(DESCRIBE_GROUPS, "an empty group id", describe(""), serial=True),
        *sweep(DESCRIBE_GROUPS, "authorized operations", describe(GROUP, ops=True), versions=range(3, 7)),
        *sweep(DESCRIBE_GROUPS, "a stable group", steps=describe_stable),
        *sweep(LIST_GROUPS, "every group", steps=listed),
        *sweep(LIST_GROUPS, "by state", steps=lambda s, v: listed(s, v, states_filter=["Empty"]), versions=range(4, 6)),
        *sweep(LIST_GROUPS, "classic groups", steps=lambda s, v: listed(s, v, types_filter=["classic"]), versions=[5]),
        *sweep(LIST_GROUPS, "consumer groups", steps=lambda s, v: listed(s, v, types_filter=["consumer"]), versions=[5]),
        *sweep(LIST_GROUPS, "an unknown type", steps=lambda s, v: listed(s, v, types_filter=["planet"]), versions=[5]),
        *sweep(DELETE_GROUPS, "an empty group", steps=lambda s, v: delete(s, v, False)),
        *sweep(DELETE_GROUPS, "a group with members", steps=lambda s, v: delete(s, v, True)),
        *sweep(DELETE_GROUPS, "unknown group", lambda s, v: make(DELETE_GROUPS, groups_names=["dw-nobody"])),
        *sweep(DELETE_GROUPS, "an empty group id", lambda s, v: make(DELETE_GROUPS, groups_names=[""]), serial=True),
    ]


def offset_delete_checks() -> list[Check]:
    def body(group: str, topic: str = DATA, partitions: tuple[int, ...] = (0,)) -> Any:
        return make(OFFSET_DELETE, group_id=group, topics=[
            {"name": topic, "partitions": [{"partition_index": p} for p in partitions]}])

    async def empty_group(s: Session, v: int, topic: str = DATA) -> None:
        group = unique(s, "dw")
        await s.call(OFFSET_COMMIT, 8, make(OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1,
                                            topics=[{"name": DATA, "partitions": _partitions({0: 1, 1: 1})}]), "commit")
        await s.call(OFFSET_DELETE, v, body(group, topic), "delete")

    async def subscribed(s: Session, v: int, topic: str) -> None:
        group = unique(s, "dw")
        member = await stable(s, group, metadata=subscription(DATA))
        await member.commit(8, {0: 1})
        await s.call(OFFSET_DELETE, v, body(group, topic), "delete")

    return [
        *sweep(OFFSET_DELETE, "an empty group's offsets", steps=empty_group),
        *sweep(OFFSET_DELETE, "unknown topic", steps=lambda s, v: empty_group(s, v, "dw-nope-od")),
        *sweep(OFFSET_DELETE, "unknown group", lambda s, v: body("dw-nobody")),
        *sweep(OFFSET_DELETE, "a topic the group subscribes to", steps=lambda s, v: subscribed(s, v, DATA)),
        *sweep(OFFSET_DELETE, "a topic a stable group does not subscribe to",
               steps=lambda s, v: subscribed(s, v, "dw-produce")),
    ]


def membership_checks() -> list[Check]:
    """One well-formed round per version: the version under check for one API, the others fixed."""
    async def join(s: Session, v: int, static: bool = False) -> None:
        member = await Classic.connect(s, unique(s, "dw"), "a", "dw-static" if static else None)
        await member.join(v)
        await member.sync(3)
        await member.heartbeat(3)
        await member.leave(3)

    async def sync(s: Session, v: int) -> None:
        member = await Classic.connect(s, unique(s, "dw"), "a")
        await member.join(5)
        await member.sync(v)
        await member.heartbeat(3)

    async def heartbeat(s: Session, v: int) -> None:
        member = await stable(s, unique(s, "dw"))
        await member.heartbeat(v)

    async def leave(s: Session, v: int) -> None:
        member = await stable(s, unique(s, "dw"))
        await member.leave(v)
        await member.heartbeat(3, what="heartbeat after leaving")

    from .craft import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP

    return [
        *sweep(JOIN_GROUP, "a member joins, syncs, heartbeats and leaves", steps=join),
        *sweep(JOIN_GROUP, "a static member joins", steps=lambda s, v: join(s, v, static=True), versions=range(5, 10)),
        *sweep(SYNC_GROUP, "the leader syncs", steps=sync),
        *sweep(HEARTBEAT, "a stable member", steps=heartbeat),
        *sweep(LEAVE_GROUP, "a stable member leaves", steps=leave),
    ]


def consumer_group_checks() -> list[Check]:
    from .craft import CONSUMER_GROUP_HEARTBEAT

    async def round_trip(s: Session, v: int) -> None:
        member = await Consumer.connect(s, unique(s, "dw"), "a", member_id="" if v == 0 else "dw-member-a-0001")
        await member.join(v)
        await member.until(lambda r: r.assignment is not None and r.assignment.topic_partitions, v)
        await member.heartbeat(v, what="leave", epoch=-1)

    async def described(s: Session, v: int) -> None:
        member = await Consumer.connect(s, unique(s, "dw"), "a", member_id="dw-member-a-0001")
        await member.join(1)
        await member.until(lambda r: r.assignment is not None and r.assignment.topic_partitions)
        await s.call(CONSUMER_GROUP_DESCRIBE, v, make(CONSUMER_GROUP_DESCRIBE, group_ids=[member.group],
                                                      include_authorized_operations=True), "describe")

    def describe(*groups: str):
        return lambda s, v: make(CONSUMER_GROUP_DESCRIBE, group_ids=list(groups), include_authorized_operations=False)

    return [
        *sweep(CONSUMER_GROUP_HEARTBEAT, "a member joins, is assigned and leaves", steps=round_trip),
        *sweep(CONSUMER_GROUP_DESCRIBE, "a group of one member", steps=described),
        *sweep(CONSUMER_GROUP_DESCRIBE, "unknown group", describe("dw-nobody")),
        *sweep(CONSUMER_GROUP_DESCRIBE, "a classic group", describe(GROUP)),
        *sweep(CONSUMER_GROUP_DESCRIBE, "an empty group id", describe(""), serial=True),
    ]


def checks() -> list[Check]:
    return [*find_coordinator_checks(), *offset_commit_checks(), *offset_fetch_checks(),
            *describe_list_delete_checks(), *offset_delete_checks(), *membership_checks(),
            *consumer_group_checks()]


SETUPS = [Check("setup: a simple group with offsets", setup_groups, table="setup")]
