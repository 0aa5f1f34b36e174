"""The classic group's state changes, all of them: which event moves a group from which state to
which. Handlers (join.py, membership.py, offsets.py, admin.py, controls.py) decide what an event
means for members and answers; they change the state only through the functions here, and
`ClassicGroup.transition_to` refuses a move its VALID_PREVIOUS_STATES table (the seeds') does not
allow.

    from                           event                                          to
    Empty                          JoinGroup of a first member                    PreparingRebalance
                                   (waits group.initial.rebalance.delay.ms)       (prepare_rebalance)
    Stable, CompletingRebalance    JoinGroup of a new member or with new          PreparingRebalance
                                   metadata; LeaveGroup; session, pending-member  (prepare_rebalance)
                                   or SyncGroup timeout; the leader's assignment
                                   failed to be written; a test control; a group
                                   loaded over group.max.size; a downgrade
    PreparingRebalance             every member rejoined (after a join or a       CompletingRebalance,
                                   removal: maybe_complete_join_phase), the       or Empty if nobody
                                   rebalance timeout (JoinExpired), the initial   is left (complete_join,
                                   delay with no newcomer (InitialJoinExpired)    init_next_generation)
    CompletingRebalance            the leader's assignment is durable             Stable (complete_sync)
    any                            DeleteGroups, expired offsets of an empty      Dead (mark_dead)
                                   group, unload, conversion to a consumer group

A rule that must hold on every path lives in the one function all those paths call: the initial
delay in `maybe_complete_join_phase`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState, RebalanceInProgress
from .member import Member
from ..events import RebalanceCompleted
from .follow_ups import EmptyGroupWritten
from .rebalance import (
    Ctx,
    cancel_heartbeat,
    group_metadata_record,
    join_result,
    remove_sync_expiration,
    reset_and_propagate_assignment_error,
    schedule_heartbeat,
    set_and_propagate_assignment,
)
from ..results import JoinGroupResult, SyncGroupResult

E = ErrorCode
S = GroupState


# -- into PreparingRebalance ----------------------------------------------------------------------


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


# -- out of PreparingRebalance: the join phase ends ----------------------------------------------


def maybe_complete_join_else_schedule(ctx: Ctx, group: ClassicGroup) -> None:
    if group.has_all_members_joined():
        complete_join(ctx, group)
    else:
        ctx.out.schedule(c.join_key(group.group_id), group.rebalance_timeout_ms(), c.JoinExpired(group.group_id))


def maybe_complete_join_phase(ctx: Ctx, group: ClassicGroup, *, member_removed: bool = False) -> None:
    """Complete the join phase now if every member is in. Every path that may end a join phase
    early comes through here, so the initial-delay rule holds on all of them:

    - a member *arriving* while a new (or emptied) group waits out its initial delay never
      completes the phase: the delay (InitialJoinExpired, re-armed while newcomers arrive) does;
    - a member *removed* during the initial delay (LeaveGroup, its pending or session timeout,
      a test control) completes it at once if everyone left has joined. This is Kafka 4's Java
      coordinator (removeMemberAndUpdateClassicGroup / removePendingMemberAndUpdateClassicGroup
      check only hasAllMembersJoined); the seeds' Scala coordinator waits for the delay there
      too. We follow Java: it is what clients of a current broker see, and the remaining members
      would otherwise wait for a delay that only exists to gather newcomers.
      (tests/unit/test_coordinator_join.py: test_a_leave_during_the_initial_delay_completes_the_join)
    """
    if not group.is_state(S.PREPARING_REBALANCE):
        return
    if group.previous_state is S.EMPTY and not member_removed:
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


# -- member removal (a removal can end a join phase) ----------------------------------------------


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
    else:
        maybe_complete_join_phase(ctx, group, member_removed=True)


def remove_pending_member_and_update_group(ctx: Ctx, group: ClassicGroup, member_id: str) -> None:
    group.remove(member_id)
    ctx.out.cancel(c.pending_key(group.group_id, member_id))
    maybe_complete_join_phase(ctx, group, member_removed=True)


# -- into Stable and Dead -------------------------------------------------------------------------


def complete_sync(ctx: Ctx, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
    """The leader's assignment is durable: every member parked in SyncGroup gets its share."""
    set_and_propagate_assignment(ctx, group, assignment)
    group.transition_to(S.STABLE, ctx.now_ms)


def mark_dead(group: ClassicGroup, now_ms: int) -> None:
    group.transition_to(S.DEAD, now_ms)
