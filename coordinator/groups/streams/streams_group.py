"""A streams group's state, as its records build it (Kafka's StreamsGroup and StreamsGroupMember):
the group epoch, the topology, members with their metadata and current assignment, the target
assignment; replay() applies one record (write path and load alike)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ....protocol.errors import ErrorCode
from ....protocol.messages import streams_group_current_member_assignment_value as cmav
from ....protocol.records import streams_records as sr
from ..results import ListedGroup
from ..store import TypedGroups
from .streams_commands import STREAMS_GROUP_TYPE, Topology
from .topology import Subtopology, TaskSet, Tasks, TopicInfo, task_set, tasks_of

# Kafka's MemberState (StreamsGroupCurrentMemberAssignmentValue.State).
STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS, UNKNOWN = 1, 2, 3, 127


@dataclass(frozen=True, slots=True)
class Assignment:
    active: Tasks = frozenset()
    standby: Tasks = frozenset()
    warmup: Tasks = frozenset()

    def all(self) -> Tasks:
        return self.active | self.standby | self.warmup

    def wire(self) -> tuple[TaskSet, TaskSet, TaskSet]:
        return task_set(self.active), task_set(self.standby), task_set(self.warmup)


EMPTY = Assignment()


@dataclass(frozen=True, slots=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: Assignment = EMPTY
    pending_revocation: Assignment = EMPTY

    def with_(self, **changes: Any) -> StreamsGroupMember:
        return replace(self, **changes)

    def metadata_equals(self, other: StreamsGroupMember) -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags) == (
            other.instance_id, other.rack_id, other.client_id, other.client_host, other.rebalance_timeout_ms,
            other.topology_epoch, other.process_id, other.user_endpoint, other.client_tags)


@dataclass(eq=False)
class StreamsGroup:
    group_type: ClassVar[str] = STREAMS_GROUP_TYPE
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    topology: Topology | None = None
    assignment_epoch: int = 0
    # When the target assignment was last computed (wall clock; 0: a new or emptied group): the
    # assignment interval counts from it.
    assignment_timestamp: int = 0
    members: dict[str, StreamsGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    deleted: bool = False
    # Kafka's endpointInformationEpoch: in memory only, moved on whenever a member's tasks change.
    endpoint_epoch: int = 0
    # The member that asked the application to shut down (SHUTDOWN_APPLICATION), in memory as in Kafka.
    shutdown_requested_by: str | None = None
    # The assignment configs the target assignment was last computed with (num.standby.replicas, ...;
    # StreamsGroupMetadataValue.LastAssignmentConfigs): a change of the group's configs recomputes it.
    last_assignment_configs: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's StreamsGroupState, as DescribeGroups and ListGroups name it."""
        if self.deleted:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.topology is None or self.validated_topology_epoch != self.topology.epoch:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def target(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY)

    def static_member(self, instance_id: str) -> StreamsGroupMember | None:
        """The member holding `instance_id` (a static member, Kafka's staticMember)."""
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def pending_elsewhere(self, member_id: str) -> Tasks:
        """Active tasks other members still have to give back."""
        return frozenset(t for m in self.members.values() if m.member_id != member_id
                         for t in m.pending_revocation.active)

    # -- the Group protocol (group_types.Group) ------------------------------------------------

    def validate_offset_commit(self, cmd: Any) -> ErrorCode | None:
        # Kafka Streams commits with the member id and epoch of its heartbeat (a streams member).
        if cmd.transactional or (cmd.member_id == "" and cmd.generation_id < 0):
            return None
        member = self.members.get(cmd.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if cmd.generation_id != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, cmd: Any) -> ErrorCode | None:
        member_id = getattr(cmd, "member_id", None)
        epoch = getattr(cmd, "member_epoch", -1)
        if member_id is None or epoch is None or epoch < 0:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_delete(self) -> ErrorCode | None:
        return None if not self.members else ErrorCode.NON_EMPTY_GROUP

    def validate_delete_group(self) -> ErrorCode | None:
        return None if not self.members else ErrorCode.NON_EMPTY_GROUP

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.topology is None or not self.members:
            return False
        return any(topic in s.source_topics or any(t.name == topic for t in s.repartition_source_topics)
                   for s in self.topology.subtopologies)

    def offset_expiration(self) -> Callable[[Any], int] | None:
        if self.members:
            return None
        return lambda offset: offset.commit_timestamp

    def is_empty(self) -> bool:
        return not self.members

    def tombstones(self) -> list[Any]:
        gid = self.group_id
        out: list[Any] = []
        for member_id in self.members:
            out += [sr.StreamsRecord(sr.CURRENT_MEMBER_ASSIGNMENT, gid, member_id, None),
                    sr.StreamsRecord(sr.TARGET_ASSIGNMENT_MEMBER, gid, member_id, None),
                    sr.StreamsRecord(sr.MEMBER_METADATA, gid, member_id, None)]
        out += [sr.StreamsRecord(sr.TARGET_ASSIGNMENT_METADATA, gid, None, None),
                sr.StreamsRecord(sr.TOPOLOGY, gid, None, None),
                sr.StreamsRecord(sr.GROUP_METADATA, gid, None, None)]
        return out

    def listed(self) -> ListedGroup | None:
        if self.deleted:
            return None
        return ListedGroup(self.group_id, "streams", self.state, STREAMS_GROUP_TYPE)


# -- records <-> state -------------------------------------------------------------------------------

