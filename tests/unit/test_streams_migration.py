"""Offline migration between the classic protocol and streams groups, both ways, as Kafka 4.4's
GroupMetadataManager does it (classicGroupJoin with maybeDeleteEmptyStreamsGroup; getOrCreateStreamsGroup
with maybeDeleteEmptyClassicGroup), driven by hand: an empty group of one gives way to a member of the
other, the committed offsets stay with the group id, a group with members refuses, and a restart
replays the log into the group that won."""

from __future__ import annotations

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.streams import streams_commands as sc
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records.codec import decode_record, encode_record
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.tests.unit.test_streams_groups import APP, NO_DELAY, beat, ready_group

E = ErrorCode


def commit(h: Harness, member: str, epoch: int, offset: int) -> None:
    topics = (c.OffsetCommitTopic("words", (c.OffsetCommitPartition(0, offset),)),)
    answer = h.call(c.OffsetCommit(APP, epoch, member, topics))
    assert answer.topics[0].partitions[0].error is E.NONE


def test_a_classic_join_takes_over_an_empty_streams_group_and_keeps_its_offsets() -> None:
    h, _ = ready_group()
    commit(h, "a", 2, 5)
    refused = h.call(join_request(APP))  # the streams group has a member
    assert (refused.error, refused.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")
    beat(h, "a", -1)
    assert h.group(APP).state == "Empty"
    first = h.call(join_request(APP))
    assert first.error is E.MEMBER_ID_REQUIRED  # the classic type's answer, as for a new group
    assert h.group(APP).group_type == "classic" and h.offsets(APP)[("words", 0)].offset == 5
    handle = h.send(join_request(APP, first.member_id))
    h.advance(3_000)  # the classic group's initial rebalance delay
    joined = h.take(handle)
    assert joined.error is E.NONE and joined.leader_id == first.member_id
    # a restart replays the streams group's tombstones, then the classic group's records
    fresh = Harness(NO_DELAY)
    fresh.load([decode_record(*encode_record(r)) for r in h.log])
    assert fresh.group(APP).group_type == "classic" and fresh.offsets(APP)[("words", 0)].offset == 5


def test_an_empty_classic_group_gives_way_to_a_streams_member_and_back() -> None:
    h, _ = ready_group()
    commit(h, "a", 2, 5)
    beat(h, "a", -1)
    [member] = h.stable_group(APP, 1)  # a classic consumer takes the group over and commits
    commit(h, member, h.group(APP).generation_id, 9)
    refused = beat(h, "b", 0)  # the classic group has a member
    assert (refused.error, refused.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {APP} is not a streams group.")
    h.call(c.LeaveGroup(APP, (c.LeavingMember(member),)))
    b = beat(h, "b", 0)  # the empty classic group gives way (maybeDeleteEmptyClassicGroup)
    assert b.error is E.NONE and h.group(APP).group_type == sc.STREAMS_GROUP_TYPE
    assert h.offsets(APP)[("words", 0)].offset == 9
    fresh = Harness(NO_DELAY)
    fresh.load([decode_record(*encode_record(r)) for r in h.log])
    assert fresh.group(APP).group_type == sc.STREAMS_GROUP_TYPE and set(fresh.group(APP).members) == {"b"}
