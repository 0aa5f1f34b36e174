"""The consumer group type (KIP-848; Kafka's GroupMetadataManager, consumer half) of one
`__consumer_offsets` partition.

The group shard (groups/shard.py) hands it the consumer protocol's requests and timers whatever group
their id names (it refuses another type's group as Kafka does, or upgrades an empty or classic one),
the classic protocol's requests for its own groups (online migration), test controls for its
groups, its records and its follow-ups. Offsets, DeleteGroups, ListGroups and retention are the
shard's, for every type, with the answers its groups give (consumer_group.ConsumerGroup).
"""

from __future__ import annotations

from typing import Any

from ....protocol.errors import ErrorCode

from .. import commands as c
from . import consumer_commands as cc
from ..context import Ctx
from ..group_types import TypeContext
from .consumer_commands import ExpireSessionsNext
from .consumer_controls import arm_member_timers, cancel_member_timers, handle_consumer_control, on_expire_sessions_next
from .consumer_describe import consumer_group_describe
from .consumer_group import CONSUMER_GROUP_TYPE, ConsumerGroup
from .consumer_heartbeat import (
    ApiError,
    CCtx,
    consumer_group_heartbeat,
    on_rebalance_expired,
    on_resolve_regexes,
    steady_heartbeat,
    on_session_expired,
)
from ....protocol.records.classic_records import GroupMetadataTombstone
from ....protocol.records.consumer_records import CONSUMER_RECORD_TYPES
from .consumer_records import replay
from .consumer_records import group_tombstones
from ..classic.controls import CoordinatorMove, ExpireMember, ExpireSessions, ForceRebalance
from ..classic.group import ClassicGroup, GroupState
from ..classic.rebalance import schedule_heartbeat
from ..classic.transitions import prepare_rebalance
from .downgrade import DowngradedToClassic, JoinAfterConsumerGroupDeleted
from .migration import (
    classic_group_heartbeat_to_consumer_group,
    classic_group_join_to_consumer_group,
    classic_group_sync_to_consumer_group,
    convert_to_consumer_group,
    leave_classic_members,
    on_classic_timeout,
    validate_online_upgrade,
)
from ...runtime.outcome import Outcome
from ..results import JoinGroupResult

E = ErrorCode
CONSUMER_COMMANDS = cc.CONSUMER_REQUESTS + cc.CONSUMER_EXPIRIES
CLASSIC_PROTOCOL = (c.JoinGroup, c.SyncGroup, c.Heartbeat, c.LeaveGroup)
CONSUMER_FOLLOW_UPS = (DowngradedToClassic, JoinAfterConsumerGroupDeleted, ExpireSessionsNext)


