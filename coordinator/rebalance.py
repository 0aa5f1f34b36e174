"""The rebalance life cycle shared by every handler: prepare, complete the join phase, remove
members, propagate assignments. Completion is *checked* after each change rather than watched.

Every function mutates the in-memory group and appends its decisions to `ctx.out`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol.errors import ErrorCode

from . import commands as c
from .config import GroupConfig
from .group import ClassicGroup, GroupState, RebalanceInProgress
from .member import Member
from .outcome import EmptyGroupWritten, Outcome, RebalanceCompleted
from .records import GroupMetadataMember, GroupMetadataRecord
from .results import JoinGroupMember, JoinGroupResult, SyncGroupResult

E = ErrorCode
S = GroupState


@dataclass(slots=True)
class Ctx:
    """What a handler needs besides the group: settings, the time, where decisions go."""

    config: GroupConfig
    now_ms: int
    out: Outcome


# -- timers ---------------------------------------------------------------------------------------


def schedule_heartbeat(ctx: Ctx, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
    """(Re)arm the member's liveness deadline: session timeout, or the given one."""
    ctx.out.schedule(
        c.heartbeat_key(group.group_id, member.member_id),
        member.session_timeout_ms if timeout_ms is None else timeout_ms,
        c.HeartbeatExpired(group.group_id, member.member_id),
    )


def cancel_heartbeat(ctx: Ctx, group: ClassicGroup, member_id: str) -> None:
    ctx.out.cancel(c.heartbeat_key(group.group_id, member_id))


def remove_sync_expiration(ctx: Ctx, group: ClassicGroup) -> None:
    group.pending_sync_members.clear()
    ctx.out.cancel(c.sync_key(group.group_id))


def remove_pending_sync_member(ctx: Ctx, group: ClassicGroup, member_id: str) -> None:
    group.pending_sync_members.discard(member_id)
    if not group.pending_sync_members:
        ctx.out.cancel(c.sync_key(group.group_id))


# -- records --------------------------------------------------------------------------------------


def group_metadata_record(group: ClassicGroup, assignment: Mapping[str, bytes]) -> GroupMetadataRecord:
    protocol = group.protocol_name
    members = tuple(
        GroupMetadataMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(protocol) if protocol is not None else b"",
            assignment=assignment.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    return GroupMetadataRecord(
        group=group.group_id,
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp=(
            -1 if group.current_state_timestamp is None else group.current_state_timestamp
        ),
        members=members,
    )


# -- join phase -----------------------------------------------------------------------------------


def join_result(group: ClassicGroup, member: Member, *, with_members: bool) -> JoinGroupResult:
    members: tuple[JoinGroupMember, ...] = ()
    if with_members and group.protocol_name is not None:
        members = tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )
    return JoinGroupResult(
        E.NONE,
        member_id=member.member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        members=members,
    )


def maybe_prepare_rebalance_or_complete_join(
    ctx: Ctx, group: ClassicGroup, reason: str, trigger: str | None, client_reason: str | None = None
) -> None:
    if group.can_rebalance():
        prepare_rebalance(ctx, group, reason, trigger, client_reason)
    else:
        maybe_complete_join_phase(ctx, group)


def prepare_rebalance(
    ctx: Ctx, group: ClassicGroup, reason: str, trigger: str | None, client_reason: str | None = None
) -> None:
    if group.is_state(S.COMPLETING_REBALANCE):
        # Members parked in SyncGroup must rejoin: their assignment is void.
        reset_and_propagate_assignment_error(ctx, group, E.REBALANCE_IN_PROGRESS)
    remove_sync_expiration(ctx, group)

    initial = group.is_state(S.EMPTY)
    if initial:
        # A new (or emptied) group waits a little so that members starting together land in one
        # generation; the wait is re-armed while new members keep arriving (InitialJoinExpired).
        delay = ctx.config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        ctx.out.schedule(c.join_key(group.group_id), delay, c.InitialJoinExpired(group.group_id, delay, remaining))

    group.transition_to(S.PREPARING_REBALANCE, ctx.now_ms)
    group.rebalance = RebalanceInProgress(ctx.now_ms, reason, trigger, client_reason)
    if not initial:
        maybe_complete_join_else_schedule(ctx, group)


def maybe_complete_join_else_schedule(ctx: Ctx, group: ClassicGroup) -> None:
    if group.has_all_members_joined():
        complete_join(ctx, group)
    else:
        ctx.out.schedule(c.join_key(group.group_id), group.rebalance_timeout_ms(), c.JoinExpired(group.group_id))


def maybe_complete_join_phase(ctx: Ctx, group: ClassicGroup) -> None:
    """Complete the join phase now if everyone is in, except during the initial delay."""
    if not group.is_state(S.PREPARING_REBALANCE):
        return
    if group.previous_state is S.EMPTY:
        return  # the initial delay decides when an initial rebalance completes
    if group.has_all_members_joined():
        complete_join(ctx, group)


