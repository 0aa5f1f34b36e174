"""The consumer group state machine (KIP-848) driven by hand with a manual clock; tests are named
after the Kafka methods whose behaviour they pin down."""

from __future__ import annotations

import uuid

import pytest

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.consumer import consumer_commands as cc
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.consumer.consumer_group import ConsumerGroupState, MemberState, TopicImage
from kbroker.coordinator.groups.consumer.consumer_heartbeat import AssignmentChanged
from kbroker.protocol.errors import ErrorCode
from kbroker.tests.coordinator_harness import Harness

E = ErrorCode
FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)
SESSION_MS = 45_000
REBALANCE_MS = 30_000


class Topics:
    """A mutable topics image, as the broker's log manager would show it."""

    def __init__(self, **topics: tuple[uuid.UUID, int]) -> None:
        self.image = {name: TopicImage(name, tid, n) for name, (tid, n) in topics.items()}

    def __call__(self):
        return dict(self.image)

    def set(self, name: str, topic_id: uuid.UUID, partitions: int) -> None:
        self.image[name] = TopicImage(name, topic_id, partitions)

    def delete(self, name: str) -> None:
        del self.image[name]


def make(config: GroupConfig | None = None, **topics: tuple[uuid.UUID, int]) -> tuple[Harness, Topics]:
    image = Topics(**(topics or {"foo": (FOO, 6)}))
    return Harness(config, topics=image), image


def join(h: Harness, member_id: str, topics=("foo",), *, regex: str | None = None, instance_id: str | None = None,
         assignor: str | None = None, group: str = "g") -> cc.ConsumerGroupHeartbeatResult:
    return h.call(cc.ConsumerGroupHeartbeat(
        group, member_id, 0, instance_id=instance_id, rebalance_timeout_ms=REBALANCE_MS,
        subscribed_topic_names=None if topics is None else tuple(topics), subscribed_topic_regex=regex,
        server_assignor=assignor, owned_topic_partitions=()))


def beat(h: Harness, member_id: str, epoch: int, owned=None, *, instance_id: str | None = None,
         group: str = "g", **kw) -> cc.ConsumerGroupHeartbeatResult:
    return h.call(cc.ConsumerGroupHeartbeat(group, member_id, epoch, instance_id=instance_id,
                                            owned_topic_partitions=owned, **kw))


def owned(result: cc.ConsumerGroupHeartbeatResult):
    return result.assignment


def parts(result: cc.ConsumerGroupHeartbeatResult, topic_id: uuid.UUID = FOO) -> set[int]:
    return {p for t, ps in result.assignment or () for p in ps if t == topic_id}


def group(h: Harness, gid: str = "g"):
    return h.machine.group_type("consumer").groups.get(gid)


def assert_no_partition_owned_twice(h: Harness) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m in group(h).members.values():
        for a in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {m.member_id}"
                    seen[(t, p)] = m.member_id


def settle(h: Harness, members: dict[str, int], rounds: int = 6) -> dict[str, cc.ConsumerGroupHeartbeatResult]:
    """Heartbeat every member with what it owns until nothing changes; returns the last answers."""
    held: dict[str, tuple] = {m: () for m in members}
    last: dict[str, cc.ConsumerGroupHeartbeatResult] = {}
    for _ in range(rounds):
        for m in list(members):
            r = beat(h, m, members[m], held[m])
            assert r.error is E.NONE, r
            members[m] = r.member_epoch
            if r.assignment is not None:
                held[m] = r.assignment
            last[m] = r
            assert_no_partition_owned_twice(h)
    return last


# -- consumerGroupHeartbeat: joining and reconciling ---------------------------------------------


def test_consumer_group_heartbeat_first_member_gets_everything_at_epoch_two() -> None:
    """A new group starts at epoch 1 with an empty assignment (KAFKA-20268, Kafka 4.3+): the first
    member's subscription bumps it to 2, the first computed assignment's epoch."""
    h, _ = make()
    r = join(h, "a")
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, "a", 2, 5_000)
    assert parts(r) == set(range(6))
    g = group(h)
    assert (g.group_epoch, g.assignment_epoch, g.state) == (2, 2, ConsumerGroupState.STABLE)
    assert h.armed(cc.session_key("g", "a"))
    assert [type(e) for e in h.events] == [AssignmentChanged]
    assert h.events[0].reason == "member joined" and h.events[0].members_moved == ("a",)


