"""The consumer groups (KIP-848) of one `__consumer_offsets` partition, beside its classic groups.

The classic machine (classic.py) hands over every command that is about a consumer group: the
consumer protocol's own requests and timers, and the shared APIs (offsets, DescribeGroups,
ListGroups, DeleteGroups) when the group id belongs to a consumer group. A group id is one group
whatever its type, so both live in the same partition machine and keep one order per group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ....protocol.errors import ErrorCode

from .. import commands as c
from . import consumer_commands as cc
from ...config import GroupConfig, default_max_batch_bytes
from .consumer_controls import arm_member_timers, cancel_member_timers, handle_consumer_control
from .consumer_group import ConsumerGroup, TopicImage, no_topics
from .consumer_heartbeat import (
    ApiError,
    CCtx,
    consumer_group_heartbeat,
    on_rebalance_expired,
    steady_heartbeat,
    on_session_expired,
)
from .consumer_offsets import (
    consumer_group_describe,
    handle_consumer_delete_group,
    handle_consumer_offset_commit,
    handle_consumer_offset_delete,
    handle_consumer_offset_expiry,
    handle_consumer_offset_fetch,
)
from ....protocol.records.consumer_records import ConsumerGroupMetadataTombstone, is_consumer_record
from .consumer_records import replay
from .consumer_records import group_tombstones
from ..classic.controls import CoordinatorMove, ExpireMember, ExpireSessions, ForceRebalance
from .downgrade import JoinAfterConsumerGroupDeleted
from .migration import (
    classic_group_heartbeat_to_consumer_group,
    classic_group_join_to_consumer_group,
    classic_group_sync_to_consumer_group,
    convert_to_consumer_group,
    leave_classic_members,
    on_classic_timeout,
    validate_online_upgrade,
)
from ..classic.group import ClassicGroup, GroupState, OffsetAndMetadata
from ...runtime.outcome import Outcome
from ....protocol.records.classic_records import GroupMetadataTombstone, OffsetCommitRecord, OffsetCommitTombstone
from ..results import DescribedGroup, JoinGroupResult, ListedGroup

E = ErrorCode
CONSUMER_GROUP_TYPE = "consumer"
_CONSUMER_COMMANDS = cc.CONSUMER_REQUESTS + cc.CONSUMER_EXPIRIES


class ConsumerGroups:
    def __init__(self, partition: int, config: GroupConfig, classic_groups: dict[str, ClassicGroup],
                 topics: Callable[[], Mapping[str, TopicImage]] = no_topics,
                 max_batch_bytes: Callable[[], int] = default_max_batch_bytes) -> None:
        self.partition = partition
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self._classic = classic_groups  # the classic machine's dict: one id, one group
        self.topics = topics
        self.max_batch_bytes = max_batch_bytes

    # -- routing -------------------------------------------------------------------------------

    def owns(self, cmd: object) -> bool:
        if isinstance(cmd, _CONSUMER_COMMANDS):
            return True
        return getattr(cmd, "group_id", None) in self.groups

    def handle(self, cmd: object, now_ms: int) -> Outcome:
        if type(cmd) is cc.ConsumerGroupHeartbeat:  # the steady heartbeat: no context, no records
            steady = steady_heartbeat(self.config, self.topics, self.groups, cmd)
            if steady is not None:
                return steady
        ctx = CCtx(self.config, now_ms, Outcome(), self.topics)
        group = self.groups.get(cmd.group_id)  # type: ignore[attr-defined]
        match cmd:
            case cc.ConsumerGroupHeartbeat():
                consumer_group_heartbeat(ctx, self.groups, cmd, self._get_or_create)
            case cc.ConsumerGroupDescribe():
                ctx.out.reply(cmd.reply_to, consumer_group_describe(ctx, group, self._classic.get(cmd.group_id),
                                                                    cmd.group_id))
            case cc.ConsumerSessionExpired():
                on_session_expired(ctx, group, cmd)
            case cc.ConsumerRebalanceExpired():
                on_rebalance_expired(ctx, group, cmd)
            case c.OffsetCommit():
                handle_consumer_offset_commit(ctx, group, cmd, self.max_batch_bytes)
            case c.OffsetFetch():
                handle_consumer_offset_fetch(ctx, group, cmd)
            case c.OffsetDelete():
                handle_consumer_offset_delete(ctx, group, cmd)
            case c.DeleteGroup():
                handle_consumer_delete_group(ctx, group, cmd)
            case c.OffsetExpiryCheck():
                handle_consumer_offset_expiry(ctx, group, cmd)
            case c.DescribeGroup():
                # DescribeGroups describes classic groups; a consumer group is "not found" there.
                ctx.out.reply(cmd.reply_to, DescribedGroup(
                    cmd.group_id, E.GROUP_ID_NOT_FOUND if cmd.api_version >= 6 else E.NONE, state="Dead"))
            case cc.ConsumerClassicTimeout():
                on_classic_timeout(ctx, group, cmd)
            case ForceRebalance() | ExpireMember() | ExpireSessions() | CoordinatorMove() if group is not None:
                handle_consumer_control(ctx, group, cmd)
            case c.JoinGroup() | c.SyncGroup() | c.Heartbeat() | c.LeaveGroup() if group is not None:
                # owns() sends these here only when their group is a consumer group
                self._classic_protocol(ctx, group, cmd)
            case _:
                return ctx.out  # timers of the classic protocol for a group that changed type
        return ctx.out

    def _classic_protocol(self, ctx: CCtx, group: ConsumerGroup,
                          cmd: c.JoinGroup | c.SyncGroup | c.Heartbeat | c.LeaveGroup) -> None:
        """Classic members inside a consumer group (online migration)."""
        match cmd:
            case c.JoinGroup() if group.is_empty():
                ctx.out.write(group_tombstones(group), then=JoinAfterConsumerGroupDeleted(group.group_id, cmd))
            case c.JoinGroup():
                if self._migration_allowed():
                    classic_group_join_to_consumer_group(ctx, group, cmd)
                else:
                    ctx.out.reply(cmd.reply_to, JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, cmd.member_id))
            case c.SyncGroup():
                classic_group_sync_to_consumer_group(ctx, group, cmd)
            case c.Heartbeat():
                classic_group_heartbeat_to_consumer_group(ctx, group, cmd)
            case c.LeaveGroup():
                leave_classic_members(ctx, group, cmd)

    def _get_or_create(self, ctx: CCtx, group_id: str, create: bool) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup. A new group exists once its records replay."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self._classic.get(group_id)
        if classic is not None and not classic.is_state(GroupState.DEAD):
            if create and classic.is_state(GroupState.EMPTY):
                # maybeDeleteEmptyClassicGroup: the empty classic group gives way; its offsets stay.
                ctx.records.append(GroupMetadataTombstone(group_id))
                return ConsumerGroup(group_id)
            if create and validate_online_upgrade(ctx, classic):
                try:
                    return convert_to_consumer_group(ctx, classic)
                except Exception:  # noqa: BLE001 - a member's embedded protocol does not parse
                    raise ApiError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to consumer "
                                   "group because the embedded consumer protocol is malformed.") from None
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    # -- records -------------------------------------------------------------------------------

    def replays(self, record: object) -> bool:
        """Whether `record` is this machine's to replay."""
        if is_consumer_record(record):
            return True
        if isinstance(record, (OffsetCommitRecord, OffsetCommitTombstone)):
            return record.group in self.groups
        return False

    def replay(self, record: object) -> None:
        match record:
            case OffsetCommitRecord():
                self.groups[record.group].offsets[(record.topic, record.partition)] = OffsetAndMetadata(
                    record.offset, record.leader_epoch, record.metadata, record.commit_timestamp,
                    record.expire_timestamp)
            case OffsetCommitTombstone():
                self.groups[record.group].offsets.pop((record.topic, record.partition), None)
            case ConsumerGroupMetadataTombstone() if record.group in self.groups:
                offsets = self.groups[record.group].offsets
                replay(self.groups, record, self._create)
                if offsets:
                    # The group goes (a downgrade): its offsets stay with the group id.
                    holder = ClassicGroup(record.group, 0)
                    holder.offsets = offsets
                    self._classic[record.group] = holder
            case _:
                replay(self.groups, record, self._create)  # type: ignore[arg-type]

    def _migration_allowed(self) -> bool:
        return self.config.group_consumer_migration_policy.lower() != "disabled"

    def _create(self, group_id: str) -> ConsumerGroup:
        group = ConsumerGroup(group_id)
        classic = self._classic.pop(group_id, None)
        if classic is not None:
            group.offsets = classic.offsets  # the same group id: its committed offsets carry over
        self.groups[group_id] = group
        return group

    # -- views ---------------------------------------------------------------------------------

    def list_groups(self, states_filter: Iterable[str], types_filter: Iterable[str]) -> list[ListedGroup]:
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        if types and CONSUMER_GROUP_TYPE not in types:
            return []
        return [
            ListedGroup(g.group_id, CONSUMER_GROUP_TYPE, str(g.state), CONSUMER_GROUP_TYPE)
            for g in self.groups.values()
            if not states or str(g.state).lower() in states
        ]

    # -- loading -------------------------------------------------------------------------------

    def begin_load(self) -> None:
        self.groups.clear()

    def finish_load(self, now_ms: int) -> Outcome:
        """Kafka's onLoaded: every member gets a fresh session timeout, and a member still
        revoking gets its rebalance timeout again."""
        out = Outcome()
        for group in self.groups.values():
            arm_member_timers(out, self.config, group)
        return out

    def unload(self, now_ms: int) -> Outcome:
        out = Outcome()
        for group in self.groups.values():
            cancel_member_timers(out, group)
        self.groups.clear()
        return out
