"""Loading a partition (replay with tombstones, onGroupLoaded), unloading, DescribeGroups and
ListGroups."""

from __future__ import annotations

import pytest

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.classic.group import GroupState
from kbroker.protocol.records.classic_records import (
    GroupMetadataMember,
    GroupMetadataRecord,
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
)
from kbroker.coordinator.groups.results import (
    DescribedGroup,
    DescribedMember,
    JoinGroupResult,
    ListedGroup,
    OffsetFetchPartition,
    SyncGroupResult,
)
from kbroker.coordinator.groups.classic.subscription import encode_subscription_topics
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState

SUB_A = encode_subscription_topics(["orders"])
SUB_B = encode_subscription_topics(["orders", "refunds"])


def member_record(member_id: str, subscription: bytes, assignment: bytes, **kw) -> GroupMetadataMember:
    return GroupMetadataMember(
        member_id=member_id, group_instance_id=kw.get("instance"), client_id=f"client-{member_id}",
        client_host="/10.0.0.9", rebalance_timeout=kw.get("rebalance", 30_000),
        session_timeout=kw.get("session", 10_000), subscription=subscription, assignment=assignment,
    )


def stable_record(group: str = "g", generation: int = 5, ts: int = 42) -> GroupMetadataRecord:
    return GroupMetadataRecord(
        group, "consumer", generation, "range", "m-2", ts,
        (member_record("m-1", SUB_A, b"A1"), member_record("m-2", SUB_B, b"A2", instance="i-2")),
    )


def offset(group: str, topic: str, partition: int, value: int, ts: int = 100, **kw) -> OffsetCommitRecord:
    return OffsetCommitRecord(group, topic, partition, value, kw.get("epoch", -1), kw.get("meta", ""), ts,
                              kw.get("expire"))


def fetch_one(h: Harness, group: str, topic: str, partition: int) -> OffsetFetchPartition:
    return h.call(c.OffsetFetch(group, (c.TopicPartitions(topic, (partition,)),))).topics[0].partitions[0]


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_loadGroupsAndOffsets_group_with_members_comes_back_stable(h: Harness) -> None:
    h.load([offset("g", "orders", 0, 7, epoch=3, meta="m"), stable_record()])
    group = h.group("g")
    assert group.state is S.STABLE
    assert (group.generation_id, group.protocol_type, group.protocol_name) == (5, "consumer", "range")
    assert group.leader_id == "m-2" and list(group.members) == ["m-1", "m-2"]
    assert group.static_members == {"i-2": "m-2"}
    assert group.current_state_timestamp == 42
    assert group.subscribed_topics == {"orders", "refunds"}
    assert group.get("m-1").assignment == b"A1"
    assert fetch_one(h, "g", "orders", 0) == OffsetFetchPartition(0, 7, 3, "m")


def test_onGroupLoaded_members_resume_with_their_generation_and_assignment(h: Harness) -> None:
    h.load([stable_record()])
    assert h.call(c.Heartbeat("g", 5, "m-1")).error is E.NONE
    assert h.call(c.SyncGroup("g", 5, "m-2", "i-2")) == SyncGroupResult(E.NONE, "consumer", "range", b"A2")


def test_onGroupLoaded_rearms_heartbeats(h: Harness) -> None:
    h.load([stable_record()])
    for member_id in ("m-1", "m-2"):
        assert h.deadline(c.heartbeat_key("g", member_id)) == h.clock.now_ms() + 10_000
    h.advance(5_000)
    h.call(c.Heartbeat("g", 5, "m-2", "i-2"))
    h.advance(5_000)  # m-1 never heartbeated after the load
    group = h.group("g")
    assert not group.has("m-1") and group.state is S.PREPARING_REBALANCE


def test_loadGroupsAndOffsets_empty_group_metadata_keeps_state_timestamp_for_retention() -> None:
    h = Harness(GroupConfig(offsets_retention_minutes=1))
    now = h.clock.wall_ms()
    h.load([
        offset("g", "t", 0, 1, ts=now - 10_000_000),
        GroupMetadataRecord("g", "consumer", 3, None, None, now - 30_000, ()),
    ])
    group = h.group("g")
    assert group.state is S.EMPTY and group.generation_id == 3 and group.protocol_type == "consumer"
    h.send(c.OffsetExpiryCheck("g"))
    assert h.group("g") is not None  # empty for 30 s only; the old commit time does not matter
    h.advance(30_000)
    h.send(c.OffsetExpiryCheck("g"))
    assert h.group("g") is None


def test_loadGroupsAndOffsets_offsets_only_gives_simple_empty_group(h: Harness) -> None:
    h.load([offset("simple", "t", 0, 9)])
    group = h.group("simple")
    assert group.state is S.EMPTY and group.protocol_type is None and group.generation_id == 0
    assert fetch_one(h, "simple", "t", 0).offset == 9


def test_loadGroupsAndOffsets_respects_offset_tombstones_and_last_value_wins(h: Harness) -> None:
    h.load([
        offset("g", "t", 0, 1), offset("g", "t", 1, 2), offset("g", "t", 0, 3),
        OffsetCommitTombstone("g", "t", 1),
        offset("g", "t", 2, 4), OffsetCommitTombstone("g", "t", 2), offset("g", "t", 2, 5),
    ])
    assert [fetch_one(h, "g", "t", p).offset for p in (0, 1, 2)] == [3, -1, 5]


def test_loadGroupsAndOffsets_group_tombstone_without_offsets_removes_group(h: Harness) -> None:
    h.load([stable_record(), GroupMetadataTombstone("g")])
    assert h.group("g") is None