def test_maybe_reconcile_revokes_before_assigning() -> None:
    h, _ = make()
    a = join(h, "a")
    b = join(h, "b")
    # b's target is half the partitions, but a still owns them: nothing yet, epoch 3.
    assert (b.member_epoch, parts(b)) == (3, set())
    assert group(h).members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a keeps epoch 2 and is told to give up half (its assignment shrinks first).
    r = beat(h, "a", 2, owned(a))
    assert r.member_epoch == 2 and len(parts(r)) == 3
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert h.armed(cc.rebalance_key("g", "a"))
    assert group(h).state is ConsumerGroupState.RECONCILING
    # b asks again: the partitions are still owned by a.
    assert parts(beat(h, "b", 3, ())) == set()
    # a acknowledges the revocation: epoch 3, rebalance timer cancelled.
    r2 = beat(h, "a", 2, owned(r))
    assert r2.member_epoch == 3 and not h.armed(cc.rebalance_key("g", "a"))
    # now b gets the released partitions.
    rb = beat(h, "b", 3, ())
    assert parts(rb) == set(range(6)) - parts(r)
    assert_no_partition_owned_twice(h)
    beat(h, "b", 3, owned(rb))
    assert group(h).state is ConsumerGroupState.STABLE


def test_compute_target_assignment_three_members_balanced_and_sticky() -> None:
    h, _ = make(foo=(FOO, 6))
    epochs = {m: join(h, m).member_epoch for m in ("a", "b", "c")}
    last = settle(h, epochs)
    sizes = sorted(len(group(h).members[m].assigned_partitions.get(FOO, ())) for m in epochs)
    assert sizes == [2, 2, 2]
    before = {m: set(group(h).members[m].assigned_partitions[FOO]) for m in epochs}
    # d joins: each of a, b, c gives up at most what balance needs.
    epochs["d"] = join(h, "d").member_epoch
    settle(h, epochs)
    after = {m: set(group(h).members[m].assigned_partitions.get(FOO, ())) for m in epochs}
    assert sorted(len(v) for v in after.values()) == [1, 1, 2, 2]
    for m in ("a", "b", "c"):
        assert after[m] <= before[m]  # sticky: nothing moved between old members
    assert group(h).state is ConsumerGroupState.STABLE and last


def test_throw_if_member_epoch_is_invalid() -> None:
    h, _ = make()
    a = join(h, "a")
    assert beat(h, "a", 5, owned(a)).error is E.FENCED_MEMBER_EPOCH  # ahead of the coordinator
    join(h, "b")
    kept = owned(beat(h, "a", 2, owned(a)))  # revoke half
    r = beat(h, "a", 2, kept)  # now epoch 3
    assert r.member_epoch == 3
    # the epoch-3 answer was lost: epoch 2 with a subset of the assignment is accepted...
    again = beat(h, "a", 2, kept)
    assert again.error is E.NONE and again.member_epoch == 3
    # ...but not with partitions it must not own.
    assert beat(h, "a", 2, owned(a)).error is E.FENCED_MEMBER_EPOCH
    assert beat(h, "a", 0, None).error is E.INVALID_REQUEST  # epoch 0 needs a full request


def test_consumer_group_heartbeat_unknown_member_and_group() -> None:
    h, _ = make()
    join(h, "a")
    assert beat(h, "zzz", 3, ()).error is E.UNKNOWN_MEMBER_ID
    assert beat(h, "a", 1, (), group="nope").error is E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize(("kw", "why"), [
    ({"member_id": "", "member_epoch": 0}, "MemberId can't be empty"),
    ({"group_id": ""}, "GroupId"),
    ({"instance_id": ""}, "InstanceId"),
    ({"rack_id": ""}, "RackId"),
    ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs"),
    ({"owned_topic_partitions": None}, "TopicPartitions"),
    ({"owned_topic_partitions": ((FOO, (1,)),)}, "TopicPartitions"),
    ({"subscribed_topic_names": None}, "SubscribedTopic"),
    ({"member_epoch": -3}, "MemberEpoch"),
    ({"member_epoch": -2}, "InstanceId can't be null"),
])
def test_throw_if_consumer_group_heartbeat_request_is_invalid(kw, why) -> None:
    h, _ = make()
    fields = dict(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=REBALANCE_MS,
                  subscribed_topic_names=("foo",), owned_topic_partitions=())
    fields.update(kw)
    r = h.call(cc.ConsumerGroupHeartbeat(**fields))
    assert r.error is E.INVALID_REQUEST and why in r.error_message
    assert h.log == []


