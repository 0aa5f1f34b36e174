"""Streams groups (KIP-1071): topology validation, the sticky task assignor and the streams group
type driven by hand with a manual clock (join with a topology, internal topics reported missing,
tasks assigned, revocation before reassignment, session timeout, leave, describe, another type's id,
records through the `__consumer_offsets` codec and replayed on load)."""

from __future__ import annotations

import dataclasses
import uuid

from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.consumer import consumer_commands as cc
from kbroker.coordinator.groups.consumer.consumer_group import TopicImage
from kbroker.coordinator.groups.streams import streams_commands as sc
from kbroker.coordinator.groups.streams.assignor import AssignmentMember, assign
from kbroker.coordinator.groups.streams.streams_group import StreamsGroup
from kbroker.coordinator.groups.streams.topology import Subtopology, TopicInfo, configure, tasks_of
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import streams_records as sr
from kbroker.protocol.records.codec import decode_record, encode_record
from kbroker.tests.coordinator_harness import Harness

E = ErrorCode
SESSION_MS = 45_000
APP = "wordcount"
REPARTITION = f"{APP}-counts-repartition"
CHANGELOG = f"{APP}-counts-changelog"
# A word count: subtopology 0 reads `words` and writes the repartition topic; subtopology 1 reads
# it and counts into a state store with a changelog.
WORDCOUNT = sc.Topology(1, (
    Subtopology("0", source_topics=("words",), repartition_sink_topics=(REPARTITION,)),
    Subtopology("1", repartition_source_topics=(TopicInfo(REPARTITION),),
                state_changelog_topics=(TopicInfo(CHANGELOG, configs=(("cleanup.policy", "compact"),)),)),
))


# -- topology validation ----------------------------------------------------------------------------


def test_missing_source_topics_are_reported_and_nothing_is_to_be_created() -> None:
    configured = configure(WORDCOUNT.subtopologies, {})
    assert configured.missing_source_topics == ("words",) and not configured.ready
    assert configured.missing_internal_topics == () and configured.all_tasks() == frozenset()


def test_internal_topics_take_their_partitions_from_the_topology() -> None:
    configured = configure(WORDCOUNT.subtopologies, {"words": 3})
    assert [(t.name, t.partitions) for t in configured.missing_internal_topics] == [(CHANGELOG, 3), (REPARTITION, 3)]
    assert dict(configured.missing_internal_topics[0].configs) == {"cleanup.policy": "compact"}
    ready = configure(WORDCOUNT.subtopologies, {"words": 3, REPARTITION: 3, CHANGELOG: 3})
    assert ready.ready and len(ready.all_tasks()) == 6


def test_a_changelog_with_the_wrong_partition_count_is_incorrectly_partitioned() -> None:
    configured = configure(WORDCOUNT.subtopologies, {"words": 3, REPARTITION: 3, CHANGELOG: 2})
    assert configured.incorrectly_partitioned == (CHANGELOG,) and not configured.ready


def test_copartitioned_source_topics_must_agree() -> None:
    join = Subtopology("0", source_topics=("left", "right"), copartition_groups=(((0, 1), (), ()),))
    assert configure((join,), {"left": 2, "right": 3}).incorrectly_partitioned == ("left", "right")
    assert configure((join,), {"left": 2, "right": 2}).ready


# -- the sticky task assignor ---------------------------------------------------------------------


TASKS = frozenset((s, p) for s in "01" for p in range(3))


def test_active_tasks_are_balanced_over_processes_and_stay_where_they_were() -> None:
    first = assign({"a": AssignmentMember("a", "pa")}, TASKS, 0)
    assert first["a"].active == TASKS
    second = assign({"a": AssignmentMember("a", "pa", first["a"].active),
                     "b": AssignmentMember("b", "pb")}, TASKS, 0)
    assert len(second["a"].active) == len(second["b"].active) == 3
    assert second["a"].active | second["b"].active == TASKS and second["a"].active <= first["a"].active


