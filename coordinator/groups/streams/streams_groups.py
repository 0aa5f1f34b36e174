"""The streams group type as the shard registers it (group_types.GroupType): StreamsGroupHeartbeat
(join with a topology, heartbeat, leave), the session timeout, StreamsGroupDescribe (Kafka's
GroupMetadataManager for streams groups: streamsGroupHeartbeat, streamsGroupLeave, streamsGroupDescribe).

Handlers never change a group: they compute the records describing the change and the answer that
follows from it; the runtime appends the records, replays them (streams_group.replay), then answers.
The heartbeat, in Kafka's order: the topology (recorded by the first member, or replaced by a
member bringing a newer epoch), the member's metadata, the topology validated against the topics
that exist (missing source topics, internal topics to create, co-partitioning), the group epoch
bumped when any of these changed, the target assignment (sticky task assignor) computed when the
group epoch moved past the assignment epoch, then the member's reconciliation: tasks it must give
up are revoked first (its epoch stays until it reports them gone); tasks another member still holds
are held back until released.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ....protocol.errors import ErrorCode
from ....protocol.messages import streams_group_member_metadata_value as mmv
from ....protocol.messages import streams_group_metadata_value as gmv
from ....protocol.messages import streams_group_target_assignment_member_value as tamv
from ....protocol.messages import streams_group_target_assignment_metadata_value as tav
from ....protocol.records import streams_records as sr
from ....protocol.records.classic_records import GroupMetadataTombstone
from ...runtime.outcome import Outcome
from .. import commands as c
from ..classic.group import ClassicGroup, GroupState
from ..events import StreamsAssignmentChanged
from ..group_types import NoFollowUps, TypeContext, answer_heartbeat
from . import streams_commands as sc
from .assignor import ASSIGNOR_NAME, AssignmentMember, assign
from .checks import ApiError, check_epoch, check_not_fenced, check_tasks, validate
from .migration import JoinAfterStreamsGroupDeleted, after_deleted, classic_join
from .settings import NUM_STANDBY_REPLICAS, StreamsSettings
from .streams_group import (
    EMPTY, STABLE, UNRELEASED_TASKS, UNREVOKED_TASKS, Assignment, StreamsGroup, StreamsGroupMember,
    current_assignment_value, replay, topology_value, wire_tasks,
)
from .topology import ConfiguredTopology, configure, tasks_of

E = ErrorCode


def topics_hash(names: set[str], image: Mapping[str, Any]) -> int:
    """A stable 64-bit digest of the topology's topics as they exist (id, name, partitions): it moves
    when one appears, goes, grows, or is deleted and created again under its name (Kafka's metadata
    hash, KIP-1101, hashes the topic id too)."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(n for n in names if n in image):
        t = image[name]
        h.update(f"{t.topic_id}|{name}|{t.num_partitions};".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def topology_topics(group_topology: sc.Topology | None) -> set[str]:
    if group_topology is None:
        return set()
    out: set[str] = set()
    for s in group_topology.subtopologies:
        out.update(s.source_topics)
        out.update(t.name for t in s.repartition_source_topics)
        out.update(t.name for t in s.state_changelog_topics)
    return out


def reconcile(member: StreamsGroupMember, target: Assignment, target_epoch: int,
              held_elsewhere: frozenset[tuple[str, int]], owned_active: frozenset[tuple[str, int]] | None
              ) -> StreamsGroupMember:
    """Kafka's streams CurrentAssignmentBuilder: revocation before reassignment. `owned_active` is
    what the member reports it still owns (None: not reported with this heartbeat)."""
    if member.state == UNREVOKED_TASKS:
        still = member.pending_revocation.active
        if owned_active is None or owned_active & still:
            return member  # it has not given them up yet
        member = member.with_(pending_revocation=EMPTY, state=STABLE)
    if member.member_epoch == target_epoch and member.state == STABLE and member.assigned == target:
        return member
    kept = Assignment(member.assigned.active & target.active, member.assigned.standby & target.standby,
                      member.assigned.warmup & target.warmup)
    revoke = Assignment(member.assigned.active - target.active, member.assigned.standby - target.standby,
                        member.assigned.warmup - target.warmup)
    if revoke.all():
        return member.with_(state=UNREVOKED_TASKS, assigned=kept, pending_revocation=revoke)
    new_active = target.active - kept.active
    assignable = new_active - held_elsewhere
    assigned = Assignment(kept.active | assignable, target.standby, target.warmup)
    state = UNRELEASED_TASKS if assignable != new_active else STABLE
    return member.with_(member_epoch=target_epoch, previous_member_epoch=member.member_epoch, state=state,
                        assigned=assigned, pending_revocation=EMPTY)


class StreamsGroups(NoFollowUps):
    name = sc.STREAMS_GROUP_TYPE
    commands: tuple[type, ...] = sc.STREAMS_REQUESTS + sc.STREAMS_EXPIRIES
    also_handles: tuple[type, ...] = (c.JoinGroup,)  # a classic member taking over an empty streams group
    records: tuple[type, ...] = sr.STREAMS_RECORD_CLASSES
    follow_ups: tuple[type, ...] = (JoinAfterStreamsGroupDeleted,)

    def __init__(self, ctx: TypeContext) -> None:
        self.store = ctx.groups
        self.groups = ctx.groups.of_type(StreamsGroup)
        self.config = ctx.config
        self.topics = ctx.topics
        self.settings = StreamsSettings(ctx.config, ctx.group_config)
        self._dispatch = ctx.handle  # the shard's: a JoinGroup once the empty streams group is gone
        # Groups whose first assignment waits for group.streams.initial.rebalance.delay.ms (in memory,
        # as Kafka's timer is).
        self.delayed: set[str] = set()

    def _partitions(self) -> dict[str, int]:
        return {name: t.num_partitions for name, t in self.topics().items()}

    # -- commands ------------------------------------------------------------------------------

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        out = Outcome()
        match cmd:
            case sc.StreamsGroupHeartbeat():
                def step(out: Outcome, records: list[Any]) -> Any:
                    validate(cmd)
                    if cmd.member_epoch in (sc.LEAVE_GROUP_MEMBER_EPOCH, sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                        return self._leave(out, records, group, cmd)
                    return self._heartbeat(out, records, group, cmd, now_ms)
                out = answer_heartbeat(cmd.reply_to, step, sc.StreamsGroupHeartbeatResult)
            case sc.StreamsGroupDescribe():
                out.reply(cmd.reply_to, self._describe(group, cmd.group_id))
            case c.JoinGroup():  # the shard sends it here only when its group is a streams group
                self.delayed.discard(group.group_id)
                classic_join(out, group, cmd)
            case sc.StreamsInitialDelayExpired():
                self.delayed.discard(cmd.group_id)
                if group.__class__ is StreamsGroup:
                    self._delayed_target(out, group, now_ms)
            case sc.StreamsRevocationExpired():
                # Kafka's rebalance timeout: a member that has not given up its tasks in time is fenced.
                member = group.members.get(cmd.member_id) if group.__class__ is StreamsGroup else None
                if member is not None and member.state == UNREVOKED_TASKS and member.member_epoch == cmd.member_epoch:
                    records: list[Any] = []
                    self._fence(out, records, group, member,
                                f"member {member.member_id} did not revoke its tasks within its rebalance timeout")
                    out.write(records)
            case sc.StreamsSessionExpired():
                if group.__class__ is StreamsGroup and cmd.member_id in group.members:
                    records = []
                    self._fence(out, records, group, group.members[cmd.member_id],
                                f"member {cmd.member_id}'s session expired",
                                self.settings.session_timeout_ms(cmd.group_id))
                    out.write(records)
        return out

    def _group(self, group: Any, group_id: str, create: bool, records: list[Any] | None = None) -> StreamsGroup:
        """Kafka's getOrCreateStreamsGroup: a group of another type is not taken over, except an empty
        classic group (offline migration, maybeDeleteEmptyClassicGroup): it gives way, its offsets stay."""
        if group is None:
            if not create:
                raise ApiError(E.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            return StreamsGroup(group_id, group_epoch=1, assignment_epoch=1)  # Kafka 4.3+: a new group's epochs start at 1
        if (create and records is not None and group.__class__ is ClassicGroup
                and group.is_state(GroupState.EMPTY)):
            records.append(GroupMetadataTombstone(group_id))
            return StreamsGroup(group_id, group_epoch=1, assignment_epoch=1)
        if group.__class__ is not StreamsGroup:
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        return group

    def _heartbeat(self, out: Outcome, records: list[Any], existing: Any, cmd: sc.StreamsGroupHeartbeat,
                   now_ms: int) -> sc.StreamsGroupHeartbeatResult:
        joining = cmd.member_epoch == 0
        group = self._group(existing, cmd.group_id, joining, records)
        gid, member_id = group.group_id, cmd.member_id
        # A static member rejoining (its instance id left with epoch -2) replaces its old member: the
        # new member id takes over its metadata, its target and its tasks (Kafka's replaceStreamsMember).
        replaced: StreamsGroupMember | None = None
        static = group.static_member(cmd.instance_id) if cmd.instance_id is not None else None
        if cmd.instance_id is not None and not joining:
            if static is None:
                raise ApiError(E.UNKNOWN_MEMBER_ID, f"Instance id {cmd.instance_id} is unknown.")
            check_not_fenced(static, member_id, cmd.instance_id)
        if static is not None and joining:
            if static.member_epoch != sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise ApiError(E.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                               f"{cmd.instance_id} cannot join the group because the instance id is owned by "
                               f"{static.member_id} member.")
            replaced = static
            member = static.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0, state=STABLE,
                                   pending_revocation=EMPTY)
            if static.member_id != member_id:
                records += [sr.StreamsRecord(sr.CURRENT_MEMBER_ASSIGNMENT, gid, static.member_id, None),
                            sr.StreamsRecord(sr.TARGET_ASSIGNMENT_MEMBER, gid, static.member_id, None),
                            sr.StreamsRecord(sr.MEMBER_METADATA, gid, static.member_id, None)]
                out.cancel(sc.rebalance_key(gid, static.member_id))
        elif member_id not in group.members:
            if not joining:
                raise ApiError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
            if static is None and len(group.members) >= self.config.group_streams_max_size:
                raise ApiError(E.GROUP_MAX_SIZE_REACHED, f"The streams group has reached its maximum capacity of "
                               f"{self.config.group_streams_max_size} members.")
            member = StreamsGroupMember(member_id)
        else:
            member = group.members[member_id]
            check_epoch(member, cmd)
        gone = replaced.member_id if replaced is not None and replaced.member_id != member_id else None
        is_new = member_id not in group.members or replaced is not None
        statuses: list[tuple[int, str]] = []
        bump = False
        reason = ""

        # 1. The topology: the first one is the group's; an older one is stale; Kafka 4.4 takes no other
        #    (maybeUpdateTopology).
        topology = group.topology
        if cmd.topology is not None:
            if topology is None:
                topology = cmd.topology
                records.append(sr.StreamsRecord(sr.TOPOLOGY, gid, None, topology_value(topology)))
                bump = True
                reason = f"topology epoch {topology.epoch}"
            elif cmd.topology.epoch >= topology.epoch and cmd.topology != topology:
                raise ApiError(E.INVALID_REQUEST, "Topology updates are not supported yet.")
        assert topology is not None

        # 2. The member's metadata.
        updated = member.with_(
            instance_id=cmd.instance_id if cmd.instance_id is not None else member.instance_id,
            rack_id=cmd.rack_id if cmd.rack_id is not None else member.rack_id,
            client_id=cmd.client_id, client_host=cmd.client_host,
            rebalance_timeout_ms=cmd.rebalance_timeout_ms if cmd.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            topology_epoch=cmd.topology.epoch if cmd.topology is not None else member.topology_epoch,
            process_id=cmd.process_id or member.process_id,
            user_endpoint=cmd.user_endpoint if cmd.user_endpoint is not None else member.user_endpoint,
            client_tags=cmd.client_tags if cmd.client_tags is not None else member.client_tags)
        if group.topology is not None and updated.topology_epoch < group.topology.epoch:
            statuses.append((sc.STALE_TOPOLOGY, f"The member's topology epoch {updated.topology_epoch} is behind "
                             f"the group's topology epoch {group.topology.epoch}."))
        if member_id not in group.members or not updated.metadata_equals(member):
            records.append(sr.StreamsRecord(sr.MEMBER_METADATA, gid, member_id, mmv.StreamsGroupMemberMetadataValue(
                instance_id=updated.instance_id, rack_id=updated.rack_id, client_id=updated.client_id,
                client_host=updated.client_host, rebalance_timeout_ms=updated.rebalance_timeout_ms,
                topology_epoch=updated.topology_epoch, process_id=updated.process_id,
                user_endpoint=None if updated.user_endpoint is None else mmv.Endpoint(*updated.user_endpoint),
                client_tags=[mmv.KeyValue(k, v) for k, v in updated.client_tags])))
            if replaced is None:
                reason = f"member {member_id} joined" if is_new else f"member {member_id} updated its metadata"
            elif not updated.metadata_equals(member):
                reason = f"member {member_id} (instance {cmd.instance_id}) rejoined and updated its metadata"
            bump = bump or replaced is None or not updated.metadata_equals(member)
        if gone is not None:  # the rejoining static member's target, under its new id
            records.append(target_record(gid, member_id, group.target(gone)))

        # 3. The topology validated against the topics as they are.
        partitions = self._partitions()
        configured = configure(topology.subtopologies, partitions)
        if configured.ready:
            check_tasks(configured.task_counts, cmd)
        creatable = configured.missing_internal_topics
        statuses += _statuses(configured)
        new_hash = topics_hash(topology_topics(topology), self.topics())
        validated = topology.epoch if configured.ready else -1
        group_epoch = group.group_epoch
        configs = self.settings.assignment_configs(gid)
        if not bump:
            reason = ("topics changed" if new_hash != group.metadata_hash
                      else "topology validated" if validated != group.validated_topology_epoch and validated >= 0
                      else "topology no longer valid" if validated != group.validated_topology_epoch
                      else f"assignment configs changed to {configs}" if configs != group.last_assignment_configs
                      else "")
        if bump or reason:
            group_epoch += 1
            records.append(metadata_record(gid, group_epoch, new_hash, validated, configs))

        # 4. The target assignment, for the whole group, when the group epoch moved on; the first one of a
        #    group without members (new, or emptied since: Kafka 4.4's group.isEmpty()) waits for the initial
        #    rebalance delay, whose timer computes it (members reconcile to nothing meanwhile).
        initial_delay_ms = self.settings.initial_rebalance_delay_ms(gid) if not group.members else 0
        if initial_delay_ms > 0:
            self.delayed.add(gid)
            out.schedule(sc.initial_delay_key(gid), initial_delay_ms, sc.StreamsInitialDelayExpired(gid))
        moved: tuple[str, ...] = ()
        computed = False
        if group_epoch > group.assignment_epoch and gid in self.delayed:
            target, target_epoch = EMPTY, max(1, group.assignment_epoch)
            statuses.append((sc.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance "
                                                    "delay."))
        elif group_epoch > group.assignment_epoch and not can_compute_next_assignment(
                group.assignment_timestamp, self.settings.assignment_interval_ms(gid), now_ms):
            # streams.assignment.interval.ms batches the group's changes: the member reconciles to the
            # current target meanwhile; a heartbeat after the interval computes the next one.
            target, target_epoch = group.target(gone or member_id), group.assignment_epoch
            statuses.append((sc.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."))
        elif group_epoch > group.assignment_epoch:
            targets, moved = self._update_target(records, group, group_epoch, updated, configured, now_ms, configs,
                                                 topology, removed=gone)
            target, target_epoch, computed = targets.get(member_id, EMPTY), group_epoch, True
        else:
            target, target_epoch = group.target(gone or member_id), group.assignment_epoch
        if group_epoch != group.group_epoch:
            out.events.append(StreamsAssignmentChanged(
                gid, group_epoch, target_epoch, reason, member_id, ASSIGNOR_NAME, moved,
                len(group.members) + (1 if member_id not in group.members and gone is None else 0),
                group.group_epoch, (member_id,) if is_new and replaced is None else ()))
        elif computed:  # the target of an epoch that moved earlier: past the assignment interval, or after a fence
            out.events.append(_target_computed(group, group_epoch, "delayed assignment computed", member_id, moved))

        # 5. Reconciliation: revocation before reassignment.
        owned = None if cmd.active_tasks is None else tasks_of(cmd.active_tasks)
        held = frozenset(t for m in group.members.values() if m.member_id not in (member_id, gone)
                         for t in m.assigned.active | m.pending_revocation.active)
        reconciled = reconcile(updated, target, target_epoch, held, owned)
        if is_new or reconciled.member_epoch != member.member_epoch or reconciled.state != member.state \
                or reconciled.assigned != member.assigned or reconciled.pending_revocation != member.pending_revocation:
            records.append(sr.StreamsRecord(sr.CURRENT_MEMBER_ASSIGNMENT, gid, member_id,
                                            current_assignment_value(reconciled)))
        out.schedule(sc.session_key(gid, member_id), self.settings.session_timeout_ms(gid),
                     sc.StreamsSessionExpired(gid, member_id))
        if reconciled.state == UNREVOKED_TASKS and (member.state != UNREVOKED_TASKS or replaced is not None):
            out.schedule(sc.rebalance_key(gid, member_id), max(0, reconciled.rebalance_timeout_ms),
                         sc.StreamsRevocationExpired(gid, member_id, reconciled.member_epoch))
        elif reconciled.state != UNREVOKED_TASKS and member.state == UNREVOKED_TASKS:
            out.cancel(sc.rebalance_key(gid, member_id))
        if cmd.shutdown_application:
            # In memory, as Kafka keeps it: every member is told until the group is empty again.
            group.shutdown_requested_by = member_id
        if cmd.shutdown_application or group.shutdown_requested_by is not None:
            statuses.append((sc.SHUTDOWN_APPLICATION, "A KafkaStreams instance encountered a fatal error and "
                                                      "requested a shutdown for the entire application."))
        send_tasks = joining or reconciled.assigned != member.assigned or cmd.active_tasks is None and is_new
        active, standby, warmup = reconciled.assigned.wire()
        endpoint_epoch = group.endpoint_epoch + (1 if reconciled.assigned != member.assigned else 0)
        return sc.StreamsGroupHeartbeatResult(
            E.NONE, None, member_id, reconciled.member_epoch, self.settings.heartbeat_interval_ms(gid),
            acceptable_recovery_lag=self.settings.acceptable_recovery_lag(gid),
            task_offset_interval_ms=self.settings.task_offset_interval_ms(gid), statuses=tuple(statuses),
            active_tasks=active if send_tasks else None, standby_tasks=standby if send_tasks else None,
            warmup_tasks=warmup if send_tasks else None,
            endpoint_information_epoch=endpoint_epoch,
            partitions_by_endpoint=(self._endpoints(group, reconciled, topology, gone)
                                    if cmd.endpoint_information_epoch != endpoint_epoch else None),
            creatable_topics=creatable)

    def _delayed_target(self, out: Outcome, group: StreamsGroup, now_ms: int) -> None:
        """Kafka's computeDelayedTargetAssignment: the initial rebalance delay is over, and the target
        assignment of every member that joined meanwhile is computed now, not at the next heartbeat;
        the members reconcile to it with their next heartbeats."""
        if not group.members or group.group_epoch <= group.assignment_epoch or group.topology is None:
            return  # emptied meanwhile, or nothing to assign (Kafka skips these too)
        records: list[Any] = []
        configured = configure(group.topology.subtopologies, self._partitions())
        configs = group.last_assignment_configs or self.settings.assignment_configs(group.group_id)
        _, moved = self._update_target(records, group, group.group_epoch, None, configured, now_ms, configs,
                                       group.topology)
        out.write(records)
        out.events.append(_target_computed(group, group.group_epoch, "initial rebalance delay over", None, moved))

    def _update_target(self, records: list[Any], group: StreamsGroup, group_epoch: int,
                       updated: StreamsGroupMember | None, configured: ConfiguredTopology, now_ms: int,
                       configs: Mapping[str, str], topology: sc.Topology | None, removed: str | None = None
                       ) -> tuple[dict[str, Assignment], tuple[str, ...]]:
        """The group's new target assignment (and the members whose target moved), its records added.
        `removed`: a static member `updated` replaces (its previous target is the new member's)."""
        members = dict(group.members)
        previous = {m: group.target(m) for m in members}
        if removed is not None:
            members.pop(removed, None)
        if updated is not None:
            members[updated.member_id] = updated
            if removed is not None:
                previous[updated.member_id] = group.target(removed)
        tasks = configured.all_tasks() if configured.ready else frozenset()
        with_state = {s.subtopology_id for s in (topology.subtopologies if topology is not None else ())
                      if s.state_changelog_topics}
        result = assign({m: AssignmentMember(m, member.process_id or m, previous.get(m, EMPTY).active,
                                             previous.get(m, EMPTY).standby) for m, member in members.items()},
                        tasks, int(configs[NUM_STANDBY_REPLICAS]),
                        frozenset(t for t in tasks if t[0] in with_state))
        targets = {m: Assignment(t.active, t.standby, t.warmup) for m, t in result.items()}
        moved: list[str] = []
        for m in sorted(members):
            new = targets.get(m, EMPTY)
            if new != group.target(m) or m not in group.target_assignment:
                records.append(target_record(group.group_id, m, new))
                moved.append(m)
        records.append(assignment_metadata_record(group.group_id, group_epoch, now_ms))
        return targets, tuple(moved)

    def _endpoints(self, group: StreamsGroup, updated: StreamsGroupMember, topology: sc.Topology,
                   gone: str | None = None) -> Any:
        """Each member's endpoint and the partitions of its tasks (for interactive queries)."""
        members = dict(group.members)
        members.pop(gone or "", None)
        members[updated.member_id] = updated
        by_id = {s.subtopology_id: s for s in topology.subtopologies}

        def parts(tasks: frozenset[tuple[str, int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
            out: dict[str, set[int]] = {}
            for sid, p in tasks:
                s = by_id.get(sid)
                if s is None:
                    continue
                for t in list(s.source_topics) + [r.name for r in s.repartition_source_topics]:
                    out.setdefault(t, set()).add(p)
            return tuple((t, tuple(sorted(ps))) for t, ps in sorted(out.items()))

        return tuple((m.user_endpoint, parts(m.assigned.active), parts(m.assigned.standby))
                     for _, m in sorted(members.items()) if m.user_endpoint is not None)

    def _leave(self, out: Outcome, records: list[Any], existing: Any,
               cmd: sc.StreamsGroupHeartbeat) -> sc.StreamsGroupHeartbeatResult:
        """Kafka's streamsGroupLeave: a member leaves (epoch -1) and is fenced; a static member leaving
        with epoch -2 only steps out: it keeps its tasks until its instance id rejoins or its session
        times out (streamsGroupStaticMemberGroupLeave)."""
        group = self._group(existing, cmd.group_id, False)
        if cmd.instance_id is None:
            member = group.members.get(cmd.member_id)
            if member is None:
                raise ApiError(E.UNKNOWN_MEMBER_ID,
                               f"Member {cmd.member_id} is not a member of group {group.group_id}.")
        else:
            static = group.static_member(cmd.instance_id)
            if static is None:
                raise ApiError(E.UNKNOWN_MEMBER_ID, f"Instance id {cmd.instance_id} is unknown.")
            check_not_fenced(static, cmd.member_id, cmd.instance_id)
            member = static
            if cmd.member_epoch == sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                leaving = member.with_(member_epoch=sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation=EMPTY)
                records.append(sr.StreamsRecord(sr.CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id,
                                                current_assignment_value(leaving)))
                out.cancel(sc.rebalance_key(group.group_id, member.member_id))
                return sc.StreamsGroupHeartbeatResult(E.NONE, None, cmd.member_id,
                                                      sc.LEAVE_GROUP_STATIC_MEMBER_EPOCH, statuses=())
        self._fence(out, records, group, member, f"member {member.member_id} left")
        if len(group.members) == 1:
            group.shutdown_requested_by = None
        return sc.StreamsGroupHeartbeatResult(E.NONE, None, cmd.member_id, cmd.member_epoch, statuses=())

    def _fence(self, out: Outcome, records: list[Any], group: StreamsGroup, member: StreamsGroupMember,
               reason: str, session_timeout_ms: int | None = None) -> None:
        """Kafka's streamsGroupFenceMember: the member's records go and the group epoch moves on; the
        others get their new targets with their next heartbeat."""
        gid, member_id = group.group_id, member.member_id
        records.append(sr.StreamsRecord(sr.CURRENT_MEMBER_ASSIGNMENT, gid, member_id, None))
        records.append(sr.StreamsRecord(sr.TARGET_ASSIGNMENT_MEMBER, gid, member_id, None))
        records.append(sr.StreamsRecord(sr.MEMBER_METADATA, gid, member_id, None))
        records.append(metadata_record(gid, group.group_epoch + 1, group.metadata_hash,
                                       group.validated_topology_epoch, group.last_assignment_configs))
        if len(group.members) == 1:
            # The group becomes empty: its assignment epoch follows, with a new group's timestamp (0), so
            # that no assignment interval delays the next member (Kafka's streamsGroupFenceMember).
            records.append(assignment_metadata_record(gid, group.group_epoch + 1, 0))
        out.cancel(sc.session_key(gid, member_id))
        out.cancel(sc.rebalance_key(gid, member_id))
        out.events.append(StreamsAssignmentChanged(
            gid, group.group_epoch + 1, group.assignment_epoch, reason, member_id, ASSIGNOR_NAME, (),
            len(group.members) - 1, group.group_epoch, (), (member_id,), session_timeout_ms))

    def _describe(self, group: Any, group_id: str) -> sc.DescribedStreamsGroup:
        try:
            streams = self._group(group, group_id, False)
        except ApiError as exc:
            return sc.DescribedStreamsGroup(group_id, exc.code, exc.message)
        return sc.DescribedStreamsGroup(
            group_id, E.NONE, None, streams.state, streams.group_epoch, streams.assignment_epoch, streams.topology,
            tuple(sc.DescribedStreamsMember(
                m.member_id, m.member_epoch, m.instance_id, m.rack_id, m.client_id, m.client_host, m.topology_epoch,
                m.process_id, m.user_endpoint, m.client_tags, m.assigned.wire(), streams.target(m.member_id).wire())
                for m in streams.members.values()))

    # -- the GroupType protocol's other duties -------------------------------------------------

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        return after_deleted(follow_up, error, now_ms, self._dispatch)

    def replay(self, record: Any) -> None:
        replay(self.groups, record, self._create)

    def _create(self, group_id: str) -> StreamsGroup:
        group = StreamsGroup(group_id, assignment_epoch=1)  # Kafka 4.3+: epochs start at 1
        self.store.put(group)
        return group

    def status(self, group: StreamsGroup, wall_ms: int) -> dict[str, Any]:
        return {
            "group_id": group.group_id, "group_type": sc.STREAMS_GROUP_TYPE, "state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "topology_epoch": None if group.topology is None else group.topology.epoch,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "process_id": m.process_id,
                         "member_epoch": m.member_epoch, "active": [list(t) for t in sorted(m.assigned.active)],
                         "standby": [list(t) for t in sorted(m.assigned.standby)]}
                        for m in group.members.values()],
        }

    def begin_load(self) -> None:
        return None

    def finish_load(self, now_ms: int) -> Outcome:
        """As Kafka's onLoaded: every member gets a fresh session timeout."""
        out = Outcome()
        for group in self.groups.values():
            for member_id, member in group.members.items():
                out.schedule(sc.session_key(group.group_id, member_id), self.settings.session_timeout_ms(group.group_id),
                             sc.StreamsSessionExpired(group.group_id, member_id))
                if member.state == UNREVOKED_TASKS:
                    out.schedule(sc.rebalance_key(group.group_id, member_id), max(0, member.rebalance_timeout_ms),
                                 sc.StreamsRevocationExpired(group.group_id, member_id, member.member_epoch))
        return out

    def unload(self, now_ms: int) -> Outcome:
        out = Outcome()
        for group_id in self.delayed:
            out.cancel(sc.initial_delay_key(group_id))
        self.delayed.clear()
        for group in self.groups.values():
            for member_id in group.members:
                out.cancel(sc.session_key(group.group_id, member_id))
                out.cancel(sc.rebalance_key(group.group_id, member_id))
        return out


def _target_computed(group: StreamsGroup, group_epoch: int, reason: str, trigger: str | None,
                     moved: tuple[str, ...]) -> StreamsAssignmentChanged:
    """The event of a target assignment computed after its group epoch moved (the history's entry of
    who moved then): its previous epoch is the assignment epoch it replaces."""
    return StreamsAssignmentChanged(group.group_id, group_epoch, group_epoch, reason, trigger, ASSIGNOR_NAME, moved,
                                    len(group.members), group.assignment_epoch)


def _statuses(configured: ConfiguredTopology) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    if configured.missing_source_topics:
        out.append((sc.MISSING_SOURCE_TOPICS, "Source topics " + ", ".join(configured.missing_source_topics)
                    + " are missing."))
    if configured.missing_internal_topics:
        out.append((sc.MISSING_INTERNAL_TOPICS, "Internal topics are missing: "
                    + str([t.name for t in configured.missing_internal_topics])))
    if configured.incorrectly_partitioned:
        out.append((sc.INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same number of partitions: "
                    + str(list(configured.incorrectly_partitioned))))
    return out


def metadata_record(group_id: str, epoch: int, metadata_hash: int, validated_topology_epoch: int,
                    configs: Mapping[str, str]) -> sr.StreamsRecord:
    return sr.StreamsRecord(sr.GROUP_METADATA, group_id, None, gmv.StreamsGroupMetadataValue(
        epoch=epoch, metadata_hash=metadata_hash, validated_topology_epoch=validated_topology_epoch,
        last_assignment_configs=[gmv.LastAssignmentConfig(k, v) for k, v in sorted(configs.items())]))


def assignment_metadata_record(group_id: str, epoch: int, timestamp_ms: int) -> sr.StreamsRecord:
    value = tav.StreamsGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp=timestamp_ms)
    return sr.StreamsRecord(sr.TARGET_ASSIGNMENT_METADATA, group_id, None, value)


def can_compute_next_assignment(assignment_timestamp_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Kafka's canComputeNextTargetAssignment: at once for a new (or emptied) group, whose timestamp is 0,
    and when the interval is 0 (an escape from a wall clock set back); else once the interval has passed
    since the last assignment was computed."""
    return assignment_timestamp_ms == 0 or interval_ms == 0 or now_ms >= assignment_timestamp_ms + interval_ms


def target_record(group_id: str, member_id: str, target: Assignment) -> sr.StreamsRecord:
    return sr.StreamsRecord(sr.TARGET_ASSIGNMENT_MEMBER, group_id, member_id,
                            tamv.StreamsGroupTargetAssignmentMemberValue(
                                active_tasks=wire_tasks(target.active, tamv.TaskIds),
                                standby_tasks=wire_tasks(target.standby, tamv.TaskIds),
                                warmup_tasks=wire_tasks(target.warmup, tamv.TaskIds)))