def test_v0_member_without_id_gets_one_from_the_coordinator() -> None:
    h, _ = make()
    r = h.call(cc.ConsumerGroupHeartbeat("g", "", 0, rebalance_timeout_ms=REBALANCE_MS,
                                         subscribed_topic_names=("foo",), owned_topic_partitions=(), api_version=0))
    assert r.error is E.NONE and len(r.member_id) > 10 and r.member_id in group(h).members


def test_unsupported_assignor_and_range_assignor() -> None:
    h, _ = make(foo=(FOO, 5))
    assert join(h, "a", assignor="sticky").error is E.UNSUPPORTED_ASSIGNOR
    epochs = {"a": join(h, "a", assignor="range").member_epoch, "b": join(h, "b", assignor="range").member_epoch}
    settle(h, epochs)
    g = group(h)
    assert g.members["a"].assigned_partitions[FOO] == frozenset({0, 1, 2})
    assert g.members["b"].assigned_partitions[FOO] == frozenset({3, 4})
    assert h.events[-1].assignor == "range"


def test_default_assignor_is_first_of_group_consumer_assignors() -> None:
    h, _ = make(GroupConfig(group_consumer_assignors="range,uniform"))
    join(h, "a")
    assert h.events[-1].assignor == "range"


def test_throw_if_consumer_group_is_full() -> None:
    h, _ = make(GroupConfig(group_consumer_max_size=2))
    join(h, "a")
    join(h, "b")
    r = join(h, "c")
    assert r.error is E.GROUP_MAX_SIZE_REACHED
    assert beat(h, "a", group(h).members["a"].member_epoch, None).error is E.NONE  # members stay


# -- leaving, fencing, timers ---------------------------------------------------------------------


def test_consumer_group_leave_moves_partitions_to_the_others() -> None:
    h, _ = make()
    epochs = {"a": join(h, "a").member_epoch, "b": join(h, "b").member_epoch}
    settle(h, epochs)
    epoch = group(h).group_epoch
    r = h.call(cc.ConsumerGroupHeartbeat("g", "b", -1))
    assert (r.error, r.member_id, r.member_epoch) == (E.NONE, "b", -1)
    g = group(h)
    assert "b" not in g.members and g.group_epoch == epoch + 1
    assert not h.armed(cc.session_key("g", "b"))
    assert h.events[-1].reason == "member left"
    settle(h, {"a": epochs["a"]})
    assert g.members["a"].assigned_partitions[FOO] == frozenset(range(6))


def test_session_timeout_fences_the_member() -> None:
    h, _ = make()
    epochs = {"a": join(h, "a").member_epoch, "b": join(h, "b").member_epoch}
    settle(h, epochs)
    for _ in range(10):  # a keeps heartbeating, b goes silent
        h.advance(5_000)
        beat(h, "a", group(h).members["a"].member_epoch, None)
    assert "b" not in group(h).members
    assert any(isinstance(e, AssignmentChanged) and e.reason == "session expired" for e in h.events)
    settle(h, {"a": group(h).members["a"].member_epoch})
    assert group(h).members["a"].assigned_partitions[FOO] == frozenset(range(6))


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h, _ = make()
    a = join(h, "a")
    join(h, "b")
    beat(h, "a", 2, owned(a))  # told to revoke, never confirms
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(REBALANCE_MS - 1)
    assert "a" in group(h).members
    beat(h, "b", 3, ())  # b stays alive
    h.advance(1)
    assert "a" not in group(h).members
    assert any(isinstance(e, AssignmentChanged) and e.reason == "revocation timed out" for e in h.events)
    assert parts(beat(h, "b", group(h).members["b"].member_epoch, ())) == set(range(6))