def on_initial_join_expired(ctx: Ctx, group: ClassicGroup, expiry: c.InitialJoinExpired) -> None:
    if not group.is_state(S.PREPARING_REBALANCE):
        return
    if group.new_member_added and expiry.remaining_ms != 0:
        group.new_member_added = False
        delay = min(ctx.config.group_initial_rebalance_delay_ms, expiry.remaining_ms)
        remaining = max(expiry.remaining_ms - expiry.delay_ms, 0)
        ctx.out.schedule(c.join_key(group.group_id), delay, c.InitialJoinExpired(group.group_id, delay, remaining))
    else:
        complete_join(ctx, group)


def complete_join(ctx: Ctx, group: ClassicGroup) -> None:
    """End the join phase: drop dynamic members that did not rejoin, start the next generation,
    answer every parked JoinGroup (the member list only to the leader), wait for SyncGroups."""
    gid = group.group_id
    ctx.out.cancel(c.join_key(gid))
    for member in group.not_yet_rejoined_members():
        if not member.is_static:
            group.remove(member.member_id)
            cancel_heartbeat(ctx, group, member.member_id)

    if group.is_state(S.DEAD):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined (only static members remain): wait another rebalance timeout; their
        # session timeouts will eventually remove them.
        ctx.out.schedule(c.join_key(gid), group.rebalance_timeout_ms(), c.JoinExpired(gid))
        return

    old_generation = group.generation_id
    group.init_next_generation(ctx.now_ms)
    _report_rebalance(ctx, group, old_generation)

    if group.is_state(S.EMPTY):
        ctx.out.write(
            [group_metadata_record(group, {})],
            then=EmptyGroupWritten(gid, group.generation_id),
        )
        return

    for member in group.members.values():
        handle = group.take_join_handle(member)
        ctx.out.reply(handle, join_result(group, member, with_members=group.is_leader(member.member_id)))
        schedule_heartbeat(ctx, group, member)
        member.is_new = False
        group.pending_sync_members.add(member.member_id)
    ctx.out.schedule(c.sync_key(gid), group.rebalance_timeout_ms(), c.SyncExpired(gid, group.generation_id))


def _report_rebalance(ctx: Ctx, group: ClassicGroup, old_generation: int) -> None:
    before = group.generation_members
    after = tuple(group.members)
    info = group.rebalance
    group.rebalance = None
    group.generation_members = after
    ctx.out.events.append(RebalanceCompleted(
        group_id=group.group_id,
        old_generation=old_generation,
        new_generation=group.generation_id,
        reason=info.reason if info else "unknown",
        client_reason=info.client_reason if info else None,
        trigger_member=info.trigger_member if info else None,
        members_in=tuple(m for m in after if m not in before),
        members_out=tuple(m for m in before if m not in after),
        member_count=len(after),
        duration_ms=ctx.now_ms - info.started_ms if info else 0,
    ))


# -- member removal -------------------------------------------------------------------------------


def remove_member_and_update_group(
    ctx: Ctx, group: ClassicGroup, member: Member, reason: str, client_reason: str | None = None
) -> None:
    # A new member may be removed while its JoinGroup is parked: answer it so the client retries.
    handle = group.take_join_handle(member)
    ctx.out.reply(handle, JoinGroupResult(E.UNKNOWN_MEMBER_ID))
    # Kafka leaves a parked SyncGroup of a removed member unanswered; we answer it so that no
    # caller waits forever on a member that no longer exists.
    ctx.out.reply(group.take_sync_handle(member), SyncGroupResult(E.UNKNOWN_MEMBER_ID))
    group.remove(member.member_id)
    cancel_heartbeat(ctx, group, member.member_id)

    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(ctx, group, reason, member.member_id, client_reason)
    elif group.is_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
        complete_join(ctx, group)


def remove_pending_member_and_update_group(ctx: Ctx, group: ClassicGroup, member_id: str) -> None:
    group.remove(member_id)
    ctx.out.cancel(c.pending_key(group.group_id, member_id))
    if group.is_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
        complete_join(ctx, group)


# -- sync phase -----------------------------------------------------------------------------------


def reset_and_propagate_assignment_error(ctx: Ctx, group: ClassicGroup, error: ErrorCode) -> None:
    if not group.is_state(S.COMPLETING_REBALANCE):
        raise ValueError(f"group {group.group_id} is {group.state}, not CompletingRebalance")
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(ctx, group, error)


def propagate_assignment(ctx: Ctx, group: ClassicGroup, error: ErrorCode) -> None:
    ok = error is E.NONE
    for member in group.members.values():
        handle = group.take_sync_handle(member)
        if handle is None:
            continue
        ctx.out.reply(handle, SyncGroupResult(
            error,
            protocol_type=group.protocol_type if ok else None,
            protocol_name=group.protocol_name if ok else None,
            assignment=member.assignment,
        ))
        # A member parked in SyncGroup was spared by its heartbeat deadline; restart it now.
        schedule_heartbeat(ctx, group, member)


def set_and_propagate_assignment(ctx: Ctx, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
    for member in group.members.values():
        member.assignment = assignment.get(member.member_id, b"")
    propagate_assignment(ctx, group, E.NONE)