def test_standby_replicas_never_share_a_process_with_the_active_task() -> None:
    members = {m: AssignmentMember(m, f"p{m}") for m in "abc"}
    result = assign(members, TASKS, 1, TASKS)
    for task in TASKS:
        active = [m for m in members if task in result[m].active]
        standby = [m for m in members if task in result[m].standby]
        assert len(active) == 1 and len(standby) == 1 and active != standby
    # two stream threads of one process: no standby, as there is no other process to hold it
    same = assign({"a": AssignmentMember("a", "p"), "b": AssignmentMember("b", "p")}, TASKS, 1, TASKS)
    assert all(not t.standby for t in same.values())
    # a stateless task (no changelog: nothing to keep warm) gets no standby, as in Kafka's assignor
    stateful = frozenset(t for t in TASKS if t[0] == "1")
    only = assign(members, TASKS, 1, stateful)
    assert frozenset().union(*(t.standby for t in only.values())) == stateful


# -- the group type -------------------------------------------------------------------------------


class Topics:
    def __init__(self, **partitions: int) -> None:
        self.image = {name: TopicImage(name, uuid.uuid4(), n) for name, n in partitions.items()}

    def create(self, result: sc.StreamsGroupHeartbeatResult) -> None:
        for t in result.creatable_topics:
            self.image[t.name] = TopicImage(t.name, uuid.uuid4(), t.partitions)


# No initial delay and no assignment interval: every change is assigned at once (the tests of both
# delays set them).
NO_DELAY = GroupConfig(group_streams_initial_rebalance_delay_ms=0, group_streams_assignment_interval_ms=0)


def make(config: GroupConfig = NO_DELAY, **partitions: int) -> tuple[Harness, Topics]:
    topics = Topics(**partitions)
    return Harness(config, topics=lambda: dict(topics.image)), topics


def beat(h: Harness, member: str, epoch: int, *, owned: frozenset | None = None, process: str | None = None,
         topology: sc.Topology | None = None, endpoint_epoch: int = 0,
         instance: str | None = None, host: str | None = None) -> sc.StreamsGroupHeartbeatResult:
    return h.call(sc.StreamsGroupHeartbeat(
        APP, member, epoch, endpoint_information_epoch=endpoint_epoch, instance_id=instance,
        rebalance_timeout_ms=300_000 if epoch == 0 else -1,
        topology=topology or (WORDCOUNT if epoch == 0 else None),
        process_id=process or (f"process-{member}" if epoch == 0 else None),
        user_endpoint=(host or f"{member}.local", 8080) if epoch == 0 else None,
        **owned_tasks(() if epoch == 0 and owned is None else owned)))


def owned_tasks(owned: frozenset | tuple | None, standby: tuple = (), warmup: tuple = ()) -> dict:
    """The task fields of a heartbeat: all null (unchanged) or all three lists, as Kafka requires."""
    if owned is None:
        return {}
    active = tuple((s, tuple(sorted(p for t, p in owned if t == s))) for s in sorted({s for s, _ in owned}))
    return {"active_tasks": active, "standby_tasks": standby, "warmup_tasks": warmup}


def active(result: sc.StreamsGroupHeartbeatResult) -> frozenset:
    assert result.active_tasks is not None
    return tasks_of(result.active_tasks)


def test_the_first_member_is_told_of_missing_internal_topics_then_gets_every_task_once_they_exist() -> None:
    h, topics = make(words=2)
    a = beat(h, "a", 0)
    assert (a.error, a.member_epoch, a.heartbeat_interval_ms) == (E.NONE, 2, 5_000)  # a new group starts at 1
    assert [code for code, _ in a.statuses] == [sc.MISSING_INTERNAL_TOPICS]
    assert sorted(t.name for t in a.creatable_topics) == [CHANGELOG, REPARTITION]
    assert active(a) == frozenset() and h.group(APP).state == "NotReady"
    topics.create(a)  # the broker creates them (broker/apis/streams_group_heartbeat.py)
    a2 = beat(h, "a", 2, owned=frozenset())
    assert a2.statuses == () and a2.member_epoch == 3
    assert active(a2) == frozenset((s, p) for s in "01" for p in range(2))
    assert h.group(APP).state == "Stable"
    assert h.deadline(sc.session_key(APP, "a")) == h.clock.now_ms() + SESSION_MS


def ready_group() -> tuple[Harness, frozenset]:
    h, topics = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0)
    assert a.statuses == ()
    return h, active(a)


