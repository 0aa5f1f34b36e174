"""The classic group type (Kafka's GroupMetadataManager, classic half): its commands, its records,
its follow-ups, for one `__consumer_offsets` partition. The group shard (groups/shard.py) hands it
every command of the classic protocol and its timers, the GroupMetadata records, and the
follow-ups it made; offsets, DeleteGroups, ListGroups and retention are the shard's, for every
type (groups/offset_store.py).

    classic.handle(command, group, now_ms) -> Outcome        decide (requests and timer expiries)
    classic.replay(record)                                   apply a durable GroupMetadata record
    classic.on_write_done(follow_up, error, now_ms)          finish what waited on a write
    classic.begin_load(); replay...; finish_load()           rebuild from the log

What is persisted: each group's GroupMetadata at generation boundaries (and, by the shard, its
offsets). Membership and parked JoinGroup/SyncGroup answers live in memory, as in Kafka: handlers
change them directly, and a GroupMetadata record written at run time is a snapshot of what memory
already holds, so replaying it then is a no-op (Kafka appends classic-group records with
`replayRecords=false` for the same reason). While loading, the same records rebuild the groups.
"""

from __future__ import annotations

import uuid
from typing import Any

from ....protocol.errors import ErrorCode
from ....protocol.records.classic_records import GroupMetadataRecord, GroupMetadataTombstone
from ...runtime.outcome import Outcome
from .. import commands as c
from ..context import Ctx
from ..group_types import TypeContext
from ..history import in_progress
from ..results import HeartbeatResult, JoinGroupResult, LeaveGroupResult, SyncGroupResult
from .admin import handle_describe_group
from .controls import CoordinatorMove, ExpireMember, ExpireSessions, ForceRebalance, handle_control
from .follow_ups import CLASSIC_FOLLOW_UPS, AssignmentWritten, EmptyGroupWritten, StaticMemberReplaced
from .group import CLASSIC_GROUP_TYPE, ClassicGroup, GroupState
from .join import handle_join_group, on_static_member_replaced
from .member import Member
from .membership import (
    handle_heartbeat,
    handle_leave_group,
    handle_sync_group,
    on_assignment_written,
    on_heartbeat_expired,
    on_join_expired,
    on_pending_member_expired,
    on_sync_expired,
)
from .rebalance import schedule_heartbeat
from .transitions import mark_dead, prepare_rebalance

E = ErrorCode
S = GroupState


def random_member_id(prefix: str) -> str:
    """`<client.id or group.instance.id>-<UUID>`, Kafka's format."""
    return f"{prefix}-{uuid.uuid4()}"


