"""Test controls: make a group do on demand what it otherwise does only when clients misbehave.

Two kinds. Commands that change a group (force a rebalance, expire a member's session now,
expire every session) run in the group's turn like any request, through the same rebalance
functions a real expiry or join uses, so clients see exactly what they would see then. Faults
(answer NOT_COORDINATOR for a while, delay JoinGroup answers, fail the next K requests of an
API) are checked before a request reaches its group (`GroupFaults`).

Nothing here is reachable unless the broker runs with `--test-controls`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState
from .member import Handle
from .rebalance import Ctx, cancel_heartbeat, schedule_heartbeat
from .transitions import prepare_rebalance, remove_member_and_update_group
from ..results import ControlResult

E = ErrorCode
S = GroupState


@dataclass(slots=True)
class ForceRebalance:
    is_control = True  # a class attribute, not a field: error_result_for answers with ControlResult
    group_id: str
    reason: str = "requested by test control"
    reply_to: Handle | None = None


@dataclass(slots=True)
class ExpireMember:
    is_control = True  # a class attribute, not a field: error_result_for answers with ControlResult
    group_id: str
    member_id: str
    reply_to: Handle | None = None


@dataclass(slots=True)
class ExpireSessions:
    is_control = True  # a class attribute, not a field: error_result_for answers with ControlResult
    group_id: str
    reply_to: Handle | None = None


@dataclass(slots=True)
class CoordinatorMove:
    """The two ends of a NOT_COORDINATOR window: "unload" stops the members' session timers (the old
    coordinator forgets them), "load" re-arms them from now, as a new coordinator loading the group
    does, so a window longer than the session timeout does not expire members Kafka would keep."""

    is_control = True
    group_id: str
    phase: str  # "unload" or "load"
    reply_to: Handle | None = None


Control = ForceRebalance | ExpireMember | ExpireSessions | CoordinatorMove


def describe(cmd: Control) -> str:
    """The control as a line of the group's history."""
    match cmd:
        case ForceRebalance():
            return f"force a rebalance: {cmd.reason}"
        case ExpireMember():
            return f"expire member {cmd.member_id}"
        case ExpireSessions():
            return "expire every session"
        case CoordinatorMove():
            return f"coordinator {cmd.phase}"
    return type(cmd).__name__


def handle_control(ctx: Ctx, group: ClassicGroup | None, cmd: Control) -> None:
    ctx.out.reply(cmd.reply_to, _apply(ctx, group, cmd))


def _apply(ctx: Ctx, group: ClassicGroup | None, cmd: Control) -> ControlResult:
    if group is None or group.is_state(S.DEAD):
        return ControlResult(E.GROUP_ID_NOT_FOUND, f"group {cmd.group_id} does not exist")
    match cmd:
        case ForceRebalance():
            if group.is_state(S.EMPTY):
                return ControlResult(E.INVALID_REQUEST, f"group {group.group_id} is Empty: nothing to rebalance")
            if group.is_state(S.PREPARING_REBALANCE):
                return ControlResult(E.NONE, f"group {group.group_id} is already rebalancing")
            prepare_rebalance(ctx, group, f"forced by test control: {cmd.reason}", None, cmd.reason)
            return ControlResult(E.NONE, f"group {group.group_id} is rebalancing")
        case ExpireMember():
            member = group.members.get(cmd.member_id)
            if member is None:
                return ControlResult(E.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no member {cmd.member_id}")
            remove_member_and_update_group(
                ctx, group, member, f"session expired for member {member.member_id} (test control)"
            )
            return ControlResult(E.NONE, f"member {cmd.member_id} expired")
        case ExpireSessions():
            ids = list(group.members)
            for member_id in ids:
                if group.has(member_id):
                    remove_member_and_update_group(
                        ctx, group, group.get(member_id), f"session expired for member {member_id} (test control)"
                    )
            return ControlResult(E.NONE, f"{len(ids)} member(s) expired")
        case CoordinatorMove():
            for member in group.members.values():
                if cmd.phase == "unload":
                    cancel_heartbeat(ctx, group, member.member_id)
                else:
                    schedule_heartbeat(ctx, group, member)
            return ControlResult(E.NONE, f"coordinator {cmd.phase}ed group {group.group_id}")
    raise TypeError(f"unknown control {type(cmd).__name__}")


# -- faults checked before a request reaches its group --------------------------------------------

_API_NAMES = {
    c.JoinGroup: "JoinGroup", c.SyncGroup: "SyncGroup", c.Heartbeat: "Heartbeat", c.LeaveGroup: "LeaveGroup",
    c.OffsetCommit: "OffsetCommit", c.OffsetFetch: "OffsetFetch", c.OffsetDelete: "OffsetDelete",
    c.DescribeGroup: "DescribeGroups", c.DeleteGroup: "DeleteGroups",
}
API_NAMES = frozenset(_API_NAMES.values())


def api_name(cmd: object) -> str | None:
    return _API_NAMES.get(type(cmd))


@dataclass(slots=True)
class GroupFaults:
    """Per-group faults, keyed by group id; times are monotonic milliseconds."""

    not_coordinator_until: dict[str, int] = field(default_factory=dict)
    join_delay_ms: dict[str, int] = field(default_factory=dict)
    fail_next: dict[tuple[str, str], list] = field(default_factory=dict)  # (group, api) -> [count, error]

    def precheck(self, cmd: object, now_ms: int) -> ErrorCode | None:
        group_id = getattr(cmd, "group_id", None)
        if not isinstance(group_id, str) or not self or getattr(cmd, "is_control", False):
            return None
        until = self.not_coordinator_until.get(group_id)
        if until is not None:
            if now_ms < until:
                return E.NOT_COORDINATOR
            del self.not_coordinator_until[group_id]
        name = api_name(cmd)
        pending = self.fail_next.get((group_id, name)) if name else None
        if name and pending is not None:
            pending[0] -= 1
            if pending[0] <= 0:
                del self.fail_next[(group_id, name)]
            return pending[1]
        return None

    def join_delay_s(self, cmd: object) -> float:
        if not isinstance(cmd, c.JoinGroup):
            return 0.0
        return self.join_delay_ms.get(cmd.group_id, 0) / 1000

    def clear(self) -> None:
        self.not_coordinator_until.clear()
        self.join_delay_ms.clear()
        self.fail_next.clear()

    def __bool__(self) -> bool:
        return bool(self.not_coordinator_until or self.join_delay_ms or self.fail_next)