# -- static membership ----------------------------------------------------------------------------


def test_static_member_rejoins_within_session_timeout_with_same_partitions() -> None:
    h, _ = make()
    epochs = {"a": join(h, "a", instance_id="i-a").member_epoch, "b": join(h, "b", instance_id="i-b").member_epoch}
    settle(h, epochs)
    before = group(h).members["a"].assigned_partitions
    group_epoch = group(h).group_epoch
    r = h.call(cc.ConsumerGroupHeartbeat("g", "a", -2, instance_id="i-a"))
    assert (r.error, r.member_epoch) == (E.NONE, -2)
    # a second instance with the same id cannot join while the first holds it... (b's id here)
    assert join(h, "b2", instance_id="i-b").error is E.UNRELEASED_INSTANCE_ID
    h.advance(10_000)
    back = join(h, "a2", instance_id="i-a")
    assert back.error is E.NONE and back.member_id == "a2"
    g = group(h)
    assert "a" not in g.members and g.members["a2"].assigned_partitions == before
    assert g.group_epoch == group_epoch  # no rebalance
    assert {p for _, ps in back.assignment for p in ps} == set(before[FOO])
    # the old incarnation's session timer fires into nothing; a2 lives on its own heartbeats
    h.advance(SESSION_MS - 10_000)
    assert "a2" in group(h).members


def test_static_member_fenced_when_not_back_within_session_timeout() -> None:
    h, _ = make()
    epochs = {"a": join(h, "a", instance_id="i-a").member_epoch, "b": join(h, "b").member_epoch}
    settle(h, epochs)
    h.call(cc.ConsumerGroupHeartbeat("g", "a", -2, instance_id="i-a"))
    for _ in range(10):
        h.advance(5_000)
        beat(h, "b", group(h).members["b"].member_epoch, None)
    assert "a" not in group(h).members and group(h).static_member("i-a") is None


def test_static_member_wrong_member_id_is_fenced_instance() -> None:
    h, _ = make()
    join(h, "a", instance_id="i-a")
    assert beat(h, "other", 1, (), instance_id="i-a").error is E.FENCED_INSTANCE_ID
    assert beat(h, "a", 1, (), instance_id="i-zzz").error is E.UNKNOWN_MEMBER_ID


# -- metadata and regular expressions -------------------------------------------------------------


def test_new_partitions_bump_the_group_epoch() -> None:
    h, topics = make()
    r = join(h, "a")
    topics.set("foo", FOO, 8)
    r2 = beat(h, "a", 2, owned(r))
    assert r2.member_epoch == 3 and parts(r2) == set(range(8))
    assert h.events[-1].reason == "metadata changed"


def test_deleted_topic_leaves_the_assignment() -> None:
    h, topics = make(foo=(FOO, 2), bar=(BAR, 2))
    r = join(h, "a", topics=("foo", "bar"))
    assert parts(r, BAR) == {0, 1}
    topics.delete("bar")
    r2 = beat(h, "a", 2, owned(r))  # revoke bar first
    r3 = beat(h, "a", r2.member_epoch, owned(r2))
    assert parts(r3 if r3.assignment is not None else r2, BAR) == set()
    assert group(h).members["a"].assigned_partitions == {FOO: frozenset({0, 1})}


def test_regex_subscription_picks_up_new_topics() -> None:
    h, topics = make(foo=(FOO, 2))
    r = join(h, "a", topics=None, regex="^fo.*")
    # Kafka resolves a new regex after the heartbeat that brought it: its topics come at a later epoch
    joined = r.member_epoch
    assert (parts(r), group(h).resolved_regexes) == (set(), {})
    h.advance(0)
    assert group(h).resolved_regexes == {"^fo.*": frozenset({"foo"})} and group(h).group_epoch == joined + 1
    r = beat(h, "a", joined, owned(r))
    assert (parts(r), r.member_epoch) == ({0, 1}, joined + 1)
    topics.set("food", BAR, 3)
    topics.set("bar", uuid.UUID(int=7), 3)
    r2 = beat(h, "a", r.member_epoch, owned(r))
    assert parts(r2, BAR) == {0, 1, 2} and parts(r2, uuid.UUID(int=7)) == set()
    assert group(h).resolved_regexes == {"^fo.*": frozenset({"foo", "food"})}


