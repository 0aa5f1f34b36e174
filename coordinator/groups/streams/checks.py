"""The checks a StreamsGroupHeartbeat passes before it changes anything, with Kafka 4.4's errors and
words: the request on its own (GroupCoordinatorService's throwIfStreamsGroupHeartbeatRequestIsInvalid
and ...IsUsingUnsupportedFeatures: a source topic regular expression is refused, Kafka 4.4 resolves
none), the member's epoch with the tasks it says it owns (GroupMetadataManager's
throwIfStreamsGroupMemberEpochIsInvalid: a member one epoch behind is taken back only if it owns no
active, standby or warm-up task it was not given), the owned tasks against the validated topology
(throwIfRequestContainsInvalidTasks) and a static member's instance id (throwIfInstanceIdIsFenced).
"""

from __future__ import annotations

from collections.abc import Mapping

from ....protocol.errors import ErrorCode
from . import streams_commands as sc
from .streams_group import StreamsGroupMember
from .topology import TaskSet, Tasks, tasks_of
from ..group_types import ApiError

E = ErrorCode


def validate(cmd: sc.StreamsGroupHeartbeat) -> None:
    """The request on its own, in Kafka 4.4's order (unsupported features first)."""
    if cmd.topology is not None and any(s.source_topic_regex for s in cmd.topology.subtopologies):
        raise ApiError(E.INVALID_REQUEST, "Regular expressions for source topics are not supported yet.")
    if cmd.member_id == "":
        raise ApiError(E.INVALID_REQUEST, "MemberId can't be empty.")
    if cmd.group_id == "":
        raise ApiError(E.INVALID_REQUEST, "GroupId can't be empty.")
    if cmd.instance_id == "":
        raise ApiError(E.INVALID_REQUEST, "InstanceId can't be empty.")
    if cmd.rack_id == "":
        raise ApiError(E.INVALID_REQUEST, "RackId can't be empty.")
    if cmd.member_epoch == 0:
        if cmd.rebalance_timeout_ms == -1:
            raise ApiError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        # Kafka's throwIfNotEmptyCollection: null is not empty either.
        for tasks, name in ((cmd.active_tasks, "ActiveTasks"), (cmd.standby_tasks, "StandbyTasks"),
                            (cmd.warmup_tasks, "WarmupTasks")):
            if tasks is None or tasks:
                raise ApiError(E.INVALID_REQUEST, f"{name} must be empty when (re-)joining.")
        if cmd.topology is None:
            raise ApiError(E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
        for subtopology in cmd.topology.subtopologies:
            for topic in subtopology.state_changelog_topics:
                if topic.partitions != 0:
                    raise ApiError(E.STREAMS_INVALID_TOPOLOGY, f"Changelog topic {topic.name} must have an undefined "
                                   f"partition count, but it is set to {topic.partitions}.")
    elif cmd.member_epoch == sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if cmd.instance_id is None:
            raise ApiError(E.INVALID_REQUEST, "InstanceId can't be null.")
    elif cmd.member_epoch < sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise ApiError(E.INVALID_REQUEST, f"MemberEpoch is {cmd.member_epoch}, but must be greater than or equal "
                       "to -2.")
    owned = (cmd.active_tasks, cmd.standby_tasks, cmd.warmup_tasks)
    if any(t is not None for t in owned) and any(t is None for t in owned):
        raise ApiError(E.INVALID_REQUEST, "If one task-type is non-null, all must be non-null.")
    if cmd.member_epoch != 0 and cmd.topology is not None:
        raise ApiError(E.INVALID_REQUEST, "Topology can only be provided when (re-)joining.")


def _contained(owned: TaskSet | None, assigned: Tasks) -> bool:
    """Kafka's areOwnedTasksContainedInAssignedTasks: unknown (null) is not contained."""
    return owned is not None and tasks_of(owned) <= assigned


def check_epoch(member: StreamsGroupMember, cmd: sc.StreamsGroupHeartbeat) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid. A member that comes back with its previous epoch
    (the answer that moved it on was lost) keeps its place only while it owns nothing it was not given:
    its active, standby and warm-up tasks each within what it has now."""
    received = cmd.member_epoch
    if received == 0:
        return
    if received > member.member_epoch:
        raise ApiError(E.FENCED_MEMBER_EPOCH, f"The streams group member has a greater member epoch ({received}) "
                       f"than the one known by the group coordinator ({member.member_epoch}). "
                       "The member must abandon all its partitions and rejoin.")
    if received < member.member_epoch and (
            received != member.previous_member_epoch
            or not _contained(cmd.active_tasks, member.assigned.active)
            or not _contained(cmd.standby_tasks, member.assigned.standby)
            or not _contained(cmd.warmup_tasks, member.assigned.warmup)):
        raise ApiError(E.FENCED_MEMBER_EPOCH, f"The streams group member has a smaller member epoch ({received}) "
                       f"than the one known by the group coordinator ({member.member_epoch}). "
                       "The member must abandon all its partitions and rejoin.")


def check_tasks(task_counts: Mapping[str, int], cmd: sc.StreamsGroupHeartbeat) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks, once the topology is validated: every task the member
    says it owns is one of the topology's."""
    for owned in (cmd.active_tasks, cmd.standby_tasks, cmd.warmup_tasks):
        for subtopology_id, partitions in owned or ():
            if subtopology_id not in task_counts:
                raise ApiError(E.INVALID_REQUEST, f"Subtopology {subtopology_id} does not exist in the topology.")
            count = task_counts[subtopology_id]
            for p in partitions:
                if not 0 <= p < count:
                    raise ApiError(E.INVALID_REQUEST, f"Task {p} for subtopology {subtopology_id} is invalid. "
                                   f"Number of tasks for this subtopology: {count}")


def check_not_fenced(static: StreamsGroupMember, member_id: str, instance_id: str) -> None:
    """Kafka's throwIfInstanceIdIsFenced: another member now holds the instance id."""
    if static.member_id != member_id:
        raise ApiError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was "
                       f"fenced by member {static.member_id}.")