def test_a_source_topic_deleted_and_created_again_under_its_name_moves_the_group_epoch() -> None:
    """Kafka's metadata hash (KIP-1101) hashes the topic id: a topic deleted and created again with the
    same partitions between two heartbeats is a change of the group's topics (its offsets are gone)."""
    h, topics = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0)
    epoch = h.group(APP).group_epoch
    assert beat(h, "a", a.member_epoch, owned=active(a)).member_epoch == a.member_epoch  # nothing changed
    assert h.group(APP).group_epoch == epoch
    topics.image["words"] = TopicImage("words", uuid.uuid4(), 2)  # another topic id, the same partitions
    beat(h, "a", a.member_epoch, owned=active(a))
    assert h.group(APP).group_epoch == epoch + 1


def test_a_second_member_gets_tasks_only_once_the_first_has_revoked_them() -> None:
    h, a_tasks = ready_group()
    assert len(a_tasks) == 4
    b = beat(h, "b", 0)
    assert b.member_epoch == 3 and active(b) == frozenset()  # a still owns every task
    assert h.group(APP).state == "Reconciling"
    # a is told to give up two tasks, keeping its epoch until it has
    a2 = beat(h, "a", 2, owned=a_tasks)
    kept = active(a2)
    assert a2.member_epoch == 2 and len(kept) == 2
    revoked = a_tasks - kept
    still = beat(h, "a", 2, owned=a_tasks)  # not yet given up
    assert still.member_epoch == 2 and still.active_tasks is None
    b2 = beat(h, "b", 3, owned=frozenset())
    assert b2.active_tasks is None  # the tasks are still a's
    a3 = beat(h, "a", 2, owned=kept)
    assert a3.member_epoch == 3
    b3 = beat(h, "b", 3, owned=frozenset())
    assert active(b3) == revoked and h.group(APP).state == "Stable"
    # the endpoints for interactive queries map each member's tasks to its source topic partitions
    endpoints = {ep: dict(act) for ep, act, _ in b3.partitions_by_endpoint or ()}
    assert set(endpoints) == {("a.local", 8080), ("b.local", 8080)}


def test_standby_replicas_when_configured() -> None:
    config = dataclasses.replace(NO_DELAY, group_streams_num_standby_replicas=1)
    h, _ = make(config, words=2, **{REPARTITION: 2, CHANGELOG: 2})
    beat(h, "a", 0)
    beat(h, "b", 0)
    group = h.group(APP)
    a_target, b_target = group.target("a"), group.target("b")
    # the counting subtopology 1 keeps state: its tasks have standbys; subtopology 0's do not
    assert a_target.standby | b_target.standby == frozenset(("1", p) for p in range(2))
    assert not a_target.active & a_target.standby and not b_target.active & b_target.standby


def test_session_timeout_fences_the_member_and_its_tasks_go_to_the_others() -> None:
    h, a_tasks = ready_group()
    beat(h, "b", 0)
    h.advance(SESSION_MS - 1)
    beat(h, "b", 3, owned=frozenset())
    h.advance(1)  # a's session ends
    assert set(h.group(APP).members) == {"b"}
    b = beat(h, "b", 3, owned=frozenset())
    assert b.member_epoch == 4 and active(b) == a_tasks  # the fence moved the group epoch from 3 to 4


def test_leave_removes_the_member_and_an_unknown_member_is_refused() -> None:
    h, _ = ready_group()
    left = beat(h, "a", -1)
    assert (left.error, left.member_epoch) == (E.NONE, -1)
    assert h.group(APP).state == "Empty"
    assert beat(h, "a", 2).error == E.UNKNOWN_MEMBER_ID
    assert beat(h, "zz", 3).error == E.UNKNOWN_MEMBER_ID


def test_fenced_epochs_and_invalid_requests() -> None:
    h, _ = ready_group()
    assert beat(h, "a", 7).error == E.FENCED_MEMBER_EPOCH
    no_topology = h.call(sc.StreamsGroupHeartbeat(APP, "c", 0, rebalance_timeout_ms=1, process_id="p",
                                                  **owned_tasks(())))
    assert (no_topology.error, no_topology.error_message) == (E.INVALID_REQUEST,
                                                              "Topology must be non-null when (re-)joining.")
    assert h.call(sc.StreamsGroupHeartbeat(APP, "", 0)).error == E.INVALID_REQUEST


