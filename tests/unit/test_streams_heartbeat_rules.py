"""A StreamsGroupHeartbeat's rules as Kafka 4.4 applies them, driven by hand with a manual clock: the
request checks (GroupCoordinatorService), the member epoch taken back only with the tasks the member
was given (warm-up tasks included), owned tasks checked against the topology, warm-up tasks (none:
Kafka 4.4's AssignmentRefiner hands out the assignor's target unchanged) and the answer's
AcceptableRecoveryLag / TaskOffsetIntervalMs from the group's configs, the assignment interval
(`streams.assignment.interval.ms`), and the group configs Kafka 4.4 adds for them."""

from __future__ import annotations

import dataclasses

import pytest

from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.group_configs import GroupConfigError, validate
from kbroker.coordinator.groups.streams import streams_commands as sc
from kbroker.coordinator.groups.streams.topology import Subtopology, TopicInfo
from kbroker.protocol.errors import ErrorCode
from kbroker.tests.coordinator_harness import Harness
from kbroker.tests.unit.test_streams_groups import (
    APP, CHANGELOG, NO_DELAY, REPARTITION, WORDCOUNT, Topics, active, beat, make, owned_tasks, ready_group,
)

E = ErrorCode
TWO_TASKS = "Number of tasks for this subtopology: 2"
SMALLER = ("The streams group member has a smaller member epoch (2) than the one known by the group coordinator "
           "(3). The member must abandon all its partitions and rejoin.")


def join(**fields) -> sc.StreamsGroupHeartbeat:
    base = dict(group_id=APP, member_id="x", member_epoch=0, rebalance_timeout_ms=1000, topology=WORDCOUNT,
                process_id="px", active_tasks=(), standby_tasks=(), warmup_tasks=())
    return sc.StreamsGroupHeartbeat(**(base | fields))


@pytest.mark.parametrize("fields, code, message", [
    ({"active_tasks": None}, E.INVALID_REQUEST, "ActiveTasks must be empty when (re-)joining."),
    ({"standby_tasks": (("0", (0,)),)}, E.INVALID_REQUEST, "StandbyTasks must be empty when (re-)joining."),
    ({"warmup_tasks": None}, E.INVALID_REQUEST, "WarmupTasks must be empty when (re-)joining."),
    ({"topology": None}, E.INVALID_REQUEST, "Topology must be non-null when (re-)joining."),
    ({"topology": sc.Topology(1, (Subtopology("0", source_topics=("words",), state_changelog_topics=(
        TopicInfo("x-changelog", partitions=3),)),))},
     E.STREAMS_INVALID_TOPOLOGY, "Changelog topic x-changelog must have an undefined partition count, but it is set "
                                 "to 3."),
    ({"topology": sc.Topology(1, (Subtopology("0", source_topic_regex=("wor.*",)),))},
     E.INVALID_REQUEST, "Regular expressions for source topics are not supported yet."),
    ({"member_epoch": 3, "topology": None, "rebalance_timeout_ms": -1, "standby_tasks": None},
     E.INVALID_REQUEST, "If one task-type is non-null, all must be non-null."),
    ({"member_epoch": 3, "rebalance_timeout_ms": -1}, E.INVALID_REQUEST,
     "Topology can only be provided when (re-)joining."),
    ({"group_id": ""}, E.INVALID_REQUEST, "GroupId can't be empty."),
])
def test_requests_kafka_refuses_are_refused_in_its_words(fields, code, message) -> None:
    """Kafka 4.4 (GroupCoordinatorService): a join must say it owns nothing (null is not empty), a
    changelog has no partition count of its own, a source topic regular expression is not supported,
    the task lists come all or none, a topology only with a join."""
    h, _ = ready_group()
    answer = h.call(join(**fields))
    assert (answer.error, answer.error_message) == (code, message)
    assert "x" not in h.group(APP).members


def moved_on() -> tuple:
    """a at epoch 3 (previous 2) after giving up half its tasks to b."""
    h, a_tasks = ready_group()
    beat(h, "b", 0)
    kept = active(beat(h, "a", 2, owned=a_tasks))
    a3 = beat(h, "a", 2, owned=kept)  # revoked: a reaches the group's epoch
    assert (a3.member_epoch, h.group(APP).members["a"].previous_member_epoch) == (3, 2)
    return h, kept


