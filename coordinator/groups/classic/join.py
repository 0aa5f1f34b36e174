"""JoinGroup (handleJoinGroup, doUnknownJoinGroup / doJoinGroup, static membership)."""

from __future__ import annotations

from collections.abc import Callable

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState
from .member import Member
from .follow_ups import StaticMemberReplaced
from .rebalance import Ctx, cancel_heartbeat, group_metadata_record, join_result, schedule_heartbeat
from .transitions import maybe_complete_join_phase, maybe_prepare_rebalance_or_complete_join, prepare_rebalance
from ..results import JoinGroupResult, SyncGroupResult

E = ErrorCode
S = GroupState

GroupLookup = Callable[[str], ClassicGroup | None]
GroupFactory = Callable[[str], ClassicGroup]
MemberIdFactory = Callable[[str], str]


def _error(cmd: c.JoinGroup, code: ErrorCode, member_id: str | None = None) -> JoinGroupResult:
    return JoinGroupResult(code, member_id=cmd.member_id if member_id is None else member_id)


def handle_join_group(
    ctx: Ctx, cmd: c.JoinGroup, lookup: GroupLookup, create: GroupFactory, new_member_id: MemberIdFactory
) -> None:
    cfg = ctx.config
    if not cfg.group_min_session_timeout_ms <= cmd.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        ctx.out.reply(cmd.reply_to, _error(cmd, E.INVALID_SESSION_TIMEOUT))
        return

    is_unknown_member = cmd.member_id == c.UNKNOWN_MEMBER_ID
    group = lookup(cmd.group_id)
    if group is None:
        # Only a member without an id may create a group; a known id for an unknown group is stale.
        if not is_unknown_member:
            ctx.out.reply(cmd.reply_to, _error(cmd, E.UNKNOWN_MEMBER_ID))
            return
        group = create(cmd.group_id)

    if not accept_joining_member(group, cmd.member_id, cfg.group_max_size):
        if group.has(cmd.member_id):
            group.remove(cmd.member_id)
            cancel_heartbeat(ctx, group, cmd.member_id)
        ctx.out.reply(cmd.reply_to, _error(cmd, E.GROUP_MAX_SIZE_REACHED, c.UNKNOWN_MEMBER_ID))
    elif is_unknown_member:
        do_unknown_join_group(ctx, group, cmd, new_member_id)
    else:
        do_join_group(ctx, group, cmd)

    # Whatever happened, the join phase may now be complete (handleJoinGroup's checkAndComplete).
    maybe_complete_join_phase(ctx, group)


