"""Share groups (KIP-932): the simple share assignor and the share group type driven by hand with a
manual clock (join, heartbeat, leave, session timeout, describe, other types' ids, delete, records
through the `__consumer_offsets` codec and replayed on load)."""

from __future__ import annotations

import uuid

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.consumer import consumer_commands as cc
from kbroker.coordinator.groups.consumer.consumer_group import TopicImage
from kbroker.coordinator.groups.share import share_commands as sc
from kbroker.coordinator.groups.share.assignor import assign
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import share_records as sr
from kbroker.protocol.records.codec import decode_record, encode_record
from kbroker.tests.coordinator_harness import Harness, join_request

E = ErrorCode
FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)
SESSION_MS = 45_000


# -- the simple assignor ------------------------------------------------------------------------


def test_more_members_than_partitions_share_each_partition() -> None:
    result = assign({m: frozenset({FOO}) for m in "abc"}, {FOO: 2}, {})
    holders = {p: sorted(m for m in result if p in result[m].get(FOO, ())) for p in (0, 1)}
    assert sorted(len(h) for h in holders.values()) == [2, 2]  # ceil(3 / 2) = 2 members per partition
    assert all(len(result[m][FOO]) >= 1 for m in "abc")


def test_fewer_members_than_partitions_balance_and_keep_what_they_had() -> None:
    first = assign({"a": frozenset({FOO}), "b": frozenset({FOO})}, {FOO: 4}, {})
    assert sorted(len(a[FOO]) for a in first.values()) == [2, 2]
    assert first["a"][FOO] | first["b"][FOO] == frozenset(range(4))
    # a third member: balance first (2, 1, 1), and a and b keep partitions they had
    second = assign({m: frozenset({FOO}) for m in "abc"}, {FOO: 4}, first)
    assert sorted(len(a[FOO]) for a in second.values()) == [1, 1, 2]
    assert second["a"][FOO] <= first["a"][FOO] and second["b"][FOO] <= first["b"][FOO]
    assert frozenset().union(*(a[FOO] for a in second.values())) == frozenset(range(4))


def test_members_get_only_the_topics_they_subscribe_to() -> None:
    result = assign({"a": frozenset({FOO}), "b": frozenset({FOO, BAR})}, {FOO: 2, BAR: 1}, {})
    assert BAR not in result["a"] and result["b"][BAR] == frozenset({0})
    assert result["a"][FOO] | result["b"][FOO] == frozenset({0, 1})


# -- the group type -----------------------------------------------------------------------------


def make() -> Harness:
    image = {"foo": TopicImage("foo", FOO, 2), "bar": TopicImage("bar", BAR, 1)}
    return Harness(topics=lambda: dict(image))


def beat(h: Harness, member: str, epoch: int, topics: tuple[str, ...] | None = None,
         group: str = "g") -> sc.ShareGroupHeartbeatResult:
    return h.call(sc.ShareGroupHeartbeat(group, member, epoch, subscribed_topic_names=topics))


def parts(result: sc.ShareGroupHeartbeatResult) -> dict[uuid.UUID, tuple[int, ...]]:
    assert result.assignment is not None
    return dict(result.assignment)