def test_a_member_one_epoch_behind_is_taken_back_only_with_tasks_it_was_given() -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid: the previous epoch is accepted (the answer that
    moved the member on may have been lost) while its active, standby and warm-up tasks are each within
    what it has; a warm-up task it was never given, or tasks it does not say (null), fence it."""
    h, kept = moved_on()
    lost_answer = h.call(sc.StreamsGroupHeartbeat(APP, "a", 2, **owned_tasks(kept)))
    assert (lost_answer.error, lost_answer.member_epoch) == (E.NONE, 3)
    warmup = h.call(sc.StreamsGroupHeartbeat(APP, "a", 2, **owned_tasks(kept, warmup=(("1", (0,)),))))
    assert (warmup.error, warmup.error_message) == (E.FENCED_MEMBER_EPOCH, SMALLER)
    unsaid = h.call(sc.StreamsGroupHeartbeat(APP, "a", 2))
    assert (unsaid.error, unsaid.error_message) == (E.FENCED_MEMBER_EPOCH, SMALLER)
    greater = beat(h, "a", 4, owned=kept)
    assert greater.error_message == ("The streams group member has a greater member epoch (4) than the one known "
                                     "by the group coordinator (3). The member must abandon all its partitions and "
                                     "rejoin.")


@pytest.mark.parametrize("owned, message", [
    ({"active_tasks": (("9", (0,)),)}, "Subtopology 9 does not exist in the topology."),
    ({"warmup_tasks": (("1", (2,)),)}, f"Task 2 for subtopology 1 is invalid. {TWO_TASKS}"),
    ({"standby_tasks": (("0", (-1,)),)}, f"Task -1 for subtopology 0 is invalid. {TWO_TASKS}"),
])
def test_owned_tasks_must_be_the_topologys(owned, message) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks, once the topology is validated."""
    h, a_tasks = ready_group()
    fields = owned_tasks(a_tasks) | owned
    answer = h.call(sc.StreamsGroupHeartbeat(APP, "a", 2, **fields))
    assert (answer.error, answer.error_message) == (E.INVALID_REQUEST, message)


def test_no_warmup_task_is_assigned_and_the_answer_carries_the_groups_recovery_settings() -> None:
    """Kafka 4.4 assigns no warm-up task, whatever group.streams.num.warmup.replicas says: its
    StickyTaskAssignor's MemberAssignment has active and standby tasks only, and its AssignmentRefiner
    returns the target as it is (`aload_1; areturn`). AcceptableRecoveryLag and TaskOffsetIntervalMs
    are the group's streams.acceptable.recovery.lag and streams.task.offset.interval.ms, else the broker's."""
    overrides = {"streams.acceptable.recovery.lag": "77", "streams.task.offset.interval.ms": "20000"}
    h, _ = make(dataclasses.replace(NO_DELAY, group_streams_num_standby_replicas=1),
                words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0)
    assert (a.acceptable_recovery_lag, a.task_offset_interval_ms) == (10_000, 60_000)  # Kafka's defaults
    b = beat(h, "b", 0, process="pb")
    assert b.warmup_tasks == () and all(not t.warmup for t in h.group(APP).target_assignment.values())
    h2, _ = make(dataclasses.replace(NO_DELAY, group_streams_acceptable_recovery_lag=5,
                                     group_streams_task_offset_interval_ms=30_000), words=2)
    assert (beat(h2, "a", 0).acceptable_recovery_lag, beat(h2, "a", 2, owned=frozenset()).task_offset_interval_ms) == (
        5, 30_000)
    topics = Topics(words=2)
    h3 = Harness(NO_DELAY, topics=lambda: dict(topics.image), group_config=lambda g, name: overrides.get(name))
    c = beat(h3, "c", 0)
    assert (c.acceptable_recovery_lag, c.task_offset_interval_ms) == (77, 20_000)


