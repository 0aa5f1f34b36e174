"""The classic group coordinator for one `__consumer_offsets` partition, as a state machine.

    machine.handle(command, now_ms) -> Outcome        decide (requests and timer expiries)
    machine.replay(record)                            apply a durable record to memory
    machine.on_write_done(follow_up, error, now_ms)   finish what waited on a write
    machine.begin_load(); replay...; finish_load()    rebuild from the log

What is persisted: committed offsets and each group's GroupMetadata at generation boundaries.
Offsets change *only* through `replay`. Membership and parked JoinGroup/SyncGroup answers live in
memory, as in Kafka: handlers change them directly, and a GroupMetadata record written at run
time is a snapshot of what memory already holds, so replaying it then is a no-op (Kafka appends
classic-group records with `replayRecords=false` for the same reason). While loading, the same
records rebuild the groups.
"""

from __future__ import annotations

import uuid
from sys import intern
from collections.abc import Callable, Iterable, Mapping

from ....protocol.errors import ErrorCode

from .. import commands as c
from ..consumer.consumer_commands import ConsumerExpiry, ConsumerRequest
from .admin import handle_delete_group, handle_describe_group, list_groups
from ...config import GroupConfig, default_max_batch_bytes
from ..consumer.consumer_group import TopicImage, no_topics
from ..consumer.consumer_on_demand import ConsumerGroupsOnDemand
from ..consumer.downgrade import DowngradedToClassic, JoinAfterConsumerGroupDeleted
from .controls import Control, CoordinatorMove, ExpireMember, ExpireSessions, ForceRebalance, handle_control
from .group import ClassicGroup, GroupState, OffsetAndMetadata
from ..group_types import GroupType
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
from .offsets import (
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_expiry_check,
    handle_offset_fetch,
    on_group_removed,
)
from ...runtime.outcome import (
    AssignmentWritten,
    EmptyGroupWritten,
    FollowUp,
    GroupRemoved,
    Outcome,
    StaticMemberReplaced,
    WriteFailed,
)
from .rebalance import Ctx, schedule_heartbeat
from .transitions import mark_dead, prepare_rebalance
from ....protocol.records.classic_records import (
    GroupMetadataRecord,
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
    Record,
)
from ..results import JoinGroupResult, ListedGroup, SyncGroupResult

E = ErrorCode
S = GroupState


def random_member_id(prefix: str) -> str:
    """`<client.id or group.instance.id>-<UUID>`, Kafka's format."""
    return f"{prefix}-{uuid.uuid4()}"


