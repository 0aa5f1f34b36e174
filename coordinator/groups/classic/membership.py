"""SyncGroup, Heartbeat, LeaveGroup and the membership timers (heartbeat, pending member, join,
sync), plus the follow-up of the leader's assignment write."""

from __future__ import annotations

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState
from .follow_ups import AssignmentWritten
from .rebalance import (
    Ctx,
    group_metadata_record,
    remove_pending_sync_member,
    reset_and_propagate_assignment_error,
    schedule_heartbeat,
)
from .transitions import (
    complete_join,
    complete_sync,
    maybe_prepare_rebalance_or_complete_join,
    on_initial_join_expired,
    prepare_rebalance,
    remove_member_and_update_group,
    remove_pending_member_and_update_group,
)
from ..results import HeartbeatResult, LeaveGroupResult, LeaveMemberResult, SyncGroupResult

E = ErrorCode
S = GroupState


# -- SyncGroup ------------------------------------------------------------------------------------


def handle_sync_group(ctx: Ctx, group: ClassicGroup | None, cmd: c.SyncGroup) -> None:
    if group is None:
        ctx.out.reply(cmd.reply_to, SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        return
    error = _validate_sync(group, cmd)
    if error is not None:
        ctx.out.reply(cmd.reply_to, SyncGroupResult(error))
        return

    match group.state:
        case S.EMPTY:
            ctx.out.reply(cmd.reply_to, SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        case S.PREPARING_REBALANCE:
            ctx.out.reply(cmd.reply_to, SyncGroupResult(E.REBALANCE_IN_PROGRESS))
        case S.COMPLETING_REBALANCE:
            member = group.get(cmd.member_id)
            member.awaiting_sync = cmd.reply_to
            remove_pending_sync_member(ctx, group, cmd.member_id)
            if group.is_leader(cmd.member_id):
                # Members the leader left out get an empty assignment rather than none.
                given = dict(cmd.assignments)
                assignment = {m: given.get(m, b"") for m in group.members}
                ctx.out.write(
                    [group_metadata_record(group, assignment)],
                    then=AssignmentWritten(
                        group.group_id, group.generation_id, tuple(assignment.items()), cmd.member_id
                    ),
                )
        case S.STABLE:
            member = group.get(cmd.member_id)
            remove_pending_sync_member(ctx, group, cmd.member_id)
            ctx.out.reply(cmd.reply_to, SyncGroupResult(
                E.NONE, group.protocol_type, group.protocol_name, member.assignment
            ))
            schedule_heartbeat(ctx, group, member)
        case _:
            ctx.out.reply(cmd.reply_to, SyncGroupResult(E.COORDINATOR_NOT_AVAILABLE))


def _validate_sync(group: ClassicGroup, cmd: c.SyncGroup) -> ErrorCode | None:
    if group.is_state(S.DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    error = group.validate_member(cmd.member_id, cmd.group_instance_id)
    if error is not None:
        return error
    if cmd.generation_id != group.generation_id:
        return E.ILLEGAL_GENERATION
    if cmd.protocol_type is not None and cmd.protocol_type != group.protocol_type:
        return E.INCONSISTENT_GROUP_PROTOCOL
    if cmd.protocol_name is not None and cmd.protocol_name != group.protocol_name:
        return E.INCONSISTENT_GROUP_PROTOCOL
    return None


def on_assignment_written(ctx: Ctx, group: ClassicGroup | None, done: AssignmentWritten,
                          error: ErrorCode | None) -> None:
    # Only the generation the assignment was computed for may use it.
    if group is None or not group.is_state(S.COMPLETING_REBALANCE) or group.generation_id != done.generation_id:
        return
    if error is not None:
        reset_and_propagate_assignment_error(ctx, group, error)
        maybe_prepare_rebalance_or_complete_join(
            ctx, group,
            f"error {error.name} storing the assignment of generation {done.generation_id}",
            done.leader_id,
        )
        return
    complete_sync(ctx, group, dict(done.assignment))


# -- Heartbeat ------------------------------------------------------------------------------------


def handle_heartbeat(ctx: Ctx, group: ClassicGroup | None, cmd: c.Heartbeat) -> None:
    ctx.out.reply(cmd.reply_to, HeartbeatResult(_heartbeat(ctx, group, cmd)))


def _heartbeat(ctx: Ctx, group: ClassicGroup | None, cmd: c.Heartbeat) -> ErrorCode:
    if group is None:
        return E.UNKNOWN_MEMBER_ID
    if group.is_state(S.DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    error = group.validate_member(cmd.member_id, cmd.group_instance_id)
    if error is not None:
        return error
    if cmd.generation_id != group.generation_id:
        return E.ILLEGAL_GENERATION
    member = group.get(cmd.member_id)
    match group.state:
        case S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        case S.PREPARING_REBALANCE:
            schedule_heartbeat(ctx, group, member)
            return E.REBALANCE_IN_PROGRESS
        case _:
            # CompletingRebalance counts too: clients heartbeat right after their join response.
            schedule_heartbeat(ctx, group, member)
            return E.NONE


# -- LeaveGroup -----------------------------------------------------------------------------------


def handle_leave_group(ctx: Ctx, group: ClassicGroup | None, cmd: c.LeaveGroup) -> None:
    if group is None:
        ctx.out.reply(cmd.reply_to, LeaveGroupResult(E.NONE, tuple(
            LeaveMemberResult(m.member_id, m.group_instance_id, E.UNKNOWN_MEMBER_ID) for m in cmd.members
        )))
        return
    if group.is_state(S.DEAD):
        ctx.out.reply(cmd.reply_to, LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE))
        return
    results = tuple(
        LeaveMemberResult(m.member_id, m.group_instance_id, _leave_one(ctx, group, m)) for m in cmd.members
    )
    ctx.out.reply(cmd.reply_to, LeaveGroupResult(E.NONE, results))


def _leave_one(ctx: Ctx, group: ClassicGroup, leaving: c.LeavingMember) -> ErrorCode:
    if leaving.member_id == c.UNKNOWN_MEMBER_ID:
        # Administrative removal of a static member by its instance id (KIP-345).
        member_id = group.static_member_id(leaving.group_instance_id)
        if member_id is None:
            return E.UNKNOWN_MEMBER_ID
        _remove_leaving_member(ctx, group, member_id, leaving.reason)
        return E.NONE
    if group.is_pending_member(leaving.member_id):
        remove_pending_member_and_update_group(ctx, group, leaving.member_id)
        return E.NONE
    error = group.validate_member(leaving.member_id, leaving.group_instance_id)
    if error is not None:
        return error
    _remove_leaving_member(ctx, group, leaving.member_id, leaving.reason)
    return E.NONE


def _remove_leaving_member(ctx: Ctx, group: ClassicGroup, member_id: str, client_reason: str | None) -> None:
    remove_member_and_update_group(ctx, group, group.get(member_id), f"member {member_id} left", client_reason)


# -- timers ---------------------------------------------------------------------------------------


def on_heartbeat_expired(ctx: Ctx, group: ClassicGroup | None, expiry: c.HeartbeatExpired) -> None:
    if group is None or group.is_state(S.DEAD) or not group.has(expiry.member_id):
        return
    member = group.get(expiry.member_id)
    if not member.has_satisfied_heartbeat():
        remove_member_and_update_group(ctx, group, member, f"session expired for member {member.member_id}")


def on_pending_member_expired(ctx: Ctx, group: ClassicGroup | None, expiry: c.PendingMemberExpired) -> None:
    if group is None or group.is_state(S.DEAD) or not group.is_pending_member(expiry.member_id):
        return
    remove_pending_member_and_update_group(ctx, group, expiry.member_id)


def on_join_expired(ctx: Ctx, group: ClassicGroup | None, expiry: c.JoinExpired | c.InitialJoinExpired) -> None:
    if group is None or not group.is_state(S.PREPARING_REBALANCE):
        return
    if isinstance(expiry, c.InitialJoinExpired):
        on_initial_join_expired(ctx, group, expiry)
    else:
        complete_join(ctx, group)


def on_sync_expired(ctx: Ctx, group: ClassicGroup | None, expiry: c.SyncExpired) -> None:
    """Members that did not send SyncGroup within the rebalance timeout are removed, and the
    group rebalances without them."""
    if group is None or group.generation_id != expiry.generation_id:
        return
    if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
        return
    laggards = sorted(group.pending_sync_members)
    for member_id in laggards:
        group.remove(member_id)
        ctx.out.cancel(c.heartbeat_key(group.group_id, member_id))
    prepare_rebalance(ctx, group, f"members {', '.join(laggards)} did not sync in time", None)