def test_the_assignment_interval_batches_a_groups_changes() -> None:
    """Kafka's canComputeNextTargetAssignment with group.streams.assignment.interval.ms (1 s by default): a
    change within the interval of the last assignment answers ASSIGNMENT_DELAYED and keeps the current
    target; the first heartbeat after it computes the next one. A new group, and one its last member
    left (its timestamp back to 0), is assigned at once."""
    h, _ = make(GroupConfig(group_streams_initial_rebalance_delay_ms=0), words=2, **{REPARTITION: 2, CHANGELOG: 2})
    a = beat(h, "a", 0)
    assert a.statuses == () and len(active(a)) == 4  # a new group: at once
    b = beat(h, "b", 0)
    assert b.statuses == ((sc.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."),)
    assert (b.member_epoch, h.group(APP).group_epoch, h.group(APP).assignment_epoch) == (2, 3, 2)
    assert active(b) == frozenset() and h.group(APP).state == "Assigning"
    h.advance(999)
    assert [code for code, _ in beat(h, "b", 2, owned=frozenset()).statuses] == [sc.ASSIGNMENT_DELAYED]
    h.advance(1)
    b2 = beat(h, "b", 2, owned=frozenset())
    assert b2.statuses == () and b2.member_epoch == 3 and h.group(APP).assignment_epoch == 3
    # every member gone: the next one is not held back by the interval
    beat(h, "a", -1)
    beat(h, "b", -1)
    assert h.group(APP).state == "Empty"
    c = beat(h, "c", 0)
    assert c.statuses == () and len(active(c)) == 4


def test_a_groups_assignment_interval_override_of_zero_assigns_at_once() -> None:
    topics = Topics(words=2, **{REPARTITION: 2, CHANGELOG: 2})
    h = Harness(GroupConfig(group_streams_initial_rebalance_delay_ms=0), topics=lambda: dict(topics.image),
                group_config=lambda g, name: "0" if name == "streams.assignment.interval.ms" else None)
    beat(h, "a", 0)
    b = beat(h, "b", 0)
    assert b.statuses == () and b.member_epoch == 3


@pytest.mark.parametrize("name, value, message", [
    ("streams.assignor.name", "nope",
     "streams.assignor.name 'nope' is not a registered task assignor. Registered assignors are: [sticky]."),
    ("streams.task.offset.interval.ms", "14999",
     "streams.task.offset.interval.ms must be greater than or equal to 15000"),
    ("streams.task.offset.interval.ms", "0",
     "Invalid value 0 for configuration streams.task.offset.interval.ms: Value must be at least 1"),
    ("streams.num.warmup.replicas", "21", "streams.num.warmup.replicas must be less than or equal to 20"),
    ("streams.num.warmup.replicas", "-1",
     "Invalid value -1 for configuration streams.num.warmup.replicas: Value must be at least 0"),
    ("streams.acceptable.recovery.lag", "-1",
     "Invalid value -1 for configuration streams.acceptable.recovery.lag: Value must be at least 0"),
    ("streams.acceptable.recovery.lag", "x",
     "Invalid value x for configuration streams.acceptable.recovery.lag: Not a number of type LONG"),
    ("streams.assignor.offload.enable", "maybe",
     "Invalid value maybe for configuration streams.assignor.offload.enable: Expected value to be either true or "
     "false"),
    ("streams.assignment.interval.ms", "15001",
     "streams.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
    ("streams.assignment.interval.ms", "-1",
     "Invalid value -1 for configuration streams.assignment.interval.ms: Value must be at least 0"),
])
def test_the_streams_group_configs_are_checked_as_kafka_checks_them(name, value, message) -> None:
    """Kafka 4.4's answers to IncrementalAlterConfigs on a GROUP resource (asked of its broker)."""
    with pytest.raises(GroupConfigError) as refused:
        validate(name, value)
    assert str(refused.value) == message


def test_the_internal_streams_group_configs_are_accepted() -> None:
    for name, value in [("streams.assignor.name", "sticky"), ("streams.task.offset.interval.ms", "20000"),
                        ("streams.num.warmup.replicas", "3"), ("streams.acceptable.recovery.lag", "77"),
                        ("streams.assignor.offload.enable", "false"), ("streams.assignment.interval.ms", "15000")]:
        validate(name, value)