class ClassicGroups:
    name = CLASSIC_GROUP_TYPE
    commands: tuple[type, ...] = (
        c.Heartbeat, c.JoinGroup, c.SyncGroup, c.LeaveGroup, c.DescribeGroup,
        c.HeartbeatExpired, c.PendingMemberExpired, c.JoinExpired, c.InitialJoinExpired, c.SyncExpired,
    )
    also_handles: tuple[type, ...] = ()
    records: tuple[type, ...] = (GroupMetadataRecord, GroupMetadataTombstone)
    follow_ups: tuple[type, ...] = CLASSIC_FOLLOW_UPS

    def __init__(self, ctx: TypeContext) -> None:
        self.partition = ctx.partition
        self.config = ctx.config
        self.store = ctx.groups
        self.groups = ctx.groups.of_type(ClassicGroup)  # this type's groups (a view of the one map)
        self._new_member_id = ctx.new_member_id
        self.loading = False
        # While loading: the groups whose metadata record is live so far. Kafka's load keeps such a
        # group (its generation, its protocol) whatever happens to its offsets; only a group known from
        # offsets alone ends with its last offset.
        self._with_metadata: set[str] = set()

    def simple_group(self, group_id: str, now_ms: int = 0) -> ClassicGroup:
        """Kafka's simple consumer group: an empty classic group without a protocol, holding offsets."""
        return ClassicGroup(group_id, now_ms)

    # -- commands ------------------------------------------------------------------------------

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        ctx = Ctx(self.config, now_ms, Outcome())
        if group is not None and group.__class__ is not ClassicGroup:
            _refuse_other_type(ctx, cmd)
            return ctx.out
        match cmd:  # the commonest first: every classic member heartbeats
            case c.Heartbeat():
                handle_heartbeat(ctx, group, cmd)
            case c.JoinGroup():
                handle_join_group(ctx, cmd, self.groups.get, lambda gid: self._create(gid, now_ms),
                                  self._new_member_id)
            case c.SyncGroup():
                handle_sync_group(ctx, group, cmd)
            case c.LeaveGroup():
                handle_leave_group(ctx, group, cmd)
            case c.DescribeGroup():
                handle_describe_group(ctx, group, cmd)
            case c.HeartbeatExpired():
                on_heartbeat_expired(ctx, group, cmd)
            case c.PendingMemberExpired():
                on_pending_member_expired(ctx, group, cmd)
            case c.JoinExpired() | c.InitialJoinExpired():
                on_join_expired(ctx, group, cmd)
            case c.SyncExpired():
                on_sync_expired(ctx, group, cmd)
            case ForceRebalance() | ExpireMember() | ExpireSessions() | CoordinatorMove():
                handle_control(ctx, group, cmd)
            case _:
                raise TypeError(f"unknown command {type(cmd).__name__}")
        return ctx.out

    def offset_committed(self, ctx: Ctx, group: ClassicGroup, cmd: c.OffsetCommit) -> None:
        if group.state in (S.STABLE, S.PREPARING_REBALANCE) and not cmd.transactional:
            # Committing keeps a classic member alive, like a heartbeat.
            schedule_heartbeat(ctx, group, group.get(cmd.member_id))

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        """Continue after the append that carried `follow_up`: `error` is None when it is durable,
        else the error already translated for clients."""
        ctx = Ctx(self.config, now_ms, Outcome())
        group = self.groups.get(follow_up.group_id)
        match follow_up:
            case AssignmentWritten():
                on_assignment_written(ctx, group, follow_up, error)
            case StaticMemberReplaced():
                on_static_member_replaced(ctx, group, follow_up, error)
            case EmptyGroupWritten():
                # Safe to ignore: with no members, the previous generation coming back after a
                # restart would just time out.
                pass
        return ctx.out

    def _create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, now_ms)
        self.store.put(group)
        return group

    def drop(self, group: ClassicGroup) -> None:
        """The group is deleted: Dead, and out of the store (its offsets, if any remain, stay)."""
        if not group.is_state(S.DEAD):
            mark_dead(group, group.current_state_timestamp or 0)
        if self.store.get(group.group_id) is group:
            self.store.remove(group.group_id)

    def status(self, group: ClassicGroup, wall_ms: int) -> dict[str, Any]:
        return {
            "group_id": group.group_id,
            "group_type": CLASSIC_GROUP_TYPE,
            "state": str(group.state),
            "generation": group.generation_id,
            "protocol_type": group.protocol_type or "",
            "protocol": group.protocol_name or "",
            "leader": group.leader_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                 "client_host": m.client_host}
                for m in group.members.values()
            ],
            "rebalance_in_progress": in_progress(group, wall_ms),
        }

    # -- records -------------------------------------------------------------------------------

    def replay(self, record: Any) -> None:
        match record:
            case GroupMetadataRecord():
                if self.loading:
                    self._with_metadata.add(record.group)
                existing = self.groups.get(record.group)
                if self.loading or existing is None or (existing.protocol_type is None and not existing.members):
                    self._load_group_metadata(record)
                # At run time the record mirrors memory already (see the module docstring).
            case GroupMetadataTombstone():
                group = self.groups.get(record.group)
                if group is None:
                    return
                if self.loading:
                    self._with_metadata.discard(record.group)
                    self.store.remove(record.group)  # offsets outlive the metadata: kept in a simple group
                elif group.state in (S.EMPTY, S.DEAD):
                    # An empty group giving way to a consumer group of the same id, or deleted: its
                    # offsets stay (deletion and expiry tombstone them first).
                    self.drop(group)

    def offsets_gone_while_loading(self, group: Any) -> None:
        if (group.__class__ is ClassicGroup and not group.members
                and group.group_id not in self._with_metadata):
            self.store.remove(group.group_id)  # a group known from offsets alone ends with its last one

    def _load_group_metadata(self, record: GroupMetadataRecord) -> None:
        state = S.STABLE if record.members else S.EMPTY
        timestamp = None if record.current_state_timestamp < 0 else record.current_state_timestamp
        group = ClassicGroup(record.group, 0, state)
        group.current_state_timestamp = timestamp
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        for m in record.members:
            group.add(Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=record.protocol_type,
                protocols=((record.protocol or "", m.subscription),),
                assignment=m.assignment,
            ))
        if record.leader is not None and group.has(record.leader):
            group.leader_id = record.leader
        group.protocol_type = record.protocol_type or None
        group.subscribed_topics = group.compute_subscribed_topics()
        group.generation_members = tuple(group.members)
        self.store.put(group)

    # -- loading and unloading -----------------------------------------------------------------

    def begin_load(self) -> None:
        self.loading = True
        self._with_metadata.clear()

    def finish_load(self, now_ms: int) -> Outcome:
        """Every loaded group is Stable or Empty; members get fresh heartbeat deadlines
        (onGroupLoaded), and a group above a lowered max size rebalances."""
        self.loading = False
        self._with_metadata.clear()
        ctx = Ctx(self.config, now_ms, Outcome())
        for group in self.groups.values():
            for member in group.members.values():
                schedule_heartbeat(ctx, group, member)
            if group.size > self.config.group_max_size:
                prepare_rebalance(ctx, group, f"loaded group is over capacity ({self.config.group_max_size})", None)
        return ctx.out

    def unload(self, now_ms: int) -> Outcome:
        """This broker no longer owns the partition: answer whoever waits with NOT_COORDINATOR,
        stop every timer (the shard then forgets the groups)."""
        ctx = Ctx(self.config, now_ms, Outcome())
        for group in self.groups.values():
            for member in group.members.values():
                ctx.out.reply(group.take_join_handle(member), JoinGroupResult(E.NOT_COORDINATOR, member.member_id))
                ctx.out.reply(group.take_sync_handle(member), SyncGroupResult(E.NOT_COORDINATOR))
                ctx.out.cancel(c.heartbeat_key(group.group_id, member.member_id))
            for member_id in group.pending_members:
                ctx.out.cancel(c.pending_key(group.group_id, member_id))
            ctx.out.cancel(c.join_key(group.group_id))
            ctx.out.cancel(c.sync_key(group.group_id))
            mark_dead(group, now_ms)
        return ctx.out


def _refuse_other_type(ctx: Ctx, cmd: Any) -> None:
    """A classic protocol command for a group of another type that does not take it: refused as
    Kafka refuses it (classicGroupJoin, classicGroupSync, classicGroupHeartbeat, classicGroupLeave,
    describeGroups); a classic timer of a group that changed type is stale."""
    match cmd:
        case c.JoinGroup():
            ctx.out.reply(cmd.reply_to, JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, c.UNKNOWN_MEMBER_ID))
        case c.SyncGroup():
            ctx.out.reply(cmd.reply_to, SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        case c.Heartbeat():
            ctx.out.reply(cmd.reply_to, HeartbeatResult(E.UNKNOWN_MEMBER_ID))
        case c.LeaveGroup():
            ctx.out.reply(cmd.reply_to, LeaveGroupResult(E.UNKNOWN_MEMBER_ID))
        case c.DescribeGroup():
            handle_describe_group(ctx, None, cmd)  # "not a classic group": Dead, as an unknown one
