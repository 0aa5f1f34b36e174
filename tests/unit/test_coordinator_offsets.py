"""OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups, offset retention (removeExpiredOffsets
and cleanupGroupMetadata), and replies that wait on the append."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.classic.group import GroupState
from kbroker.coordinator.groups.offset_store import cannot_fit, commit_floor_bytes
from kbroker.protocol.records.codec import encode_record
from kbroker.protocol.records.classic_records import (
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
)
from kbroker.coordinator.groups.results import (
    DeletedGroup,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchPartition,
    OffsetFetchResult,
    OffsetFetchTopic,
    PartitionError,
    TopicErrors,
)
from kbroker.coordinator.groups.classic.subscription import encode_subscription_topics
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_batch import encode_keyed_batch

E = ErrorCode
S = GroupState
RETENTION_MS = 60_000


@pytest.fixture
def h() -> Harness:
    return Harness(GroupConfig(offsets_retention_minutes=1))


def commit(group: str = "g", generation: int = -1, member: str = "", *parts: tuple[str, int, int],
           metadata: str | None = None, leader_epoch: int = -1, **kw) -> c.OffsetCommit:
    topics: dict[str, list[c.OffsetCommitPartition]] = {}
    for topic, partition, offset in parts or (("t", 0, 10),):
        topics.setdefault(topic, []).append(c.OffsetCommitPartition(partition, offset, leader_epoch, metadata))
    return c.OffsetCommit(group, generation, member,
                          tuple(c.OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()), **kw)


def fetch(h: Harness, group: str = "g", topic: str = "t", *partitions: int) -> list[OffsetFetchPartition]:
    result = h.call(c.OffsetFetch(group, (c.TopicPartitions(topic, partitions or (0,)),)))
    assert result.error is E.NONE
    return list(result.topics[0].partitions)


def errors(result: OffsetCommitResult) -> list[ErrorCode]:
    return [p.error for t in result.topics for p in t.partitions]


def consumer_protocols(*topics: str) -> tuple[tuple[str, bytes], ...]:
    return (("range", encode_subscription_topics(list(topics))),)


# -- OffsetCommit ---------------------------------------------------------------------------------


def test_handleCommitOffsets_round_trips_offset_leader_epoch_and_metadata_exactly(h: Harness) -> None:
    leader, follower = h.stable_group()
    result = h.call(commit("g", 1, leader, ("orders", 3, 1_234_567_890_123), metadata="ünïcode 😀 meta",
                           leader_epoch=17))
    assert result == OffsetCommitResult((TopicErrors("orders", (PartitionError(3, E.NONE),)),))
    assert h.log[-1] == OffsetCommitRecord(
        "g", "orders", 3, 1_234_567_890_123, 17, "ünïcode 😀 meta", h.clock.wall_ms(), None
    )
    assert fetch(h, "g", "orders", 3) == [OffsetFetchPartition(3, 1_234_567_890_123, 17, "ünïcode 😀 meta")]


def test_handleCommitOffsets_without_metadata_stores_empty_string(h: Harness) -> None:
    h.call(commit(metadata=None))
    assert fetch(h)[0].metadata == ""


def test_simple_consumer_commit_creates_offsets_only_group(h: Harness) -> None:
    assert errors(h.call(commit("simple", -1, "", ("t", 0, 5), ("t", 1, 6)))) == [E.NONE, E.NONE]
    group = h.group("simple")
    assert group.state is S.EMPTY and group.protocol_type is None and group.generation_id == 0
    assert [p.offset for p in fetch(h, "simple", "t", 0, 1)] == [5, 6]


@pytest.mark.parametrize(("api_version", "error"), [(8, E.ILLEGAL_GENERATION), (9, E.GROUP_ID_NOT_FOUND)])
def test_handleCommitOffsets_with_generation_to_unknown_group(h: Harness, api_version: int, error: ErrorCode) -> None:
    result = h.call(commit("nope", 3, "m", api_version=api_version))
    assert errors(result) == [error]
    assert h.group("nope") is None


def test_handleCommitOffsets_metadata_too_large_fails_only_that_partition(h: Harness) -> None:
    limit = h.config.offset_metadata_max_bytes
    cmd = c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("t", (
        c.OffsetCommitPartition(0, 1, metadata="x" * (limit + 1)),
        c.OffsetCommitPartition(1, 2, metadata="y" * limit),
    )),))
    assert errors(h.call(cmd)) == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert [p.offset for p in fetch(h, "g", "t", 0, 1)] == [-1, 2]


def test_handleCommitOffsets_metadata_length_counts_utf16_units_like_java(h: Harness) -> None:
    limit = h.config.offset_metadata_max_bytes
    emoji = "😀" * (limit // 2)  # exactly `limit` UTF-16 units, four times as many UTF-8 bytes
    assert errors(h.call(commit(metadata=emoji))) == [E.NONE]
    assert errors(h.call(commit(metadata=emoji + "x"))) == [E.OFFSET_METADATA_TOO_LARGE]


@pytest.mark.parametrize(
    ("generation", "member", "instance", "error"),
    [
        (1, "stranger", None, E.UNKNOWN_MEMBER_ID),
        (9, None, None, E.ILLEGAL_GENERATION),
        (-1, "", None, E.UNKNOWN_MEMBER_ID),  # no member id: only an empty group takes it
        (1, None, "someone-else", E.UNKNOWN_MEMBER_ID),
    ],
)
def test_handleCommitOffsets_member_and_generation_checks(h: Harness, generation: int, member: str | None,
                                             instance: str | None, error: ErrorCode) -> None:
    leader, _ = h.stable_group()
    cmd = commit("g", generation, leader if member is None else member, group_instance_id=instance)
    assert errors(h.call(cmd)) == [error]


def test_handleCommitOffsets_from_fenced_static_member(h: Harness) -> None:
    handle = h.send(join_request(instance_id="i-1", client_id="x"))
    h.advance(3_000)
    old = h.take(handle).member_id
    h.call(c.SyncGroup("g", 1, old, "i-1", assignments=()))
    h.call(join_request(instance_id="i-1", client_id="x"))  # restarted instance takes over
    assert errors(h.call(commit("g", 1, old, group_instance_id="i-1"))) == [E.FENCED_INSTANCE_ID]


def test_handleCommitOffsets_during_completing_rebalance_is_refused(h: Harness) -> None:
    a = h.new_member_id()
    ha = h.send(join_request(member_id=a))
    h.advance(3_000)
    assert h.take(ha).generation_id == 1
    assert errors(h.call(commit("g", 1, a))) == [E.REBALANCE_IN_PROGRESS]


def test_handleCommitOffsets_during_preparing_rebalance_is_allowed_and_keeps_member_alive(h: Harness) -> None:
    leader, follower = h.stable_group()
    h.send(join_request(member_id=leader, client_id="client0"))
    h.advance(9_000)
    assert errors(h.call(commit("g", 1, follower))) == [E.NONE]
    assert h.deadline(c.heartbeat_key("g", follower)) == h.clock.now_ms() + 10_000


def test_handleCommitOffsets_to_dead_group(h: Harness) -> None:
    h.call(commit())
    h.group("g").transition_to(S.DEAD, 0)
    assert errors(h.call(commit())) == [E.COORDINATOR_NOT_AVAILABLE]


def test_handleCommitOffsets_with_retention_time_sets_expire_timestamp(h: Harness) -> None:
    h.call(commit(retention_time_ms=5_000))
    assert h.log[-1].expire_timestamp == h.clock.wall_ms() + 5_000


def test_a_retention_of_long_max_is_capped_not_overflowed(h: Harness) -> None:
    """OffsetCommit v2 with retention_time_ms Long.MAX ("never"): the expiry stays an int64 the
    record can hold (its encoding once failed with struct.error and the commit with UNKNOWN)."""
    from kbroker.protocol.records.codec import encode_record

    assert errors(h.call(commit(retention_time_ms=2**63 - 1))) == [E.NONE]
    assert h.log[-1].expire_timestamp == 2**63 - 1
    encode_record(h.log[-1])


@pytest.mark.parametrize(
    ("append_error", "client_error"),
    [
        (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.INVALID_FETCH_SIZE, E.UNKNOWN_SERVER_ERROR),
    ],
)
def test_handleCommitOffsets_reply_carries_translated_append_error(h: Harness, append_error: ErrorCode,
                                                      client_error: ErrorCode) -> None:
    h.fail_next_append = append_error
    cmd = c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("t", (
        c.OffsetCommitPartition(0, 1), c.OffsetCommitPartition(1, 2, metadata="z" * 5_000),
    )),))
    assert errors(h.call(cmd)) == [client_error, E.OFFSET_METADATA_TOO_LARGE]
    assert fetch(h)[0].offset == -1  # nothing applied without a durable record
    assert h.log == []


# -- commits larger than one __consumer_offsets batch ----------------------------------------------


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_metadata = st.one_of(st.none(), _names, st.just("m" * 5_000), st.just("\u00e9" * 2_100))


@st.composite
def _commits(draw) -> tuple[c.OffsetCommit, int]:
    topics = draw(st.lists(st.tuples(_names, st.lists(st.tuples(
        st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(-1, 2**31 - 1), _metadata),
        min_size=1, max_size=6)), min_size=1, max_size=3))
    retention = draw(st.sampled_from([-1, 1_000, 2**63 - 1]))
    cmd = c.OffsetCommit(draw(_names.filter(bool)), -1, "", tuple(
        c.OffsetCommitTopic(name, tuple(c.OffsetCommitPartition(*p) for p in parts)) for name, parts in topics),
        retention_time_ms=retention)
    return cmd, retention


@settings(max_examples=300, deadline=None)
@given(_commits())
def test_the_floor_of_a_commit_is_never_above_the_batch_its_records_make(drawn) -> None:
    """cannot_fit refuses only what the append would refuse: the floor it counts from the command is at
    most the size of the batch the written records make, whatever the names, metadata and value version."""
    cmd, _ = drawn
    h = Harness()
    h.call(cmd)
    floor = commit_floor_bytes(cmd, h.config.offset_metadata_max_bytes)
    if not h.log:
        assert floor == 61
        return
    batch = encode_keyed_batch([encode_record(r) for r in h.log], 0)
    assert floor <= len(batch)
    assert not cannot_fit(cmd, h.config.offset_metadata_max_bytes, len(batch))


def test_a_commit_too_large_for_one_batch_is_answered_as_a_failed_append_without_a_record() -> None:
    parts = [("t", i, i) for i in range(200)]
    cmd = commit("g", -1, "", *parts)
    cmd = c.OffsetCommit(cmd.group_id, -1, "", (cmd.topics[0], c.OffsetCommitTopic("u", (
        c.OffsetCommitPartition(0, 1, metadata="z" * 5_000),))))
    floor = commit_floor_bytes(cmd, GroupConfig().offset_metadata_max_bytes)
    assert floor == 61 + 200 * (37 + 1 + 1)  # the partition with too long metadata writes nothing
    # counting stops at the first record past a limit: the first floor over it, not the whole
    assert 1_000 < commit_floor_bytes(cmd, GroupConfig().offset_metadata_max_bytes, stop_past=1_000) <= 1_000 + 39
    refused = Harness(max_batch_bytes=floor - 1)
    result = refused.call(cmd)
    assert errors(result) == [E.UNKNOWN_SERVER_ERROR] * 200 + [E.OFFSET_METADATA_TOO_LARGE]
    assert refused.log == []
    assert [(type(e).__name__, e.error) for e in refused.events] == [("WriteFailed", E.MESSAGE_TOO_LARGE)]
    # the same answer the append's own refusal gives (the usual path, which builds the records)
    failing = Harness(max_batch_bytes=floor)
    failing.fail_next_append = E.MESSAGE_TOO_LARGE
    assert failing.call(cmd) == result
    assert failing.log == []
    accepted = Harness(max_batch_bytes=floor)
    assert errors(accepted.call(cmd)) == [E.NONE] * 200 + [E.OFFSET_METADATA_TOO_LARGE]
    assert len(accepted.log) == 200


def test_a_refused_commit_is_checked_as_a_member_first() -> None:
    h = Harness(max_batch_bytes=100)
    h.stable_group("g", members=1)
    assert set(errors(h.call(commit("g", 99, "stranger", *[("t", i, i) for i in range(50)])))) == {E.UNKNOWN_MEMBER_ID}
    assert not [e for e in h.events if type(e).__name__ == "WriteFailed"]
    assert h.log[-1:] and not any(r.topic == "t" for r in h.log if hasattr(r, "partition"))


# -- OffsetFetch ----------------------------------------------------------------------------------


def test_handleFetchOffsets_unknown_group_returns_minus_one_without_error(h: Harness) -> None:
    assert fetch(h, "nope", "t", 0, 1) == [OffsetFetchPartition(0), OffsetFetchPartition(1)]
    assert OffsetFetchPartition(0) == OffsetFetchPartition(0, -1, -1, "", E.NONE)


def test_handleFetchOffsets_all_partitions(h: Harness) -> None:
    h.call(commit("g", -1, "", ("b", 1, 11), ("a", 0, 10), ("b", 0, 12)))
    result = h.call(c.OffsetFetch("g", None, require_stable=True))
    assert result == OffsetFetchResult(E.NONE, (
        OffsetFetchTopic("a", (OffsetFetchPartition(0, 10),)),
        OffsetFetchTopic("b", (OffsetFetchPartition(0, 12), OffsetFetchPartition(1, 11))),
    ))


# -- OffsetDelete ---------------------------------------------------------------------------------


def test_handleDeleteOffsets_unknown_group(h: Harness) -> None:
    result = h.call(c.OffsetDelete("nope", (c.TopicPartitions("t", (0,)),)))
    assert result == OffsetDeleteResult(E.GROUP_ID_NOT_FOUND)


def test_handleDeleteOffsets_non_consumer_group_that_is_not_empty(h: Harness) -> None:
    h.stable_group(members=1, protocol_type="connect")
    result = h.call(c.OffsetDelete("g", (c.TopicPartitions("t", (0,)),)))
    assert result == OffsetDeleteResult(E.NON_EMPTY_GROUP)


def test_handleDeleteOffsets_refuses_subscribed_topics(h: Harness) -> None:
    (m,) = h.stable_group(members=1, protocols=consumer_protocols("orders"))
    h.call(commit("g", 1, m, ("orders", 0, 1), ("old", 0, 2)))
    log_before = len(h.log)
    result = h.call(c.OffsetDelete("g", (c.TopicPartitions("orders", (0,)), c.TopicPartitions("old", (0, 1)))))
    assert result == OffsetDeleteResult(E.NONE, (
        TopicErrors("orders", (PartitionError(0, E.GROUP_SUBSCRIBED_TO_TOPIC),)),
        TopicErrors("old", (PartitionError(0, E.NONE), PartitionError(1, E.NONE))),
    ))
    assert h.log[log_before:] == [OffsetCommitTombstone("g", "old", 0)]
    assert fetch(h, "g", "old")[0].offset == -1
    assert fetch(h, "g", "orders")[0].offset == 1


def test_handleDeleteOffsets_in_empty_group(h: Harness) -> None:
    h.call(commit("g", -1, "", ("t", 0, 1)))
    result = h.call(c.OffsetDelete("g", (c.TopicPartitions("t", (0,)),)))
    assert result.error is E.NONE and result.topics[0].partitions[0].error is E.NONE
    assert fetch(h)[0].offset == -1


# -- DeleteGroups ---------------------------------------------------------------------------------


def test_handleDeleteGroups_unknown_group(h: Harness) -> None:
    assert h.call(c.DeleteGroup("nope")) == DeletedGroup("nope", E.GROUP_ID_NOT_FOUND)


def test_handleDeleteGroups_non_empty_group(h: Harness) -> None:
    h.stable_group()
    assert h.call(c.DeleteGroup("g")) == DeletedGroup("g", E.NON_EMPTY_GROUP)


def test_handleDeleteGroups_empty_group_writes_tombstones_and_forgets_it(h: Harness) -> None:
    (m,) = h.stable_group(members=1)
    h.call(commit("g", 1, m, ("t", 0, 1), ("t", 1, 2)))
    h.call(c.LeaveGroup("g", (c.LeavingMember(m),)))
    log_before = len(h.log)
    assert h.call(c.DeleteGroup("g")) == DeletedGroup("g", E.NONE)
    assert h.log[log_before:] == [
        OffsetCommitTombstone("g", "t", 0), OffsetCommitTombstone("g", "t", 1), GroupMetadataTombstone("g"),
    ]
    assert h.group("g") is None
    assert h.call(c.DescribeGroup("g", api_version=6)).error is E.GROUP_ID_NOT_FOUND


def test_handleDeleteGroups_group_write_failure_keeps_the_group(h: Harness) -> None:
    h.call(commit())
    h.fail_next_append = E.NOT_LEADER_OR_FOLLOWER
    assert h.call(c.DeleteGroup("g")) == DeletedGroup("g", E.NOT_COORDINATOR)
    assert h.group("g").state is S.EMPTY and fetch(h)[0].offset == 10


# -- retention ------------------------------------------------------------------------------------


def expire(h: Harness, group: str = "g") -> list:
    before = len(h.log)
    h.send(c.OffsetExpiryCheck(group))
    return h.log[before:]


def test_removeExpiredOffsets_empty_group_counts_from_when_it_became_empty(h: Harness) -> None:
    (m,) = h.stable_group(members=1)
    h.call(commit("g", 1, m, ("t", 0, 1)))
    for _ in range(3 * RETENTION_MS // 5_000):  # long past the commit, but the group is alive
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, m))
    assert expire(h) == []
    h.call(c.LeaveGroup("g", (c.LeavingMember(m),)))
    h.advance(RETENTION_MS - 1)
    assert expire(h) == []
    h.advance(1)
    assert expire(h) == [OffsetCommitTombstone("g", "t", 0), GroupMetadataTombstone("g")]
    assert h.group("g") is None  # Empty with no offsets left: Dead, then forgotten


def test_removeExpiredOffsets_consumer_group_expires_unsubscribed_topics_by_commit_time(h: Harness) -> None:
    (m,) = h.stable_group(members=1, protocols=consumer_protocols("live"))
    h.call(commit("g", 1, m, ("live", 0, 1), ("gone", 0, 2)))
    for _ in range(RETENTION_MS // 5_000):
        h.advance(5_000)
        h.call(c.Heartbeat("g", 1, m))
    assert expire(h) == [OffsetCommitTombstone("g", "gone", 0)]
    assert h.group("g").state is S.STABLE
    assert fetch(h, "g", "live")[0].offset == 1


def test_removeExpiredOffsets_consumer_group_with_unknown_subscriptions_keeps_everything(h: Harness) -> None:
    (m,) = h.stable_group(members=1, protocols=(("range", b"not a subscription"),))
    h.call(commit("g", 1, m, ("t", 0, 1)))
    h.group("g").state = S.STABLE
    h.clock.advance(RETENTION_MS * 2)
    assert expire(h) == []


def test_removeExpiredOffsets_other_protocol_group_keeps_offsets_while_active(h: Harness) -> None:
    (m,) = h.stable_group(members=1, protocol_type="connect")
    h.call(commit("g", 1, m, ("t", 0, 1)))
    h.clock.advance(RETENTION_MS * 2)
    assert expire(h) == []


def test_removeExpiredOffsets_simple_group_uses_commit_time_then_cleanupGroupMetadata(h: Harness) -> None:
    h.call(commit("g", -1, "", ("t", 0, 1)))
    h.advance(30_000)
    h.call(commit("g", -1, "", ("t", 1, 2)))
    h.advance(30_000)
    assert expire(h) == [OffsetCommitTombstone("g", "t", 0)]
    assert h.group("g") is not None
    h.advance(30_000)
    # Generation 0: it never wrote GroupMetadata, so there is nothing to tombstone.
    assert expire(h) == [OffsetCommitTombstone("g", "t", 1)]
    assert h.group("g") is None


def test_getExpiredOffsets_explicit_expire_timestamp_wins(h: Harness) -> None:
    h.call(commit("g", -1, "", ("t", 0, 1), retention_time_ms=1_000))
    h.advance(999)
    assert expire(h) == []
    h.advance(1)
    assert expire(h) == [OffsetCommitTombstone("g", "t", 0)]


def test_cleanupGroupMetadata_empty_group_with_no_offsets_becomes_dead(h: Harness) -> None:
    (m,) = h.stable_group(members=1)
    h.call(c.LeaveGroup("g", (c.LeavingMember(m),)))
    assert expire(h) == [GroupMetadataTombstone("g")]
    assert h.group("g") is None


def test_cleanupGroupMetadata_spares_a_new_group_with_a_pending_member(h: Harness) -> None:
    h.new_member_id()
    assert expire(h) == []
    assert h.group("g") is not None


def test_cleanupGroupMetadata_generation_zero_writes_no_group_tombstone(h: Harness) -> None:
    h.call(join_request(protocol_type=""))  # refused, but the group object was created
    assert h.group("g").generation_id == 0
    assert expire(h) == []
    assert h.group("g") is None


def test_cleanupGroupMetadata_write_failure_keeps_offsets_and_group(h: Harness) -> None:
    h.call(commit())
    h.advance(RETENTION_MS)
    h.fail_next_append = E.REQUEST_TIMED_OUT
    h.send(c.OffsetExpiryCheck("g"))
    assert h.group("g") is not None and fetch(h)[0].offset == 10
    assert expire(h) == [OffsetCommitTombstone("g", "t", 0)]
    assert h.group("g") is None


def test_offset_commit_v1_commit_timestamp_is_the_commit_time_and_ages_the_offset(h: Harness) -> None:
    # OffsetCommit v1 (Kafka 3.9): an explicit commit timestamp is kept as the commit time, so a
    # simple group's offset expires retention after it; -1 means "when the coordinator handles it".
    past = h.clock.wall_ms() - RETENTION_MS
    old = c.OffsetCommitPartition(0, 5, -1, "m", commit_timestamp=past)
    now = c.OffsetCommitPartition(1, 6, -1, "m", commit_timestamp=-1)
    h.call(c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("t", (old, now)),), api_version=1))
    assert [r.commit_timestamp for r in h.log[-2:]] == [past, h.clock.wall_ms()]
    assert expire(h) == [OffsetCommitTombstone("g", "t", 0)]