def test_regex_resolves_to_what_the_member_may_describe_and_members_do_not_take_turns() -> None:
    """Under an authorizer a regex resolves to the topics the heartbeat's member may DESCRIBE (Kafka's
    TopicRegexResolver); a member with fewer rights does not narrow a resolution another made, so two
    principals sharing the regex never resolve it in turn, a new group epoch each time."""
    h, topics = make(foo=(FOO, 2), food=(BAR, 2))
    narrow = lambda name: name == "foo"  # noqa: E731
    r = h.call(cc.ConsumerGroupHeartbeat("g", "a", 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_regex="^fo.*",
                                         owned_topic_partitions=(), topic_filter=narrow))
    assert parts(r, BAR) == set() and group(h).resolved_regexes == {}
    h.advance(0)  # resolved after that heartbeat, with its member's rights
    assert group(h).resolved_regexes == {"^fo.*": frozenset({"foo"})}
    wide = h.call(cc.ConsumerGroupHeartbeat("g", "b", 0, rebalance_timeout_ms=REBALANCE_MS,
                                            subscribed_topic_regex="^fo.*", owned_topic_partitions=(),
                                            topic_filter=lambda name: True))
    assert group(h).resolved_regexes == {"^fo.*": frozenset({"foo", "food"})}
    epoch = group(h).group_epoch
    for _ in range(3):  # both keep heartbeating: the resolution and the epoch stay
        beat(h, "a", group(h).members["a"].member_epoch, topic_filter=narrow)
        beat(h, "b", group(h).members["b"].member_epoch, topic_filter=lambda name: True)
    assert group(h).group_epoch == epoch and group(h).resolved_regexes["^fo.*"] == {"foo", "food"}
    topics.set("fog", uuid.UUID(int=9), 1)  # a new topic only the wide member may describe
    beat(h, "a", group(h).members["a"].member_epoch, topic_filter=narrow)
    assert group(h).resolved_regexes["^fo.*"] == {"foo", "food"}
    assert wide.error is E.NONE


def test_invalid_regular_expression() -> None:
    h, _ = make()
    r = join(h, "a", topics=None, regex="(unclosed")
    assert r.error is E.INVALID_REGULAR_EXPRESSION


def test_a_regular_expression_longer_than_a_group_can_store_is_refused_and_big_ones_are_not_kept() -> None:
    from kbroker.coordinator.groups.consumer import regex as topic_regex

    h, _ = make()
    longest = "(" + "|".join(f"t{i}" for i in range(6000)) + ")"  # valid, about 41 KB
    assert len(longest) > topic_regex.MAX_PATTERN_CHARS
    r = join(h, "a", topics=None, regex=longest)
    assert r.error is E.INVALID_REGULAR_EXPRESSION  # it was UNKNOWN_SERVER_ERROR from the record's write
    kept = topic_regex._compile_cached.cache_info().currsize
    big = "(" + "|".join(f"u{i}" for i in range(1000)) + ")"  # 6 KB: valid, compiled, not cached
    assert topic_regex.compile_regex(big).fullmatch("u7")
    assert topic_regex._compile_cached.cache_info().currsize == kept


# -- offsets and the shared APIs -------------------------------------------------------------------


def commit(h: Harness, member: str, epoch: int, offset: int = 10, version: int = 9):
    return h.call(c.OffsetCommit("g", epoch, member, (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, offset),)),),
                                 api_version=version))


def test_offset_commit_uses_the_member_epoch() -> None:
    h, _ = make()
    join(h, "a")
    assert commit(h, "a", 2).topics[0].partitions[0].error is E.NONE
    assert commit(h, "a", 7).topics[0].partitions[0].error is E.STALE_MEMBER_EPOCH
    assert commit(h, "zz", 2).topics[0].partitions[0].error is E.UNKNOWN_MEMBER_ID
    assert commit(h, "a", 2, version=8).topics[0].partitions[0].error is E.UNSUPPORTED_VERSION
    assert commit(h, "", -1).topics[0].partitions[0].error is E.UNKNOWN_MEMBER_ID  # not empty
    fetched = h.call(c.OffsetFetch("g", (c.TopicPartitions("foo", (0,)),), member_id="a", member_epoch=2))
    assert fetched.error is E.NONE and fetched.topics[0].partitions[0].offset == 10
    stale = h.call(c.OffsetFetch("g", None, member_id="a", member_epoch=3))
    assert stale.error is E.STALE_MEMBER_EPOCH
    assert h.call(c.OffsetFetch("g", None)).error is E.NONE  # admin: no member