def test_loadGroupsAndOffsets_group_tombstone_with_surviving_offsets_keeps_simple_group(h: Harness) -> None:
    h.load([stable_record(), offset("g", "t", 0, 1), GroupMetadataTombstone("g")])
    group = h.group("g")
    assert group.state is S.EMPTY and group.protocol_type is None and not group.members
    assert fetch_one(h, "g", "t", 0).offset == 1
    assert not h.armed(c.heartbeat_key("g", "m-1"))


def test_loadGroupsAndOffsets_all_offsets_tombstoned_in_a_simple_group_removes_it(h: Harness) -> None:
    h.load([offset("s", "t", 0, 1), OffsetCommitTombstone("s", "t", 0)])
    assert h.group("s") is None


def test_loadGroupsAndOffsets_latest_group_metadata_wins(h: Harness) -> None:
    h.load([stable_record(generation=5), GroupMetadataTombstone("g"), stable_record(generation=9)])
    assert h.group("g").generation_id == 9


def test_loadGroupsAndOffsets_reads_back_what_run_time_wrote(h: Harness) -> None:
    leader, follower = h.stable_group(protocols=(("range", SUB_A),))
    h.call(c.OffsetCommit("g", 1, leader, (c.OffsetCommitTopic("orders", (
        c.OffsetCommitPartition(0, 100, 2, "x"), c.OffsetCommitPartition(1, 200)
    )),)))
    h.call(c.OffsetCommit("solo", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 5),)),)))
    h.call(c.OffsetDelete("solo", (c.TopicPartitions("t", (0,)),)))
    reloaded = Harness()
    reloaded.load(h.log)
    group = reloaded.group("g")
    assert group.state is S.STABLE and group.generation_id == 1 and group.leader_id == leader
    assert {m.member_id: m.assignment for m in group.members.values()} == {
        m: f"assignment-{m}".encode() for m in (leader, follower)
    }
    assert reloaded.offsets("g") == h.offsets("g")
    assert reloaded.group("solo") is None


def test_replay_of_run_time_group_metadata_does_not_touch_membership(h: Harness) -> None:
    leader, follower = h.stable_group()
    group = h.group("g")
    members_before = dict(group.members)
    record = next(r for r in reversed(h.log) if isinstance(r, GroupMetadataRecord))
    h.machine.replay(record)
    assert h.group("g") is group and group.members == members_before


def test_onGroupLoaded_over_capacity_rebalances() -> None:
    h = Harness(GroupConfig(group_max_size=1))
    h.load([stable_record()])
    assert h.group("g").state is S.PREPARING_REBALANCE


def test_onGroupUnloaded_answers_waiters_and_stops_timers(h: Harness) -> None:
    leader, follower = h.stable_group()
    parked = h.send(join_request(member_id=leader, client_id="client0"))
    h.unload()
    assert h.take(parked) == JoinGroupResult(E.NOT_COORDINATOR, member_id=leader)
    assert h.group("g") is None
    assert not h.armed(c.heartbeat_key("g", follower)) and not h.armed(c.join_key("g"))


# -- DescribeGroups / ListGroups ------------------------------------------------------------------


def test_handleDescribeGroup_stable_group_shows_metadata_and_assignment(h: Harness) -> None:
    h.load([stable_record()])
    result = h.call(c.DescribeGroup("g"))
    assert result == DescribedGroup("g", E.NONE, "Stable", "consumer", "range", (
        DescribedMember("m-1", None, "client-m-1", "/10.0.0.9", SUB_A, b"A1"),
        DescribedMember("m-2", "i-2", "client-m-2", "/10.0.0.9", SUB_B, b"A2"),
    ))


def test_handleDescribeGroup_rebalancing_group_has_no_protocol_or_metadata(h: Harness) -> None:
    h.load([stable_record()])
    h.send(join_request(member_id="m-2", instance_id="i-2", protocols=(("range", SUB_B),)))
    result = h.call(c.DescribeGroup("g"))
    assert (result.state, result.protocol_type, result.protocol_data) == ("PreparingRebalance", "consumer", "")
    assert [(m.member_id, m.metadata, m.assignment) for m in result.members] == [
        ("m-1", b"", b"A1"), ("m-2", b"", b"A2"),
    ]


@pytest.mark.parametrize(("version", "error"), [(5, E.NONE), (6, E.GROUP_ID_NOT_FOUND)])
def test_handleDescribeGroup_unknown_group(h: Harness, version: int, error: ErrorCode) -> None:
    assert h.call(c.DescribeGroup("nope", version)) == DescribedGroup("nope", error, "Dead")


def test_handleDescribeGroup_empty_group(h: Harness) -> None:
    h.load([GroupMetadataRecord("g", "consumer", 2, None, None, 1, ())])
    assert h.call(c.DescribeGroup("g")) == DescribedGroup("g", E.NONE, "Empty", "consumer", "", ())


def test_handleListGroups_with_state_and_type_filters(h: Harness) -> None:
    h.load([stable_record("a"), offset("b", "t", 0, 1), GroupMetadataRecord("c", "connect", 1, None, None, 1, ())])
    everything = h.machine.list_groups()
    assert everything == [
        ListedGroup("a", "consumer", "Stable"), ListedGroup("b", "", "Empty"), ListedGroup("c", "connect", "Empty"),
    ]
    assert [g.group_id for g in h.machine.list_groups(["EMPTY"])] == ["b", "c"]
    assert [g.group_id for g in h.machine.list_groups(["stable"], ["Classic"])] == ["a"]
    assert h.machine.list_groups([], ["consumer"]) == []