def test_a_member_joins_and_gets_every_partition_then_shares_them_with_the_next() -> None:
    h = make()
    a = beat(h, "a", 0, ("foo",))
    assert (a.error, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (E.NONE, "a", 1, 5_000)
    assert parts(a) == {FOO: (0, 1)}
    assert h.deadline(sc.session_key("g", "a")) == h.clock.now_ms() + SESSION_MS
    b = beat(h, "b", 0, ("foo",))
    assert b.member_epoch == 2 and len(parts(b)[FOO]) == 1
    # a learns its new target with its next heartbeat, at the new epoch
    a2 = beat(h, "a", 1)
    assert a2.member_epoch == 2 and set(parts(a2)[FOO]) | set(parts(b)[FOO]) == {0, 1}
    # a steady heartbeat writes nothing and sends no assignment
    written = len(h.log)
    a3 = beat(h, "a", 2)
    assert (a3.error, a3.member_epoch, a3.assignment) == (E.NONE, 2, None) and len(h.log) == written
    described = h.call(sc.ShareGroupDescribe("g"))
    assert (described.error, described.state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == (E.NONE, "Stable", 2, 2, "simple")
    assert sorted((m.member_id, m.member_epoch) for m in described.members) == [("a", 2), ("b", 2)]
    assert described.members[0].assignment[0].topic_name == "foo"


def test_the_records_are_kafkas_and_a_reload_gives_back_the_group() -> None:
    h = make()
    beat(h, "a", 0, ("foo", "bar"))
    beat(h, "b", 0, ("foo",))
    kinds = {type(r) for r in h.log}
    assert {sr.ShareGroupMetadataRecord, sr.ShareGroupMemberMetadataRecord, sr.ShareGroupTargetAssignmentMemberRecord,
            sr.ShareGroupTargetAssignmentMetadataRecord, sr.ShareGroupCurrentMemberAssignmentRecord,
            sr.ShareGroupStatePartitionMetadataRecord} <= kinds
    encoded = [encode_record(r) for r in h.log]
    # the key's record type is Kafka's (10 member, 11 group, ... 15 state partition metadata)
    assert {int.from_bytes(k[:2], "big") for k, _ in encoded} == {10, 11, 12, 13, 14, 15}
    decoded = [decode_record(k, v) for k, v in encoded]
    assert decoded == h.log
    before = h.group("g")
    again = make()
    again.load(decoded)
    group = again.group("g")
    assert (group.group_epoch, group.assignment_epoch, group.members, group.target_assignment, group.initialized) == (
        before.group_epoch, before.assignment_epoch, before.members, before.target_assignment, before.initialized)
    assert again.deadline(sc.session_key("g", "a")) is not None  # sessions armed again on load
    assert beat(again, "b", group.members["b"].member_epoch).error is E.NONE


def test_leave_and_session_expiry_fence_the_member_and_bump_the_epoch() -> None:
    h = make()
    beat(h, "a", 0, ("foo",))
    beat(h, "b", 0, ("foo",))
    left = beat(h, "a", -1)
    assert (left.error, left.member_id, left.member_epoch) == (E.NONE, "a", -1)
    group = h.group("g")
    assert list(group.members) == ["b"] and group.group_epoch == 3
    assert not h.armed(sc.session_key("g", "a"))
    assert beat(h, "a", 2).error is E.UNKNOWN_MEMBER_ID
    # b takes both partitions at its next heartbeat
    assert parts(beat(h, "b", 2)) == {FOO: (0, 1)}
    h.advance(SESSION_MS)
    group = h.group("g")
    assert group.members == {} and group.state == "Empty" and group.assignment_epoch == group.group_epoch
    assert h.log[-1] == sr.ShareGroupTargetAssignmentMetadataRecord("g", group.group_epoch, 0)


def test_the_groups_session_timeout_override_fences_a_silent_member_then_not_before() -> None:
    """share.session.timeout.ms of the group (its dynamic config) is the member's session, and
    share.heartbeat.interval.ms the interval the heartbeat answers; another group keeps the broker's."""
    image = {"foo": TopicImage("foo", FOO, 2)}
    overrides = {"g": {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "7000"}}
    h = Harness(topics=lambda: dict(image), group_config=lambda g, n: overrides.get(g, {}).get(n))
    assert beat(h, "a", 0, ("foo",)).heartbeat_interval_ms == 7000
    assert beat(h, "b", 0, ("foo",), group="other").heartbeat_interval_ms == 5000
    h.advance(SESSION_MS)  # the broker's session has passed, the group's not yet
    assert list(h.group("g").members) == ["a"] and h.group("other").members == {}
    h.advance(60_000 - SESSION_MS)
    assert h.group("g").members == {}
    assert h.events[-1].session_timeout_ms == 60_000 and h.events[-1].reason == "session expired"


def test_heartbeat_errors_are_kafkas() -> None:
    h = make()
    assert beat(h, "", 0, ("foo",)).error is E.INVALID_REQUEST
    first = beat(h, "a", 0, None)
    assert (first.error, first.error_message) == (E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    assert beat(h, "a", -2).error is E.INVALID_REQUEST
    missing = beat(h, "a", 3)
    assert (missing.error, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Share group g not found.")
    beat(h, "a", 0, ("foo",))
    assert beat(h, "a", 7).error is E.FENCED_MEMBER_EPOCH
    assert beat(h, "z", 1).error is E.UNKNOWN_MEMBER_ID


def test_a_group_id_of_another_type_is_refused_both_ways() -> None:
    h = make()
    beat(h, "a", 0, ("foo",))
    # the classic protocol and the consumer protocol refuse the share group's id as Kafka does
    assert h.call(join_request("g")).error is E.INCONSISTENT_GROUP_PROTOCOL
    consumer = h.call(cc.ConsumerGroupHeartbeat("g", "m", 0, rebalance_timeout_ms=30_000,
                                                subscribed_topic_names=("foo",), owned_topic_partitions=()))
    assert (consumer.error, consumer.error_message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    # offsets: a share group is not a consumer group
    commit = h.call(c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, 5),)),)))
    assert commit.topics[0].partitions[0].error is E.GROUP_ID_NOT_FOUND
    # and a classic group's id is not a share group's
    h.call(join_request("classic"))
    refused = beat(h, "a", 0, ("foo",), group="classic")
    assert (refused.error, refused.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    assert h.call(sc.ShareGroupDescribe("classic")).error is E.GROUP_ID_NOT_FOUND


def test_list_and_delete_share_groups() -> None:
    h = make()
    beat(h, "a", 0, ("foo",))
    listed = h.machine.list_groups(types_filter=("Share",))
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [("g", "share", "Stable", "share")]
    assert h.machine.list_groups(types_filter=("consumer",)) == []
    assert h.call(c.DeleteGroup("g")).error is E.NON_EMPTY_GROUP
    beat(h, "a", -1)
    assert h.call(c.DeleteGroup("g")).error is E.NONE
    assert h.group("g") is None
    assert h.log[-1] == sr.ShareGroupTombstone(sr.GROUP_METADATA, "g")
    assert h.call(sc.ShareGroupDescribe("g")).error is E.GROUP_ID_NOT_FOUND