class ConsumerGroups:
    name = CONSUMER_GROUP_TYPE
    commands: tuple[type, ...] = CONSUMER_COMMANDS
    also_handles: tuple[type, ...] = CLASSIC_PROTOCOL
    records: tuple[type, ...] = CONSUMER_RECORD_TYPES
    follow_ups: tuple[type, ...] = CONSUMER_FOLLOW_UPS

    def __init__(self, ctx: TypeContext) -> None:
        self.partition = ctx.partition
        self.config = ctx.config
        self.store = ctx.groups
        self.groups = ctx.groups.of_type(ConsumerGroup)  # this type's groups (a view of the one map)
        self.topics = ctx.topics
        self.max_batch_bytes = ctx.max_batch_bytes
        self._dispatch = ctx.handle  # the shard's: a request for a group id this type no longer holds
        self._overrides = ctx.group_config  # consumer.session.timeout.ms, consumer.heartbeat.interval.ms

    def _ctx(self, now_ms: int) -> CCtx:
        return CCtx(self.config, now_ms, Outcome(), self.topics, overrides=self._overrides)

    # -- commands ------------------------------------------------------------------------------

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        if type(cmd) is cc.ConsumerGroupHeartbeat:  # the steady heartbeat: no context, no records
            steady = steady_heartbeat(self.config, self.topics, self.groups, cmd, self._overrides)
            if steady is not None:
                return steady
        ctx = self._ctx(now_ms)
        other = None
        if group is not None and group.__class__ is not ConsumerGroup:
            group, other = None, group  # another type's group: refused (or upgraded) below
        match cmd:
            case cc.ConsumerGroupHeartbeat():
                consumer_group_heartbeat(ctx, self.groups, cmd, self._get_or_create)
            case cc.ConsumerGroupDescribe():
                ctx.out.reply(cmd.reply_to, consumer_group_describe(ctx, group, other, cmd.group_id))
            case cc.ConsumerSessionExpired():
                on_session_expired(ctx, group, cmd)
            case cc.ConsumerRebalanceExpired():
                on_rebalance_expired(ctx, group, cmd)
            case cc.ConsumerClassicTimeout():
                on_classic_timeout(ctx, group, cmd)
            case cc.ConsumerRegexResolve():
                on_resolve_regexes(ctx, group, cmd)
            case ForceRebalance() | ExpireMember() | ExpireSessions() | CoordinatorMove() if group is not None:
                handle_consumer_control(ctx, group, cmd)
            case c.JoinGroup() | c.SyncGroup() | c.Heartbeat() | c.LeaveGroup() if group is not None:
                # the shard sends these here only when their group is a consumer group
                self._classic_protocol(ctx, group, cmd)
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
        existing = self.store.get(group_id)
        if existing.__class__ is ConsumerGroup:
            return existing
        if existing.__class__ is ClassicGroup and not existing.is_state(GroupState.DEAD):
            if create and existing.is_state(GroupState.EMPTY):
                # maybeDeleteEmptyClassicGroup: the empty classic group gives way; its offsets stay.
                ctx.records.append(GroupMetadataTombstone(group_id))
                return ConsumerGroup(group_id)
            if create and validate_online_upgrade(ctx, existing):
                try:
                    return convert_to_consumer_group(ctx, existing)
                except Exception:  # noqa: BLE001 - a member's embedded protocol does not parse
                    raise ApiError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to consumer "
                                   "group because the embedded consumer protocol is malformed.") from None
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if existing is not None and existing.__class__ is not ClassicGroup:
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def offset_committed(self, ctx: Ctx, group: Any, cmd: c.OffsetCommit) -> None:
        return None

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        match follow_up:
            case JoinAfterConsumerGroupDeleted():
                # The empty consumer group is gone: the JoinGroup is now the classic type's, as for a
                # new group; the offsets stay with the group id.
                if error is None:
                    return self._dispatch(follow_up.join, now_ms)
                out = Outcome()
                out.reply(follow_up.join.reply_to, JoinGroupResult(error, follow_up.join.member_id))
                return out
            case DowngradedToClassic():
                # The consumer group became a classic group (online downgrade): its members heartbeat
                # again and rejoin, as Kafka's convertToClassicGroup has them.
                ctx = Ctx(self.config, now_ms, Outcome())
                group = self.store.get(follow_up.group_id)
                if error is None and group.__class__ is ClassicGroup:
                    for member in group.members.values():
                        schedule_heartbeat(ctx, group, member)
                    if follow_up.rebalance:
                        prepare_rebalance(ctx, group, f"downgrade from consumer group: {follow_up.reason}", None)
                return ctx.out
            case ExpireSessionsNext() if follow_up.downgraded is not None:
                out = self.on_write_done(follow_up.downgraded, error, now_ms)
                if error is None and follow_up.remaining:
                    # The rest are the classic group's members now: the classic type ends their sessions.
                    out.merge(self._dispatch(ExpireSessions(follow_up.group_id, follow_up.reply_to), now_ms))
                    return out
                out.merge(on_expire_sessions_next(self._ctx(now_ms), None,
                                                  follow_up, error))
                return out
            case ExpireSessionsNext():
                return on_expire_sessions_next(self._ctx(now_ms),
                                               self.groups.get(follow_up.group_id), follow_up, error)
        raise TypeError(f"not a consumer group follow-up: {follow_up!r}")

    def drop(self, group: ConsumerGroup) -> None:
        group.deleted = True
        if self.store.get(group.group_id) is group:
            self.store.remove(group.group_id)

    def status(self, group: ConsumerGroup, wall_ms: int) -> dict[str, Any]:
        """A consumer group as the HTTP endpoint shows a group. Its members reconcile one by one,
        each at its own epoch: there is no group-wide rebalance in progress to report."""
        return {
            "group_id": group.group_id,
            "group_type": CONSUMER_GROUP_TYPE,
            "state": str(group.state),
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                 "client_host": m.client_host, "member_epoch": m.member_epoch, "state": m.state.name.lower()}
                for m in group.members.values()
            ],
            "rebalance_in_progress": None,
        }

    # -- records -------------------------------------------------------------------------------

    def replay(self, record: Any) -> None:
        replay(self.groups, record, self._create)  # type: ignore[arg-type]

    def offsets_gone_while_loading(self, group: Any) -> None:
        return None

    def _migration_allowed(self) -> bool:
        return self.config.group_consumer_migration_policy.lower() != "disabled"

    def _create(self, group_id: str) -> ConsumerGroup:
        """A consumer group takes the id (from a classic group that gave way or was upgraded, or from
        the simple group that held its offsets): one id, one group; the offsets stay with the id."""
        group = ConsumerGroup(group_id)
        self.store.put(group)
        return group

    # -- loading -------------------------------------------------------------------------------

    def begin_load(self) -> None:
        return None  # the shard empties the store

    def finish_load(self, now_ms: int) -> Outcome:
        """Kafka's onLoaded: every member gets a fresh session timeout, and a member still
        revoking gets its rebalance timeout again."""
        out = Outcome()
        for group in self.groups.values():
            arm_member_timers(out, self.config, group, self._overrides)
        return out

    def unload(self, now_ms: int) -> Outcome:
        out = Outcome()
        for group in self.groups.values():
            cancel_member_timers(out, group)
        return out