def wire_tasks(tasks: Tasks, cls: type) -> list[Any]:
    return [cls(subtopology_id=s, partitions=list(ps)) for s, ps in task_set(tasks)]


def read_tasks(items: list[Any] | None) -> Tasks:
    return tasks_of(tuple((i.subtopology_id, tuple(i.partitions)) for i in items or ()))


def topology_value(t: Topology) -> Any:
    from ....protocol.messages import streams_group_topology_value as tv

    def infos(items: tuple[TopicInfo, ...]) -> list[Any]:
        return [tv.TopicInfo(name=i.name, partitions=i.partitions, replication_factor=i.replication_factor,
                             topic_configs=[tv.TopicConfig(key=k, value=v) for k, v in i.configs]) for i in items]

    return tv.StreamsGroupTopologyValue(epoch=t.epoch, subtopologies=[
        tv.Subtopology(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                       source_topic_regex=list(s.source_topic_regex),
                       state_changelog_topics=infos(s.state_changelog_topics),
                       repartition_sink_topics=list(s.repartition_sink_topics),
                       repartition_source_topics=infos(s.repartition_source_topics),
                       copartition_groups=[tv.CopartitionGroup(source_topics=list(g[0]), source_topic_regex=list(g[1]),
                                                               repartition_source_topics=list(g[2]))
                                           for g in s.copartition_groups])
        for s in t.subtopologies])


def topology_of(v: Any) -> Topology:
    """A Topology from the generated topology message of a request or a record (same field names)."""
    def infos(items: list[Any]) -> tuple[TopicInfo, ...]:
        return tuple(TopicInfo(i.name, i.partitions, i.replication_factor,
                               tuple((c.key, c.value) for c in i.topic_configs)) for i in items or ())

    return Topology(v.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex or ()),
                    infos(s.state_changelog_topics), tuple(s.repartition_sink_topics),
                    infos(s.repartition_source_topics),
                    tuple((tuple(g.source_topics), tuple(g.source_topic_regex or ()), tuple(g.repartition_source_topics))
                          for g in s.copartition_groups or ()))
        for s in v.subtopologies or ()))


def current_assignment_value(m: StreamsGroupMember) -> Any:
    t = cmav.TaskIds
    return cmav.StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
        active_tasks=wire_tasks(m.assigned.active, t), standby_tasks=wire_tasks(m.assigned.standby, t),
        warmup_tasks=wire_tasks(m.assigned.warmup, t),
        active_tasks_pending_revocation=wire_tasks(m.pending_revocation.active, t),
        standby_tasks_pending_revocation=wire_tasks(m.pending_revocation.standby, t),
        warmup_tasks_pending_revocation=wire_tasks(m.pending_revocation.warmup, t))


def replay(groups: TypedGroups[StreamsGroup], record: sr.StreamsRecord,
           create: Callable[[str], StreamsGroup]) -> None:
    group = groups.get(record.group)
    v = record.value
    if group is None:
        if v is None:
            return
        group = create(record.group)
    rt, member_id = record.record_type, record.member_id or ""
    if rt == sr.GROUP_METADATA:
        if v is None:  # the group's last record: it goes, its offsets stay with its id
            group.deleted = True
            if groups.get(record.group) is group:
                del groups[record.group]
            return
        group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
        group.validated_topology_epoch = v.validated_topology_epoch
        group.last_assignment_configs = {c.key: c.value for c in v.last_assignment_configs or ()}
    elif rt == sr.TOPOLOGY:
        group.topology = None if v is None else topology_of(v)
    elif rt == sr.TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = 0 if v is None else v.assignment_epoch
        group.assignment_timestamp = 0 if v is None else v.assignment_timestamp
    elif rt == sr.TARGET_ASSIGNMENT_MEMBER:
        if v is None:
            group.target_assignment.pop(member_id, None)
        else:
            group.target_assignment[member_id] = Assignment(
                read_tasks(v.active_tasks), read_tasks(v.standby_tasks), read_tasks(v.warmup_tasks))
    elif rt == sr.MEMBER_METADATA:
        if v is None:
            group.members.pop(member_id, None)
            return
        known = group.members.get(member_id) or StreamsGroupMember(member_id)
        group.members[member_id] = known.with_(
            instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
            rebalance_timeout_ms=v.rebalance_timeout_ms, topology_epoch=v.topology_epoch, process_id=v.process_id,
            user_endpoint=None if v.user_endpoint is None else (v.user_endpoint.host, v.user_endpoint.port),
            client_tags=tuple((kv.key, kv.value) for kv in v.client_tags or ()))
    elif rt == sr.CURRENT_MEMBER_ASSIGNMENT:
        old = group.members.get(member_id)
        if v is None:
            if old is not None and old.assigned.all():
                group.endpoint_epoch += 1
            if old is not None:
                group.members[member_id] = old.with_(member_epoch=0, previous_member_epoch=-1, state=STABLE,
                                                     assigned=EMPTY, pending_revocation=EMPTY)
            return
        new = Assignment(read_tasks(v.active_tasks), read_tasks(v.standby_tasks), read_tasks(v.warmup_tasks))
        if new != (old.assigned if old is not None else EMPTY):
            group.endpoint_epoch += 1
        group.members[member_id] = (old or StreamsGroupMember(member_id)).with_(
            member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch, state=v.state,
            assigned=new, pending_revocation=Assignment(read_tasks(v.active_tasks_pending_revocation),
                                          read_tasks(v.standby_tasks_pending_revocation),
                                          read_tasks(v.warmup_tasks_pending_revocation)))
