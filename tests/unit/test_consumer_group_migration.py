"""Online migration between the classic and consumer protocols (KIP-848), driven by hand:
convertToConsumerGroup, classicGroupJoin/Sync/Heartbeat/LeaveToConsumerGroup, convertToClassicGroup."""

from __future__ import annotations

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.consumer import consumer_commands as cc
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.consumer.consumer_group import ConsumerGroupState
from kbroker.coordinator.groups.classic.group import GroupState
from kbroker.coordinator.groups.consumer.downgrade import encode_assignment
from kbroker.protocol.consumer_protocol import decode_assignment
from kbroker.coordinator.groups.classic.subscription import encode_subscription_topics
from kbroker.protocol.errors import ErrorCode
from kbroker.tests.coordinator_harness import Harness, join_request
from kbroker.tests.unit.test_consumer_group_heartbeat import FOO, Topics, assert_no_partition_owned_twice, settle

E = ErrorCode
SUB = encode_subscription_topics(["foo"], version=1)
PROTOCOLS = (("range", SUB),)


def classic_stable_group(h: Harness, topics: Topics) -> tuple[int, str, str]:
    """A Stable classic group of two members owning foo's partitions (0-2, 3-5): (generation, ids)."""
    ids = [h.new_member_id("g", client_id=f"c{i}", protocols=PROTOCOLS) for i in (1, 2)]
    handles = [h.send(join_request("g", m, protocols=PROTOCOLS)) for m in ids]
    h.advance(h.config.group_initial_rebalance_delay_ms)
    results = [h.take(x) for x in handles]
    generation = results[0].generation_id
    leader = results[0].leader_id
    image = topics()
    parts = {ids[0]: {FOO: frozenset({0, 1, 2})}, ids[1]: {FOO: frozenset({3, 4, 5})}}
    assignments = tuple((m, encode_assignment(parts[m], image, 1)) for m in ids)
    others = [h.send(c.SyncGroup("g", generation, m)) for m in ids if m != leader]
    assert h.call(c.SyncGroup("g", generation, leader, assignments=assignments)).error is E.NONE
    assert all(h.take(x).error is E.NONE for x in others)
    assert h.machine.group("g").is_state(GroupState.STABLE)
    return generation, ids[0], ids[1]


def make():
    topics = Topics(foo=(FOO, 6))
    return Harness(GroupConfig(group_initial_rebalance_delay_ms=0), topics=topics), topics


def cgroup(h):
    return h.machine.group_type("consumer").groups.get("g")


def test_convert_to_consumer_group_keeps_members_partitions_and_offsets() -> None:
    h, topics = make()
    generation, c1, c2 = classic_stable_group(h, topics)
    h.call(c.OffsetCommit("g", generation, c1, (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, 7),)),)))
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("foo",),
                                         owned_topic_partitions=()))
    assert r.error is E.NONE
    g = cgroup(h)
    assert h.machine.group("g") is g  # one id, one group: the classic one became this consumer group
    assert g.group_epoch == generation + 1 and h.offsets("g")[("foo", 0)].offset == 7
    assert g.members[c1].classic is not None and g.members[c1].member_epoch == generation
    assert g.members[c1].assigned_partitions[FOO] == frozenset({0, 1, 2})
    assert r.assignment == ()  # the classic members still own everything
    assert_no_partition_owned_twice(h)
    # The classic members learn about the rebalance from their heartbeats...
    assert h.call(c.Heartbeat("g", generation, c1)).error is E.REBALANCE_IN_PROGRESS
    assert h.call(c.Heartbeat("g", generation + 5, c1)).error is E.ILLEGAL_GENERATION
    # ...rejoin (eager: owning nothing now), and sync their new assignment.
    j = h.call(join_request("g", c1, protocols=PROTOCOLS))
    assert j.error is E.NONE and j.generation_id == generation + 1 and j.protocol_name == "range"
    s = h.call(c.SyncGroup("g", j.generation_id, c1, protocol_type="consumer", protocol_name="range"))
    assert s.error is E.NONE
    got = {p for tp in decode_assignment(s.assignment).assigned_partitions for p in tp.partitions}
    assert len(got) == 2 and got <= {0, 1, 2}
    j2 = h.call(join_request("g", c2, protocols=PROTOCOLS))
    s2 = h.call(c.SyncGroup("g", j2.generation_id, c2))
    got2 = {p for tp in decode_assignment(s2.assignment).assigned_partitions for p in tp.partitions}
    assert got2 and got2 <= {3, 4, 5}
    r2 = h.call(cc.ConsumerGroupHeartbeat("g", "n1", r.member_epoch, owned_topic_partitions=()))
    assert len({p for _, ps in r2.assignment for p in ps}) == 2
    assert_no_partition_owned_twice(h)
    # classic members commit with their epoch as the generation
    commit = h.call(c.OffsetCommit("g", j.generation_id, c1,
                                   (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(1, 9),)),), api_version=8))
    assert commit.topics[0].partitions[0].error is E.NONE


def test_upgrade_refused_when_policy_disabled() -> None:
    topics = Topics(foo=(FOO, 6))
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="disabled"),
                topics=topics)
    _, c1, c2 = classic_stable_group(h, topics)
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("foo",),
                                         owned_topic_partitions=()))
    assert r.error is E.GROUP_ID_NOT_FOUND