def test_a_member_commit_too_large_for_one_batch_is_refused_without_a_record() -> None:
    image = Topics(foo=(FOO, 6))
    h = Harness(topics=image, max_batch_bytes=61 + 6 * (37 + 1 + 3) - 1)
    join(h, "a")
    written = len(h.log)
    parts = tuple(c.OffsetCommitPartition(i, 5) for i in range(6))
    r = h.call(c.OffsetCommit("g", 2, "a", (c.OffsetCommitTopic("foo", parts),), api_version=9))
    assert [p.error for p in r.topics[0].partitions] == [E.UNKNOWN_SERVER_ERROR] * 6
    assert len(h.log) == written
    r = h.call(c.OffsetCommit("g", 2, "a", (c.OffsetCommitTopic("foo", parts[:5]),), api_version=9))
    assert [p.error for p in r.topics[0].partitions] == [E.NONE] * 5


def _committed(h: Harness) -> int:
    return h.call(c.OffsetFetch("g", (c.TopicPartitions("foo", (0,)),))).topics[0].partitions[0].offset


def test_transactional_offset_commit_check_and_materialisation() -> None:
    """Kafka's validateTransactionalOffsetCommit and replayEndTransactionMarker for a consumer group:
    TxnOffsetCommit's member check (any version; a stale epoch is ILLEGAL_GENERATION) writes nothing,
    and a committed transaction's offsets land whatever the group's members."""
    h, _ = make()
    join(h, "a")

    def check(member: str, epoch: int, version: int = 9):
        cmd = c.OffsetCommit("g", epoch, member, (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, 0),)),),
                             api_version=version, validate_only=True)
        return h.call(cmd).topics[0].partitions[0].error

    assert check("a", 2) is E.NONE
    assert check("a", 2, version=3) is E.NONE  # TxnOffsetCommit v3 carries the member epoch
    assert check("a", 7) is E.ILLEGAL_GENERATION
    assert check("zz", 2) is E.UNKNOWN_MEMBER_ID
    assert _committed(h) == -1  # a check is not a commit (it wrote offset 0 once)
    done = h.call(c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, 42),)),),
                                 api_version=8, transactional=True))
    assert done.topics[0].partitions[0].error is E.NONE  # a member-less, old-version commit of a transaction
    assert _committed(h) == 42


def test_test_controls_on_a_consumer_group() -> None:
    """kbroker's test controls (controls.py) reach a consumer group: expiring a member fences it in the
    control's own turn (a heartbeat sent right after is UNKNOWN_MEMBER_ID); a coordinator move stops
    and re-arms the session timers; there is no group-wide rebalance to force, and ending every
    session fences one member after another, each from the group the one before left."""
    from kbroker.coordinator.groups.classic.controls import CoordinatorMove, ExpireMember, ExpireSessions, ForceRebalance

    h, _ = make()
    join(h, "a")
    join(h, "b")
    assert h.call(ForceRebalance("g")).error is E.INVALID_REQUEST
    assert h.call(ExpireMember("g", "zz")).error is E.UNKNOWN_MEMBER_ID
    assert h.call(ExpireMember("g", "a")).error is E.NONE
    assert set(group(h).members) == {"b"} and group(h).group_epoch == 4
    assert beat(h, "a", 1).error is E.UNKNOWN_MEMBER_ID
    assert h.call(CoordinatorMove("g", "unload")).error is E.NONE
    h.advance(SESSION_MS + 1000)  # past the session timeout: b stays, its coordinator forgot its timer
    assert set(group(h).members) == {"b"}
    assert h.call(CoordinatorMove("g", "load")).error is E.NONE
    assert h.armed(cc.session_key("g", "b"))
    join(h, "c")
    ended = h.call(ExpireSessions("g"))  # every member, one fence after another in the group's turn
    assert (ended.error, ended.detail) == (E.NONE, "2 member(s) expired")
    assert group(h).members == {} and group(h).state is ConsumerGroupState.EMPTY
    assert h.call(c.DeleteGroup("g")).error is E.NONE