class GroupStateMachine:
    def __init__(
        self,
        partition: int,
        config: GroupConfig | None = None,
        *,
        new_member_id: Callable[[str], str] = random_member_id,
        topics: Callable[[], Mapping[str, TopicImage]] = no_topics,
        max_batch_bytes: Callable[[], int] = default_max_batch_bytes,
    ) -> None:
        self.partition = partition
        self.config = config or GroupConfig()
        self.max_batch_bytes = max_batch_bytes  # the partition's largest batch (see offsets.cannot_fit)
        self.groups: dict[str, ClassicGroup] = {}
        self.loading = False
        # While loading: the groups whose metadata record is live so far. Kafka's load keeps such a
        # group (its generation, its protocol) whatever happens to its offsets; only a group known from
        # offsets alone ends with its last offset.
        self._with_metadata: set[str] = set()
        self._new_member_id = new_member_id
        # Consumer groups (KIP-848) of this partition; they take every command about them (their
        # machine is imported with the first command or record of the consumer protocol).
        self.consumer = ConsumerGroupsOnDemand(partition, self.config, self.groups, topics, max_batch_bytes)
        # The other group types of this partition (group_types.py), asked in this order.
        self.group_types: tuple[GroupType, ...] = (self.consumer,)

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def group_ids(self) -> list[str]:
        """Every group of the partition, whatever its type."""
        return [*self.groups, *(g for t in self.group_types for g in t.groups)]

    # -- commands ------------------------------------------------------------------------------

    def handle(self, cmd: c.Command | Control | ConsumerRequest | ConsumerExpiry, now_ms: int) -> Outcome:
        for group_type in self.group_types:  # a test control too: a consumer group has its own
            if group_type.owns(cmd):
                return group_type.handle(cmd, now_ms)
        ctx = Ctx(self.config, now_ms, Outcome())
        group = self.groups.get(cmd.group_id)
        match cmd:  # the commonest first: every consumer commits and heartbeats
            case c.OffsetCommit():
                handle_offset_commit(ctx, cmd, self.groups.get, lambda gid: self._create(gid, now_ms),
                                     self.max_batch_bytes)
            case c.Heartbeat():
                handle_heartbeat(ctx, group, cmd)
            case c.JoinGroup():
                handle_join_group(ctx, cmd, self.groups.get, lambda gid: self._create(gid, now_ms),
                                  self._new_member_id)
            case c.SyncGroup():
                handle_sync_group(ctx, group, cmd)
            case c.LeaveGroup():
                handle_leave_group(ctx, group, cmd)
            case c.OffsetFetch():
                handle_offset_fetch(ctx, group, cmd)
            case c.OffsetDelete():
                handle_offset_delete(ctx, group, cmd)
            case c.DescribeGroup():
                handle_describe_group(ctx, group, cmd)
            case c.DeleteGroup():
                handle_delete_group(ctx, group, cmd)
            case c.HeartbeatExpired():
                on_heartbeat_expired(ctx, group, cmd)
            case c.PendingMemberExpired():
                on_pending_member_expired(ctx, group, cmd)
            case c.JoinExpired() | c.InitialJoinExpired():
                on_join_expired(ctx, group, cmd)
            case c.SyncExpired():
                on_sync_expired(ctx, group, cmd)
            case c.OffsetExpiryCheck():
                handle_offset_expiry_check(ctx, group, cmd, self._drop)
            case ForceRebalance() | ExpireMember() | ExpireSessions() | CoordinatorMove():
                handle_control(ctx, group, cmd)
            case _:
                raise TypeError(f"unknown command {type(cmd).__name__}")
        return ctx.out

    def on_write_done(self, follow_up: FollowUp, error: ErrorCode | None, now_ms: int) -> Outcome:
        """Continue after the append that carried `follow_up`: `error` is None when it is durable,
        else the error already translated for clients."""
        ctx = Ctx(self.config, now_ms, Outcome())
        group = self.groups.get(follow_up.group_id)
        match follow_up:
            case AssignmentWritten():
                on_assignment_written(ctx, group, follow_up, error)
            case StaticMemberReplaced():
                on_static_member_replaced(ctx, group, follow_up, error)
            case GroupRemoved():
                on_group_removed(ctx, group, follow_up, error, self._drop)
            case JoinAfterConsumerGroupDeleted():
                if error is None:
                    handle_join_group(ctx, follow_up.join, self.groups.get,
                                      lambda gid: self._create(gid, now_ms), self._new_member_id)
                else:
                    ctx.out.reply(follow_up.join.reply_to, JoinGroupResult(error, follow_up.join.member_id))
            case DowngradedToClassic():
                # The consumer group became this classic group (online downgrade): its members
                # heartbeat again and rejoin.
                if error is None and group is not None:
                    for member in group.members.values():
                        schedule_heartbeat(ctx, group, member)
                    if follow_up.rebalance:
                        prepare_rebalance(ctx, group, f"downgrade from consumer group: {follow_up.reason}", None)
            case EmptyGroupWritten():
                # Safe to ignore: with no members, the previous generation coming back after a
                # restart would just time out.
                pass
        if error is not None:
            ctx.out.events.append(WriteFailed(follow_up.group_id, type(follow_up).__name__, error))
        return ctx.out

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[ListedGroup]:
        return (list_groups(self.groups.values(), states_filter, types_filter)
                + [g for t in self.group_types for g in t.list_groups(states_filter, types_filter)])

    def _create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, now_ms)
        self.groups[group_id] = group
        return group

    def _drop(self, group: ClassicGroup) -> None:
        if not group.is_state(S.DEAD):
            mark_dead(group, group.current_state_timestamp or 0)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # -- records -------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        for group_type in self.group_types:
            if group_type.replays(record):
                group_type.replay(record)
                return
        match record:
            case OffsetCommitRecord():
                group = self.groups.get(record.group)
                if group is None:
                    # Offsets without group metadata: a simple (offsets-only) group.
                    group = self._create(record.group, record.commit_timestamp)
                # Interned: every group committing on a topic would otherwise keep its own copy of
                # the name, as decoded from its request or its record.
                group.offsets[(intern(record.topic), record.partition)] = OffsetAndMetadata(
                    record.offset, record.leader_epoch, record.metadata, record.commit_timestamp,
                    record.expire_timestamp,
                )
            case OffsetCommitTombstone():
                group = self.groups.get(record.group)
                if group is not None:
                    group.offsets.pop((record.topic, record.partition), None)
                    if (self.loading and not group.offsets and not group.members
                            and record.group not in self._with_metadata):
                        del self.groups[record.group]
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
                    if group.offsets:
                        # Offsets outlive the metadata: keep them in a simple group.
                        self.groups[record.group] = self._simple_group_with(group)
                    else:
                        del self.groups[record.group]
                elif group.state in (S.EMPTY, S.DEAD):
                    self._drop(group)
                    if group.offsets:
                        # An empty group giving way to a consumer group of the same id: the
                        # offsets stay (deletion and expiry tombstone them first).
                        self.groups[record.group] = self._simple_group_with(group)

    def _simple_group_with(self, old: ClassicGroup) -> ClassicGroup:
        group = ClassicGroup(old.group_id, old.current_state_timestamp or 0)
        group.offsets = old.offsets
        return group

    def _load_group_metadata(self, record: GroupMetadataRecord) -> None:
        previous = self.groups.get(record.group)
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
        if previous is not None:
            group.offsets = previous.offsets
        group.subscribed_topics = group.compute_subscribed_topics()
        group.generation_members = tuple(group.members)
        self.groups[record.group] = group

    # -- loading and unloading -----------------------------------------------------------------

    def load_partition(self, records: Iterable[Record], now_ms: int) -> Outcome:
        """Replay a whole partition (tombstones respected) and resume its groups."""
        self.begin_load()
        for record in records:
            self.replay(record)
        return self.finish_load(now_ms)

    def begin_load(self) -> None:
        self.loading = True
        self.groups.clear()
        for group_type in self.group_types:
            group_type.begin_load()

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
        for group_type in self.group_types:
            ctx.out.merge(group_type.finish_load(now_ms))
        return ctx.out

    def unload(self, now_ms: int) -> Outcome:
        """This broker no longer owns the partition: answer whoever waits with NOT_COORDINATOR,
        stop every timer, forget the groups."""
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
        self.groups.clear()
        for group_type in self.group_types:
            ctx.out.merge(group_type.unload(now_ms))
        return ctx.out