def test_a_stale_topology_is_reported_and_another_one_refused() -> None:
    """Kafka 4.4's maybeUpdateTopology: the first topology is the group's; an older epoch is stale (on
    every heartbeat of the member, not only its join); any other topology of the same or a newer epoch
    is refused ("Topology updates are not supported yet.")."""
    h, _ = ready_group()
    newer = dataclasses.replace(WORDCOUNT, epoch=2)
    b = beat(h, "b", 0, topology=newer)
    assert (b.error, b.error_message) == (E.INVALID_REQUEST, "Topology updates are not supported yet.")
    older = dataclasses.replace(WORDCOUNT, epoch=0)
    c = beat(h, "c", 0, topology=older)
    assert c.error == E.NONE and [code for code, _ in c.statuses] == [sc.STALE_TOPOLOGY]
    again = beat(h, "c", c.member_epoch, owned=frozenset())
    assert [code for code, _ in again.statuses] == [sc.STALE_TOPOLOGY] and h.group(APP).topology.epoch == 1


def test_another_types_group_id_is_refused_and_a_streams_id_refused_to_consumers() -> None:
    h, _ = ready_group()
    consumer = h.call(cc.ConsumerGroupHeartbeat("cg", "m1", 0, rebalance_timeout_ms=1000,
                                                subscribed_topic_names=("words",), owned_topic_partitions=()))
    assert consumer.error == E.NONE
    refused = h.call(sc.StreamsGroupHeartbeat("cg", "x", 0, rebalance_timeout_ms=1, topology=WORDCOUNT,
                                              process_id="p", **owned_tasks(())))
    assert (refused.error, refused.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a streams group.")
    other = h.call(cc.ConsumerGroupHeartbeat(APP, "m2", 0, rebalance_timeout_ms=1000,
                                             subscribed_topic_names=("words",), owned_topic_partitions=()))
    assert other.error == E.GROUP_ID_NOT_FOUND
    described = h.call(sc.StreamsGroupDescribe("cg"))
    assert described.error == E.GROUP_ID_NOT_FOUND
    assert h.call(sc.StreamsGroupDescribe("nope")).error == E.GROUP_ID_NOT_FOUND


def test_describe_shows_members_topology_and_assignments() -> None:
    h, a_tasks = ready_group()
    d = h.call(sc.StreamsGroupDescribe(APP))
    assert (d.error, d.state, d.group_epoch, d.assignment_epoch) == (E.NONE, "Stable", 2, 2)
    assert d.topology == WORDCOUNT
    (m,) = d.members
    assert (m.member_id, m.process_id, m.user_endpoint) == ("a", "process-a", ("a.local", 8080))
    assert tasks_of(m.assignment[0]) == a_tasks == tasks_of(m.target_assignment[0])


def test_records_are_kafkas_formats_and_replay_rebuilds_the_group() -> None:
    h, _ = ready_group()
    beat(h, "b", 0)
    kinds = {r.record_type for r in h.log if isinstance(r, sr.StreamsRecord)}
    assert kinds == {sr.GROUP_METADATA, sr.TOPOLOGY, sr.MEMBER_METADATA, sr.TARGET_ASSIGNMENT_MEMBER,
                     sr.TARGET_ASSIGNMENT_METADATA, sr.CURRENT_MEMBER_ASSIGNMENT}
    encoded = [encode_record(r) for r in h.log]
    assert all(key[:2] in {bytes([0, t]) for t in (17, 19, 20, 21, 22, 23)} for key, _ in encoded)
    decoded = [decode_record(k, v) for k, v in encoded]
    assert decoded == h.log
    before = h.group(APP)
    fresh, _ = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    fresh.load(decoded)
    after = fresh.group(APP)
    assert isinstance(after, StreamsGroup)
    assert (after.group_epoch, after.assignment_epoch, after.topology, after.members, after.target_assignment) == (
        before.group_epoch, before.assignment_epoch, before.topology, before.members, before.target_assignment)
    assert fresh.armed(sc.session_key(APP, "a")) and fresh.armed(sc.session_key(APP, "b"))


def test_delete_group_tombstones_every_record() -> None:
    h, _ = ready_group()
    beat(h, "a", -1)
    group = h.group(APP)
    assert group.validate_delete_group() is None
    tombstones = group.tombstones()
    assert {t.record_type for t in tombstones} == {sr.GROUP_METADATA, sr.TOPOLOGY, sr.TARGET_ASSIGNMENT_METADATA}
    assert all(t.value is None for t in tombstones)
    assert group.listed().group_type == "streams"


def test_a_third_member_gets_its_share_though_the_first_two_held_every_task() -> None:
    four = frozenset((s, p) for s in "01" for p in range(2))
    two = assign({"a": AssignmentMember("a", "pa"), "b": AssignmentMember("b", "pb")}, four, 0)
    three = assign({"a": AssignmentMember("a", "pa", two["a"].active), "b": AssignmentMember("b", "pb", two["b"].active),
                    "c": AssignmentMember("c", "pc")}, four, 0)
    assert sorted(len(t.active) for t in three.values()) == [1, 1, 2]
    assert three["a"].active <= two["a"].active and three["b"].active <= two["b"].active


def test_a_shutdown_request_reaches_every_member() -> None:
    h, a_tasks = ready_group()
    beat(h, "b", 0)
    asked = h.call(sc.StreamsGroupHeartbeat(APP, "a", 2, active_tasks=(("0", (0, 1)), ("1", (0, 1))),
                                            standby_tasks=(), warmup_tasks=(), shutdown_application=True))
    assert [code for code, _ in asked.statuses] == [sc.SHUTDOWN_APPLICATION]
    assert [code for code, _ in beat(h, "b", 3, owned=frozenset()).statuses or ()] == [sc.SHUTDOWN_APPLICATION]


def test_an_empty_classic_group_gives_way_to_a_streams_group_and_keeps_its_offsets() -> None:
    from kbroker.coordinator.groups import commands as c

    h, _ = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    h.call(c.OffsetCommit(APP, -1, "", (c.OffsetCommitTopic("words", (c.OffsetCommitPartition(0, 7),)),)))
    assert h.group(APP).__class__.__name__ == "ClassicGroup"
    a = beat(h, "a", 0)
    assert (a.error, a.member_epoch) == (E.NONE, 2)
    assert isinstance(h.group(APP), StreamsGroup)
    assert h.offsets(APP)[("words", 0)].offset == 7


def test_a_new_groups_first_assignment_waits_for_the_initial_rebalance_delay() -> None:
    h, _ = make(GroupConfig(), words=2, **{REPARTITION: 2, CHANGELOG: 2})  # the default delay, 3 s
    a = beat(h, "a", 0)
    assert (a.member_epoch, a.statuses) == (1, ((sc.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
                                                "initial rebalance delay."),))
    assert active(a) == frozenset() and h.group(APP).state == "Assigning"
    assert (h.group(APP).group_epoch, h.group(APP).assignment_epoch) == (2, 1)
    assert h.deadline(sc.initial_delay_key(APP)) == h.clock.now_ms() + 3_000
    b = beat(h, "b", 0)
    assert b.member_epoch == 1 and [code for code, _ in b.statuses or ()] == [sc.ASSIGNMENT_DELAYED]
    h.advance(2_999)
    assert h.group(APP).assignment_epoch == 1
    h.advance(1)
    # As Kafka's computeDelayedTargetAssignment: the timer computes every member's target, no heartbeat needed
    group = h.group(APP)
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert {m: len(group.target(m).active) for m in ("a", "b")} == {"a": 2, "b": 2}
    a2 = beat(h, "a", 1, owned=frozenset())
    assert a2.statuses == () and a2.member_epoch == 3 and len(active(a2)) == 2


def test_the_delayed_first_assignment_is_an_event_for_the_groups_history() -> None:
    """The target computed when the initial delay is over, or at the first heartbeat past the
    assignment interval, says which members moved then (streams_group_assignment_changed)."""
    from kbroker.coordinator.groups.events import StreamsAssignmentChanged
    from kbroker.coordinator.groups.history import RebalanceHistory

    h, _ = make(GroupConfig(), words=2, **{REPARTITION: 2, CHANGELOG: 2})  # initial delay 3 s, interval 1 s
    beat(h, "a", 0)
    beat(h, "b", 0)
    h.events.clear()
    h.advance(3_000)
    [first] = [e for e in h.events if isinstance(e, StreamsAssignmentChanged)]
    assert (first.previous_epoch, first.group_epoch, first.assignment_epoch, first.reason, first.trigger_member,
            first.members_moved, first.member_count) == (1, 3, 3, "initial rebalance delay over", None, ("a", "b"), 2)
    # within the assignment interval of that assignment, c joins: its epoch is an event with nobody moved...
    assert beat(h, "a", 1, owned=frozenset()).member_epoch == 3
    h.advance(500)
    beat(h, "c", 0)
    joined = [e for e in h.events if isinstance(e, StreamsAssignmentChanged)][-1]
    assert (joined.group_epoch, joined.reason, joined.members_moved) == (4, "member c joined", ())
    # ...and the heartbeat past the interval computes the target: who moved is said then
    h.advance(500)
    beat(h, "a", 3, owned=frozenset())
    computed = [e for e in h.events if isinstance(e, StreamsAssignmentChanged)][-1]
    assert (computed.previous_epoch, computed.group_epoch, computed.reason, computed.trigger_member) == (
        3, 4, "delayed assignment computed", "a")
    assert "c" in computed.members_moved and computed.member_count == 3
    assert h.group(APP).assignment_epoch == 4
    history = RebalanceHistory()
    entry = history.record_event(computed, 0)
    assert entry is not None and entry.to_json()["members_moved"] == list(computed.members_moved)
    assert (entry.old_generation, entry.new_generation) == (3, 4)


def test_an_initial_delay_over_an_emptied_group_computes_nothing() -> None:
    h, _ = make(GroupConfig(), words=2, **{REPARTITION: 2, CHANGELOG: 2})
    beat(h, "a", 0)
    beat(h, "a", -1)
    h.events.clear()
    h.advance(3_000)
    assert h.events == [] and h.group(APP).target_assignment == {}


def test_the_first_member_of_an_emptied_group_waits_for_the_initial_delay_too() -> None:
    """Kafka 4.4 schedules the initial delay when a member joins a group without members
    (group.isEmpty()): a new group, or one whose members all left."""
    h, _ = make(GroupConfig(group_streams_assignment_interval_ms=0), words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0)
    h.advance(3_000)
    assert len(active(beat(h, "a", a.member_epoch, owned=frozenset()))) == 4
    beat(h, "a", -1)
    assert h.group(APP).state == "Empty"
    b = beat(h, "b", 0)
    assert [code for code, _ in b.statuses or ()] == [sc.ASSIGNMENT_DELAYED] and active(b) == frozenset()
    assert h.deadline(sc.initial_delay_key(APP)) == h.clock.now_ms() + 3_000
    h.advance(3_000)
    assert len(active(beat(h, "b", b.member_epoch, owned=frozenset()))) == 4


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    h, _ = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a_tasks = active(h.call(sc.StreamsGroupHeartbeat(APP, "a", 0, rebalance_timeout_ms=30_000, topology=WORDCOUNT,
                                                     process_id="pa", **owned_tasks(()))))
    beat(h, "b", 0)
    told = beat(h, "a", 2, owned=a_tasks)  # a must give up two tasks
    assert h.group(APP).members["a"].state == 2  # UNREVOKED_TASKS
    assert h.deadline(sc.rebalance_key(APP, "a")) == h.clock.now_ms() + 30_000
    h.advance(29_999)
    beat(h, "a", 2, owned=a_tasks)  # still holding them: the timer keeps running
    assert "a" in h.group(APP).members
    h.advance(1)
    assert "a" not in h.group(APP).members and len(active(told)) == 2


def test_a_member_that_revokes_in_time_is_not_fenced() -> None:
    h, a_tasks = ready_group()
    beat(h, "b", 0)
    kept = active(beat(h, "a", 2, owned=a_tasks))
    beat(h, "a", 2, owned=kept)
    assert not h.armed(sc.rebalance_key(APP, "a"))


# -- the group's own configs (the GROUP config resource) -------------------------------------------


def test_a_groups_own_configs_override_the_brokers_and_a_new_standby_count_reassigns() -> None:
    overrides: dict[str, str] = {}
    topics = Topics(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    h = Harness(NO_DELAY, topics=lambda: dict(topics.image),
                group_config=lambda group, name: overrides.get(name) if group == APP else None)
    a = beat(h, "a", 0)
    assert a.heartbeat_interval_ms == 5_000 and h.deadline(sc.session_key(APP, "a")) == h.clock.now_ms() + SESSION_MS
    b = beat(h, "b", 0)
    assert h.group(APP).last_assignment_configs == {"num.standby.replicas": "0"}
    assert not h.group(APP).target("a").standby
    overrides.update({"streams.heartbeat.interval.ms": "7000", "streams.session.timeout.ms": "50000",
                      "streams.num.standby.replicas": "1"})
    epoch = h.group(APP).group_epoch
    b2 = beat(h, "b", b.member_epoch, owned=frozenset())
    assert b2.heartbeat_interval_ms == 7_000 and h.deadline(sc.session_key(APP, "b")) == h.clock.now_ms() + 50_000
    group = h.group(APP)
    # the new standby count moved the group epoch and recomputed the target: every task has a standby
    assert group.group_epoch == epoch + 1 and group.last_assignment_configs == {"num.standby.replicas": "1"}
    a_target, b_target = group.target("a"), group.target("b")
    counting = frozenset(("1", p) for p in range(2))  # the stateful tasks
    assert a_target.standby == b_target.active & counting and b_target.standby == a_target.active & counting
    assert a_target.standby | b_target.standby == counting
    metadata = [r for r in h.log if isinstance(r, sr.StreamsRecord) and r.record_type == sr.GROUP_METADATA][-1]
    assert [(c.key, c.value) for c in metadata.value.last_assignment_configs] == [("num.standby.replicas", "1")]
    # kept in the record, so a replay does not take the same configs for a change
    fresh = Harness(NO_DELAY, topics=lambda: dict(topics.image),
                    group_config=lambda group, name: overrides.get(name))
    fresh.load([decode_record(*encode_record(r)) for r in h.log])
    assert fresh.group(APP).last_assignment_configs == {"num.standby.replicas": "1"}
    again = fresh.group(APP).group_epoch
    beat(fresh, "b", h.group(APP).members["b"].member_epoch)
    assert fresh.group(APP).group_epoch == again


def test_the_initial_rebalance_delay_is_the_groups_own() -> None:
    topics = Topics(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    h = Harness(GroupConfig(), topics=lambda: dict(topics.image),
                group_config=lambda group, name: "0" if name == "streams.initial.rebalance.delay.ms" else None)
    a = beat(h, "a", 0)  # the broker's default would delay it 3 s
    assert len(active(a)) == 4 and sc.ASSIGNMENT_DELAYED not in [code for code, _ in a.statuses]


# -- static members ---------------------------------------------------------------------------------


def test_a_static_member_steps_out_keeps_its_tasks_and_gets_them_back_under_a_new_member_id() -> None:
    h, topics = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0, instance="ia")
    b = beat(h, "b", 0, instance="ib")
    a = beat(h, "a", a.member_epoch, owned=active(a))
    a = beat(h, "a", a.member_epoch, owned=active(a))
    b = beat(h, "b", b.member_epoch, owned=frozenset())
    assert h.group(APP).state == "Stable"
    a_tasks, epoch = h.group(APP).members["a"].assigned, h.group(APP).group_epoch
    left = beat(h, "a", -2, instance="ia")
    assert (left.error, left.member_epoch) == (E.NONE, -2)
    # still a member, with its tasks: nothing moves to b and the group epoch stays
    assert h.group(APP).members["a"].member_epoch == -2 and h.group(APP).members["a"].assigned == a_tasks
    assert h.group(APP).group_epoch == epoch and beat(h, "b", b.member_epoch, owned=active(b)).active_tasks is None
    # its instance id back under a new member id: the old member is replaced, its tasks are the new one's
    back = beat(h, "a-new", 0, instance="ia", process="process-a", host="a.local")
    assert back.error == E.NONE and back.member_epoch == epoch
    assert active(back) == a_tasks.active and set(h.group(APP).members) == {"a-new", "b"}
    assert h.group(APP).group_epoch == epoch and h.group(APP).target("a-new") == a_tasks
    # the old member id is fenced by it; a second joiner with the instance id is refused while it is held
    assert beat(h, "a", back.member_epoch, instance="ia").error == E.FENCED_INSTANCE_ID
    unreleased = beat(h, "c", 0, instance="ia")
    assert unreleased.error == E.UNRELEASED_INSTANCE_ID and "owned by a-new member" in (unreleased.error_message or "")
    assert beat(h, "c", 3, instance="ic").error == E.UNKNOWN_MEMBER_ID


def test_a_static_member_that_never_comes_back_is_fenced_at_its_session_timeout() -> None:
    h, topics = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    beat(h, "a", 0, instance="ia")
    beat(h, "a", -2, instance="ia")
    assert "a" in h.group(APP).members
    h.advance(SESSION_MS)
    assert "a" not in h.group(APP).members


# -- the group's history ----------------------------------------------------------------------------


def test_every_group_epoch_is_an_event_for_the_groups_history() -> None:
    from kbroker.coordinator.groups.events import StreamsAssignmentChanged
    from kbroker.coordinator.groups.history import RebalanceHistory

    h, a_tasks = ready_group()
    beat(h, "b", 0)
    beat(h, "b", -1)
    h.advance(SESSION_MS)  # a's session ends
    changes = [e for e in h.events if isinstance(e, StreamsAssignmentChanged)]
    assert [(e.previous_epoch, e.group_epoch, e.reason, e.members_in, e.members_out) for e in changes] == [
        (1, 2, "member a joined", ("a",), ()), (2, 3, "member b joined", ("b",), ()),
        (3, 4, "member b left", (), ("b",)), (4, 5, "member a's session expired", (), ("a",))]
    assert changes[1].members_moved == ("a", "b") and changes[-1].session_timeout_ms == SESSION_MS
    history = RebalanceHistory()
    entries = [history.record_event(e, 0) for e in changes]
    assert {(x.group_type, x.kind) for x in entries if x is not None} == {("streams", "rebalance")}


def test_the_codec_decodes_streams_records_in_a_process_that_never_imported_the_streams_group_type() -> None:
    """The pipeline and the tools read `__consumer_offsets` with decode_record alone."""
    import subprocess
    import sys

    h, _ = ready_group()
    encoded = [encode_record(r) for r in h.log]
    program = ("import sys, json\n"
               "from kbroker.protocol.records.codec import decode_record\n"
               "assert 'kbroker.protocol.records.streams_records' not in sys.modules\n"
               "pairs = json.load(sys.stdin)\n"
               "out = [decode_record(bytes.fromhex(k), None if v is None else bytes.fromhex(v)) for k, v in pairs]\n"
               "print(json.dumps([[type(r).__name__, r.record_type, r.group] for r in out]))\n")
    import json
    done = subprocess.run([sys.executable, "-c", program], input=json.dumps(
        [[k.hex(), None if v is None else v.hex()] for k, v in encoded]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["StreamsRecord", r.record_type, APP] for r in h.log]


def test_a_static_member_rejoining_with_new_metadata_moves_the_epoch_and_keeps_its_tasks() -> None:
    h, topics = make(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0, instance="ia")
    b = beat(h, "b", 0, instance="ib")
    for _ in range(3):
        a = beat(h, "a", a.member_epoch, owned=h.group(APP).members["a"].assigned.active)
        b = beat(h, "b", b.member_epoch, owned=h.group(APP).members["b"].assigned.active)
    a_tasks, epoch = h.group(APP).members["a"].assigned.active, h.group(APP).group_epoch
    assert h.group(APP).state == "Stable" and len(a_tasks) == 2
    beat(h, "a", -2, instance="ia")
    back = beat(h, "a-new", 0, instance="ia", process="process-a", host="a-moved.local")
    # its endpoint changed: a new group epoch and a new target, in which it keeps what it had (sticky)
    assert back.member_epoch == epoch + 1 and active(back) == a_tasks
    assert h.group(APP).target("a-new").active == a_tasks and "a" not in h.group(APP).target_assignment