def accept_joining_member(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    """Whether the group has room for this member (acceptJoiningMember's three cases)."""
    if group.state in (S.EMPTY, S.DEAD):
        return True
    if group.is_state(S.PREPARING_REBALANCE):
        # Counting members awaiting join (not the size) lets a group that grew beyond a lowered
        # max size shed the members that rejoin last.
        existing_waiting = group.has(member_id) and group.get(member_id).is_awaiting_join
        return existing_waiting or group.num_members_awaiting_join < max_size
    # CompletingRebalance / Stable: members that do not rejoin are dropped at the next
    # completion, so the current size is the right measure.
    return group.has(member_id) or group.size < max_size


def do_unknown_join_group(ctx: Ctx, group: ClassicGroup, cmd: c.JoinGroup, new_member_id: MemberIdFactory) -> None:
    if group.is_state(S.DEAD):
        # The group was just removed (partition moved, group deleted): find the coordinator again.
        ctx.out.reply(cmd.reply_to, _error(cmd, E.COORDINATOR_NOT_AVAILABLE, c.UNKNOWN_MEMBER_ID))
        return
    if not group.supports_protocols(cmd.protocol_type, frozenset(n for n, _ in cmd.protocols)):
        ctx.out.reply(cmd.reply_to, _error(cmd, E.INCONSISTENT_GROUP_PROTOCOL, c.UNKNOWN_MEMBER_ID))
        return

    member_id = new_member_id(cmd.group_instance_id if cmd.group_instance_id is not None else cmd.client_id)
    if cmd.group_instance_id is not None:
        old_member_id = group.static_member_id(cmd.group_instance_id)
        if old_member_id is not None:
            update_static_member_and_rebalance(ctx, group, cmd, old_member_id, member_id)
        else:
            add_member_and_rebalance(ctx, group, cmd, member_id)
    elif cmd.require_known_member_id:
        # JoinGroup v4+: hand out an id and make the client come back with it, so that a client
        # retrying a timed-out join does not leave ghost members behind.
        group.add_pending_member(member_id)
        ctx.out.schedule(
            c.pending_key(group.group_id, member_id),
            cmd.session_timeout_ms,
            c.PendingMemberExpired(group.group_id, member_id),
        )
        ctx.out.reply(cmd.reply_to, _error(cmd, E.MEMBER_ID_REQUIRED, member_id))
    else:
        add_member_and_rebalance(ctx, group, cmd, member_id)


def do_join_group(ctx: Ctx, group: ClassicGroup, cmd: c.JoinGroup) -> None:
    member_id = cmd.member_id
    if group.is_state(S.DEAD):
        ctx.out.reply(cmd.reply_to, _error(cmd, E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(cmd.protocol_type, frozenset(n for n, _ in cmd.protocols)):
        ctx.out.reply(cmd.reply_to, _error(cmd, E.INCONSISTENT_GROUP_PROTOCOL))
        return
    if group.is_pending_member(member_id):
        if cmd.group_instance_id is not None:
            # Pending ids are only given to dynamic members; Kafka treats this as a bug.
            ctx.out.reply(cmd.reply_to, _error(cmd, E.UNKNOWN_MEMBER_ID))
            return
        ctx.out.cancel(c.pending_key(group.group_id, member_id))
        add_member_and_rebalance(ctx, group, cmd, member_id)
        return

    error = group.validate_member(member_id, cmd.group_instance_id)
    if error is not None:
        ctx.out.reply(cmd.reply_to, _error(cmd, error))
        return

    member = group.get(member_id)
    match group.state:
        case S.PREPARING_REBALANCE:
            update_member_and_rebalance(ctx, group, member, cmd, f"member {member_id} joined")
        case S.COMPLETING_REBALANCE:
            if member.matches(cmd.protocols):
                # It probably missed the JoinGroup response: send the current generation again.
                ctx.out.reply(cmd.reply_to, join_result(group, member, with_members=group.is_leader(member_id)))
            else:
                update_member_and_rebalance(ctx, group, member, cmd, f"member {member_id} updated its metadata")
        case S.STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to get a rebalance for changes the metadata does not show
                # (for consumers: new partitions of subscribed topics).
                update_member_and_rebalance(ctx, group, member, cmd, f"leader {member_id} rejoined")
            elif not member.matches(cmd.protocols):
                update_member_and_rebalance(ctx, group, member, cmd, f"member {member_id} updated its metadata")
            else:
                ctx.out.reply(cmd.reply_to, join_result(group, member, with_members=False))
        case _:
            ctx.out.reply(cmd.reply_to, _error(cmd, E.UNKNOWN_MEMBER_ID))


def add_member_and_rebalance(ctx: Ctx, group: ClassicGroup, cmd: c.JoinGroup, member_id: str) -> None:
    member = Member(
        member_id=member_id,
        group_instance_id=cmd.group_instance_id,
        client_id=cmd.client_id,
        client_host=cmd.client_host,
        rebalance_timeout_ms=cmd.rebalance_timeout_ms,
        session_timeout_ms=cmd.session_timeout_ms,
        protocol_type=cmd.protocol_type,
        protocols=cmd.protocols,
        is_new=True,
    )
    # Members arriving while a brand-new group waits out its initial delay extend the delay.
    if group.is_state(S.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True
    group.add(member, cmd.reply_to)
    # A new member cannot heartbeat while its JoinGroup is parked, so it gets the new-member join
    # timeout; if its client gave up and retries, the defunct member eventually goes away.
    schedule_heartbeat(ctx, group, member, ctx.config.new_member_join_timeout_ms)
    maybe_prepare_rebalance_or_complete_join(ctx, group, f"member {member_id} joined", member_id, cmd.reason)


def update_member_and_rebalance(ctx: Ctx, group: ClassicGroup, member: Member, cmd: c.JoinGroup, reason: str) -> None:
    group.update_member(member, cmd.protocols, cmd.rebalance_timeout_ms, cmd.session_timeout_ms, cmd.reply_to)
    maybe_prepare_rebalance_or_complete_join(ctx, group, reason, member.member_id, cmd.reason)


def update_static_member_and_rebalance(
    ctx: Ctx, group: ClassicGroup, cmd: c.JoinGroup, old_member_id: str, new_member_id: str
) -> None:
    """A static member came back without its member id: it takes over its old slot."""
    instance_id = cmd.group_instance_id
    assert instance_id is not None
    previous_leader = group.leader_id or ""
    old = group.get(old_member_id)
    # Whoever is still parked under the old id is a zombie duplicate: fence it.
    ctx.out.reply(group.take_join_handle(old), JoinGroupResult(E.FENCED_INSTANCE_ID, member_id=old_member_id))
    ctx.out.reply(group.take_sync_handle(old), SyncGroupResult(E.FENCED_INSTANCE_ID))
    old_protocols, old_rebalance, old_session = old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms

    member = group.replace_static_member(instance_id, old_member_id, new_member_id)
    cancel_heartbeat(ctx, group, old_member_id)
    schedule_heartbeat(ctx, group, member)
    group.update_member(member, cmd.protocols, cmd.rebalance_timeout_ms, cmd.session_timeout_ms, cmd.reply_to)

    match group.state:
        case S.STABLE:
            if group.protocol_name == group.select_protocol():
                # No rebalance: persist the new member id, then answer (see StaticMemberReplaced).
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                ctx.out.write(
                    [group_metadata_record(group, assignment)],
                    then=StaticMemberReplaced(
                        group.group_id, instance_id, old_member_id, new_member_id, old_protocols,
                        old_rebalance, old_session, previous_leader, cmd.supports_skip_assignment,
                    ),
                )
            else:
                maybe_prepare_rebalance_or_complete_join(
                    ctx, group, f"member {new_member_id} updated its metadata", new_member_id, cmd.reason
                )
        case S.COMPLETING_REBALANCE:
            # The leader may already be computing an assignment for the old id; start over.
            prepare_rebalance(ctx, group, f"member {new_member_id} updated its metadata", new_member_id, cmd.reason)
        case _:
            pass  # PreparingRebalance: the member now simply waits for the join phase to end


def on_static_member_replaced(ctx: Ctx, group: ClassicGroup | None, done: StaticMemberReplaced,
                              error: ErrorCode | None) -> None:
    if group is None or not group.has(done.new_member_id):
        return
    member = group.get(done.new_member_id)
    if error is not None:
        # The new id was not persisted: put the old member back as it was and refuse the join.
        handle = group.take_join_handle(member)
        group.update_member(member, done.old_protocols, done.old_rebalance_timeout_ms, done.old_session_timeout_ms, None)
        restored = group.replace_static_member(done.instance_id, done.new_member_id, done.old_member_id)
        cancel_heartbeat(ctx, group, done.new_member_id)
        schedule_heartbeat(ctx, group, restored)
        ctx.out.reply(handle, JoinGroupResult(
            error, member_id=c.UNKNOWN_MEMBER_ID, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader_id=done.previous_leader_id,
        ))
        return
    handle = group.take_join_handle(member)
    if done.supports_skip_assignment:
        # JoinGroup v9+: a static leader learns it is the leader but must not reassign while the
        # group is Stable (the result would never be distributed).
        is_leader = group.is_leader(member.member_id)
        result = join_result(group, member, with_members=is_leader)
        ctx.out.reply(handle, JoinGroupResult(
            result.error, result.member_id, result.generation_id, result.protocol_type,
            result.protocol_name, result.leader_id, skip_assignment=is_leader, members=result.members,
        ))
    else:
        # Older clients: report the previous leader id so a returning leader does not believe it
        # must compute an assignment nobody would receive.
        result = join_result(group, member, with_members=False)
        ctx.out.reply(handle, JoinGroupResult(
            result.error, result.member_id, result.generation_id, result.protocol_type,
            result.protocol_name, done.previous_leader_id,
        ))