def test_convert_to_classic_group_when_the_last_new_protocol_member_leaves() -> None:
    h, topics = make()
    generation, c1, c2 = classic_stable_group(h, topics)
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("foo",),
                                         owned_topic_partitions=()))
    assert cgroup(h).state is not ConsumerGroupState.EMPTY
    leave = h.call(cc.ConsumerGroupHeartbeat("g", "n1", -1))
    assert leave.error is E.NONE
    assert cgroup(h) is None
    classic = h.machine.group("g")
    assert classic is not None and set(classic.members) == {c1, c2}
    assert classic.is_state(GroupState.PREPARING_REBALANCE) and classic.generation_id >= generation
    # the classic members rejoin the classic group as usual
    h1 = h.send(join_request("g", c1, protocols=PROTOCOLS))
    h2 = h.send(join_request("g", c2, protocols=PROTOCOLS))
    h.advance(1)
    assert h.take(h1).error is E.NONE and h.take(h2).error is E.NONE
    # and replay agrees: the log tells the same story
    h2_ = Harness(topics=topics)
    h2_.load(list(h.log))
    assert h2_.machine.group_type("consumer").groups == {} and set(h2_.machine.group("g").members) == {c1, c2}
    assert r.member_epoch > 0


def test_classic_member_session_timeout_inside_consumer_group() -> None:
    h, topics = make()
    _, c1, c2 = classic_stable_group(h, topics)
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("foo",),
                                         owned_topic_partitions=()))
    for _ in range(4):  # n1 heartbeats; the classic members are silent past their 10 s session
        h.advance(4_000)
        h.call(cc.ConsumerGroupHeartbeat("g", "n1", cgroup(h).members["n1"].member_epoch, owned_topic_partitions=None))
    g = cgroup(h)
    assert set(g.members) == {"n1"} and r.error is E.NONE
    assert any(getattr(e, "reason", "") == "session expired" for e in h.events)
    settle(h, {"n1": g.members["n1"].member_epoch})
    assert g.members["n1"].assigned_partitions == {FOO: frozenset(range(6))}


def test_classic_join_to_an_empty_consumer_group_makes_it_classic_with_its_offsets() -> None:
    h, _ = make()
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("foo",),
                                         owned_topic_partitions=()))
    h.call(c.OffsetCommit("g", r.member_epoch, "n1", (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, 3),)),)))
    h.call(cc.ConsumerGroupHeartbeat("g", "n1", -1))
    assert cgroup(h).state is ConsumerGroupState.EMPTY
    first = h.call(join_request("g", protocols=PROTOCOLS))
    assert first.error is E.MEMBER_ID_REQUIRED
    assert cgroup(h) is None and h.offsets("g")[("foo", 0)].offset == 3
    assert h.machine.group("g").group_type == "classic"  # the offsets' simple group, about to be joined
    handle = h.send(join_request("g", first.member_id, protocols=PROTOCOLS))
    h.advance(1)
    joined = h.take(handle)
    assert joined.error is E.NONE and joined.leader_id == first.member_id
    assert h.call(c.DeleteGroup("g")).error is E.NON_EMPTY_GROUP  # a classic group with a member now


def test_upgrade_refused_when_a_member_protocol_is_malformed() -> None:
    h, _ = make()
    ids = h.stable_group("g", 2)  # subscriptions that are not ConsumerProtocolSubscription bytes
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("foo",),
                                         owned_topic_partitions=()))
    assert r.error is E.GROUP_ID_NOT_FOUND and "malformed" in r.error_message
    group = h.machine.group("g")
    assert group.is_state(GroupState.STABLE) and set(group.members) == set(ids) and cgroup(h) is None
    assert h.call(c.Heartbeat("g", group.generation_id, ids[0])).error is E.NONE


def test_static_classic_member_restarting_with_the_new_protocol_takes_over_its_slot() -> None:
    h, topics = make()
    handle = h.send(join_request("g", instance_id="i-1", protocols=PROTOCOLS))  # static: no id round trip
    h.advance(1)
    joined = h.take(handle)
    assert joined.error is E.NONE
    classic = h.machine.group("g")
    old_id = joined.member_id
    leader_sync = h.call(c.SyncGroup("g", classic.generation_id, old_id, group_instance_id="i-1", assignments=(
        (old_id, encode_assignment({FOO: frozenset(range(6))}, topics(), 1)),)))
    assert leader_sync.error is E.NONE
    r = h.call(cc.ConsumerGroupHeartbeat("g", "new-1", 0, instance_id="i-1", rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=("foo",), owned_topic_partitions=()))
    assert r.error is E.NONE and {p for _, ps in r.assignment for p in ps} == set(range(6))
    g = cgroup(h)
    assert set(g.members) == {"new-1"} and g.members["new-1"].classic is None
    assert g.static_members == {"i-1": "new-1"}


def test_downgrade_when_a_classic_static_member_replaces_the_last_new_protocol_member() -> None:
    h, topics = make()
    _, c1, c2 = classic_stable_group(h, topics)
    r = h.call(cc.ConsumerGroupHeartbeat("g", "n1", 0, instance_id="i-n", rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=("foo",), owned_topic_partitions=()))
    assert r.error is E.NONE
    epoch = cgroup(h).group_epoch
    joined = h.call(join_request("g", instance_id="i-n", protocols=PROTOCOLS))
    assert joined.error is E.NONE and joined.generation_id == epoch
    assert cgroup(h) is None
    classic = h.machine.group("g")
    assert classic.is_state(GroupState.STABLE) and classic.generation_id == epoch  # no rebalance
    assert set(classic.members) == {c1, c2, joined.member_id} and classic.static_members == {"i-n": joined.member_id}
    sync = h.call(c.SyncGroup("g", joined.generation_id, joined.member_id, group_instance_id="i-n"))
    assert sync.error is E.NONE
    # the log tells the same story
    h2 = Harness(topics=topics)
    h2.load(list(h.log))
    assert h2.machine.group_type("consumer").groups == {} and set(h2.machine.group("g").members) == {c1, c2, joined.member_id}