def test_list_describe_delete_for_consumer_groups() -> None:
    h, _ = make()
    join(h, "a")
    listed = h.machine.list_groups((), ("consumer",))
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "consumer", "Stable")]
    assert h.machine.list_groups((), ("classic",)) == []
    assert h.machine.list_groups(("empty",), ()) == []
    assert h.call(c.DescribeGroup("g", 6)).error is E.GROUP_ID_NOT_FOUND
    d = h.call(cc.ConsumerGroupDescribe("g"))
    assert (d.error, d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (E.NONE, "Stable", 2, 2,
                                                                                        "uniform")
    assert d.members[0].assignment[0].topic_name == "foo"
    assert h.call(cc.ConsumerGroupDescribe("none")).error is E.GROUP_ID_NOT_FOUND
    assert h.call(c.DeleteGroup("g")).error is E.NON_EMPTY_GROUP
    commit(h, "a", 2)
    assert h.call(c.OffsetDelete("g", (c.TopicPartitions("foo", (0,)),))).topics[0].partitions[0].error \
        is E.GROUP_SUBSCRIBED_TO_TOPIC
    h.call(cc.ConsumerGroupHeartbeat("g", "a", -1))
    assert group(h).state is ConsumerGroupState.EMPTY
    assert h.call(c.DeleteGroup("g")).error is E.NONE
    assert group(h) is None and h.machine.list_groups((), ()) == []


def test_empty_classic_group_becomes_a_consumer_group_with_its_offsets() -> None:
    h, _ = make()
    h.call(c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("foo", (c.OffsetCommitPartition(0, 42),)),)))
    assert h.machine.group("g").group_type == "classic"
    assert join(h, "a").error is E.NONE
    assert h.machine.group("g") is group(h)  # one id, one group: the classic one gave way
    assert h.offsets("g")[("foo", 0)].offset == 42


def test_classic_join_to_a_consumer_group_needs_the_consumer_protocol() -> None:
    from kbroker.tests.coordinator_harness import join_request

    h, _ = make()
    join(h, "a")
    # not ConsumerProtocolSubscription bytes, or another protocol type: refused
    assert h.call(join_request("g", "x")).error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.call(join_request("g", "x", protocol_type="connect")).error is E.INCONSISTENT_GROUP_PROTOCOL


# -- replay (records are the only path to durable state) -----------------------------------------


def test_replay_rebuilds_epochs_assignments_and_offsets() -> None:
    h, topics = make()
    epochs = {"a": join(h, "a").member_epoch, "b": join(h, "b", instance_id="i-b").member_epoch}
    settle(h, epochs)
    commit(h, "a", group(h).members["a"].member_epoch, 5)
    old = group(h)
    h2 = Harness(topics=topics)
    h2.load(list(h.log))
    new = h2.machine.group_type("consumer").groups["g"]
    assert (new.group_epoch, new.assignment_epoch, new.state) == (old.group_epoch, old.assignment_epoch, old.state)
    assert new.members == old.members and new.target_assignment == old.target_assignment
    assert h2.offsets("g") == h.offsets("g") and new.static_members == {"i-b": "b"}
    assert h2.armed(cc.session_key("g", "a")) and h2.armed(cc.session_key("g", "b"))
    # the loaded group goes on: a heartbeat with the current epoch is accepted
    assert beat(h2, "a", new.members["a"].member_epoch, None).error is E.NONE


def test_replay_of_group_tombstones_forgets_the_group() -> None:
    h, _ = make()
    join(h, "a")
    h.call(cc.ConsumerGroupHeartbeat("g", "a", -1))
    h.call(c.DeleteGroup("g"))
    h2 = Harness(topics=Topics(foo=(FOO, 6)))
    h2.load(list(h.log))
    assert h2.machine.group_type("consumer").groups == {} and h2.machine.groups == {}


