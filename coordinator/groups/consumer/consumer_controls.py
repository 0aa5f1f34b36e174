"""The test controls (controls.py) for a consumer group of the new protocol (KIP-848).

A member's session ends as its session timer would end it: the member is fenced in the control's
own turn (a zero-delay timer instead could be re-armed by a heartbeat handled first, and the member
would survive). Each fence starts from the group the one before left, so ending every session fences
one member, and once its records are durable the next (the follow-up ExpireSessionsNext), all in the
group's turn; the answer follows the last fence.

There is no group-wide rebalance in this protocol (each member reconciles at its own pace), so a
forced rebalance is refused with a pointer to what moves partitions: expiring a member.
"""

from __future__ import annotations

from typing import Any

from ....protocol.errors import ErrorCode

from . import consumer_commands as cc
from .consumer_commands import ExpireSessionsNext
from ...config import GroupConfig
from .consumer_group import ConsumerGroup, GroupConfigLookup, MemberState, no_overrides, session_timeout_ms
from .consumer_heartbeat import CCtx, fence_member, finish
from ..classic.controls import Control, ControlResult, CoordinatorMove, ExpireMember, ExpireSessions, ForceRebalance
from ...runtime.outcome import Outcome

E = ErrorCode


def handle_consumer_control(ctx: CCtx, group: ConsumerGroup, cmd: Control) -> None:
    """The answer follows the fence's records, once they are durable (`finish`)."""
    if isinstance(cmd, ExpireSessions):
        _expire_next(ctx, group, tuple(group.members), 0, cmd.reply_to)
        return
    finish(ctx, cmd.reply_to, _apply(ctx, group, cmd))


def on_expire_sessions_next(ctx: CCtx, group: ConsumerGroup | None, step: ExpireSessionsNext,
                            error: ErrorCode | None) -> Outcome:
    if error is not None:
        ctx.out.reply(step.reply_to, ControlResult(error, f"{step.expired - 1} member(s) expired"))
    elif group is None:
        ctx.out.reply(step.reply_to, ControlResult(E.NONE, f"{step.expired} member(s) expired"))
    else:
        _expire_next(ctx, group, step.remaining, step.expired, step.reply_to)
    return ctx.out


def _expire_next(ctx: CCtx, group: ConsumerGroup, remaining: tuple[str, ...], expired: int, reply_to: Any) -> None:
    """Fence the first of `remaining` still in the group (a member that left meanwhile is already
    gone); its records carry the rest on (ExpireSessionsNext); with none left, answer."""
    while remaining:
        member_id, remaining = remaining[0], remaining[1:]
        member = group.members.get(member_id)
        if member is None:
            continue
        fence_member(ctx, group, member, f"session expired for member {member_id} (test control)")
        if ctx.records:
            ctx.out.write(list(ctx.records), then=ExpireSessionsNext(group.group_id, remaining, expired + 1, reply_to,
                                                                      ctx.then))
            ctx.records.clear()
            ctx.then = None
            return
        expired += 1
    ctx.out.reply(reply_to, ControlResult(E.NONE, f"{expired} member(s) expired"))


def _apply(ctx: CCtx, group: ConsumerGroup, cmd: Control) -> ControlResult:
    match cmd:
        case ForceRebalance():
            return ControlResult(E.INVALID_REQUEST, f"group {group.group_id} is a consumer group (KIP-848): its "
                                                    "members reconcile one by one, there is no group-wide rebalance "
                                                    "to force; expire a member to move its partitions")
        case ExpireMember():
            member = group.members.get(cmd.member_id)
            if member is None:
                return ControlResult(E.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no member {cmd.member_id}")
            fence_member(ctx, group, member, f"session expired for member {cmd.member_id} (test control)")
            return ControlResult(E.NONE, f"member {cmd.member_id} expired")
        case ExpireSessions():
            raise AssertionError("handle_consumer_control answers ExpireSessions itself")
        case CoordinatorMove():
            if cmd.phase == "unload":
                cancel_member_timers(ctx.out, group)
            else:
                arm_member_timers(ctx.out, ctx.config, group, ctx.overrides)
            return ControlResult(E.NONE, f"coordinator {cmd.phase}ed group {group.group_id}")
    raise TypeError(f"unknown control {type(cmd).__name__}")


def arm_member_timers(out: Outcome, config: GroupConfig, group: ConsumerGroup,
                      overrides: GroupConfigLookup = no_overrides) -> None:
    """Kafka's onLoaded for one group: every member gets a fresh session timeout, and a member
    still revoking gets its rebalance timeout again."""
    for member in group.members.values():
        out.schedule(cc.session_key(group.group_id, member.member_id),
                     member.classic.session_timeout_ms if member.classic is not None
                     else session_timeout_ms(config, overrides, group.group_id),
                     cc.ConsumerSessionExpired(group.group_id, member.member_id))
        if member.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
            out.schedule(cc.rebalance_key(group.group_id, member.member_id), max(member.rebalance_timeout_ms, 0),
                         cc.ConsumerRebalanceExpired(group.group_id, member.member_id, member.member_epoch))


def cancel_member_timers(out: Outcome, group: ConsumerGroup) -> None:
    """What an unloading coordinator forgets: every timer of the group's members."""
    for member_id in group.members:
        for key in (cc.session_key, cc.rebalance_key, cc.join_key, cc.sync_key):
            out.cancel(key(group.group_id, member_id))
