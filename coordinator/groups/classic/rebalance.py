"""What the classic group's handlers share besides its state changes (those live in
transitions.py): liveness timers, the GroupMetadata record, JoinGroup answers,
assignment propagation to parked SyncGroups.

Every function mutates the in-memory group and appends its decisions to `ctx.out`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState
from .member import Member
from ...runtime.outcome import ScheduleTimer
from ..context import Ctx
from ....protocol.records.classic_records import GroupMetadataMember, GroupMetadataRecord
from ..results import JoinGroupMember, JoinGroupResult, SyncGroupResult

E = ErrorCode
S = GroupState


# -- timers ---------------------------------------------------------------------------------------


def schedule_heartbeat(ctx: Ctx, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
    """(Re)arm the member's liveness deadline: session timeout, or the given one."""
    if timeout_ms is None:
        op = member.session_timer
        expiry = None if op is None else op.expiry
        if (expiry is None or op.delay_ms != member.session_timeout_ms or expiry.member_id != member.member_id
                or expiry.group_id != group.group_id):  # a static member's id is replaced in place
            op = member.session_timer = ScheduleTimer(
                c.heartbeat_key(group.group_id, member.member_id), member.session_timeout_ms,
                c.HeartbeatExpired(group.group_id, member.member_id))
        ctx.out.timers.append(op)
        return
    ctx.out.schedule(c.heartbeat_key(group.group_id, member.member_id), timeout_ms,
                     c.HeartbeatExpired(group.group_id, member.member_id))


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