def _compacted(records, drop_tombstones: bool):
    """What log compaction leaves: the last record of each key, in log order (and, once the delete
    retention has passed, no tombstones)."""
    from kbroker.protocol.records.codec import encode_record

    last = {}
    for i, record in enumerate(records):
        key, value = encode_record(record)
        last[key] = (i, record, value is None)
    kept = sorted(last.values(), key=lambda x: x[0])
    return [record for _, record, tombstone in kept if not (drop_tombstones and tombstone)]


@pytest.mark.parametrize("drop_tombstones", [False, True])
def test_replay_of_a_compacted_log_gives_the_same_groups(drop_tombstones) -> None:
    h, topics = make(foo=(FOO, 6), bar=(BAR, 3))
    epochs = {m: join(h, m, topics=("foo", "bar")).member_epoch for m in ("a", "b", "c")}
    epochs["s"] = join(h, "s", instance_id="i-s").member_epoch
    settle(h, epochs)
    commit(h, "a", group(h).members["a"].member_epoch, 11)
    h.call(cc.ConsumerGroupHeartbeat("g", "b", -1))  # leaves
    del epochs["b"]
    h.call(cc.ConsumerGroupHeartbeat("g", "s", -2, instance_id="i-s"))  # static restart under a new id
    del epochs["s"]
    epochs["s2"] = join(h, "s2", instance_id="i-s").member_epoch
    settle(h, epochs)
    join(h, "x", group="gone")
    h.call(cc.ConsumerGroupHeartbeat("gone", "x", -1))
    h.call(c.DeleteGroup("gone"))
    old = group(h)
    h2 = Harness(topics=topics)
    h2.load(_compacted(h.log, drop_tombstones))
    new = h2.machine.group_type("consumer").groups["g"]
    assert (new.group_epoch, new.assignment_epoch, new.metadata_hash) == (
        old.group_epoch, old.assignment_epoch, old.metadata_hash)
    assert new.members == old.members and new.target_assignment == old.target_assignment
    assert new.partition_epochs == old.partition_epochs and new.static_members == {"i-s": "s2"}
    assert h2.offsets("g") == h.offsets("g")
    assert "gone" not in h2.machine.group_type("consumer").groups and "gone" not in h2.machine.groups


def test_a_groups_session_timeout_and_heartbeat_interval_overrides_are_used() -> None:
    """Kafka's consumerGroupSessionTimeoutMs / consumerGroupHeartbeatIntervalMs: a group's
    consumer.session.timeout.ms and consumer.heartbeat.interval.ms (IncrementalAlterConfigs on the GROUP
    resource) over the broker's, read at each heartbeat (the steady one too) and at a load; another
    group keeps the broker's."""
    overrides: dict[tuple[str, str], str] = {}
    h = Harness(topics=Topics(foo=(FOO, 2)), group_config=lambda g, name: overrides.get((g, name)))
    overrides[("g", "consumer.session.timeout.ms")] = "60000"
    overrides[("g", "consumer.heartbeat.interval.ms")] = "12000"
    first = join(h, "m1")
    assert (first.error, first.heartbeat_interval_ms) == (E.NONE, 12_000)
    other = join(h, "o1", group="other")
    assert other.heartbeat_interval_ms == h.config.group_consumer_heartbeat_interval_ms == 5_000
    epoch = settle(h, {"m1": first.member_epoch})["m1"].member_epoch
    assert beat(h, "m1", epoch).heartbeat_interval_ms == 12_000  # the steady path
    h.advance(SESSION_MS + 1_000)  # past the broker's 45 s, not the group's 60 s
    assert "m1" in group(h).members and "o1" not in group(h, "other").members
    h.advance(15_000)
    assert "m1" not in group(h).members  # fenced at 60 s
    overrides[("g", "consumer.heartbeat.interval.ms")] = "15000"  # changed while a member is steady
    again = join(h, "m2")
    epoch = settle(h, {"m2": again.member_epoch})["m2"].member_epoch
    overrides[("g", "consumer.heartbeat.interval.ms")] = "6000"
    assert beat(h, "m2", epoch).heartbeat_interval_ms == 6_000
