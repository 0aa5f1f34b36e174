"""rebalance.schedule_heartbeat keeps one session-timer op per member and makes a new one when what it
names changes: the session timeout (a rejoin with another one) or the member id (a static member
replaced in place)."""

from __future__ import annotations

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.classic.group import ClassicGroup
from kbroker.coordinator.groups.classic.member import Member
from kbroker.coordinator.runtime.outcome import Outcome, ScheduleTimer
from kbroker.coordinator.groups.classic.rebalance import Ctx, schedule_heartbeat


def armed(group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> ScheduleTimer:
    ctx = Ctx(GroupConfig(), 0, Outcome())
    schedule_heartbeat(ctx, group, member, timeout_ms)
    [op] = ctx.out.timers
    assert isinstance(op, ScheduleTimer)
    return op


def test_one_op_per_member_until_what_it_names_changes() -> None:
    group = ClassicGroup("g", 0)
    member = Member("m1", "static-1", "client", "host", 30_000, 10_000, "consumer", (("range", b""),))
    group.add(member)
    first = armed(group, member)
    assert first == ScheduleTimer(c.heartbeat_key("g", "m1"), 10_000, c.HeartbeatExpired("g", "m1"))
    assert armed(group, member) is first
    member.session_timeout_ms = 20_000
    longer = armed(group, member)
    assert (longer.delay_ms, longer.key) == (20_000, c.heartbeat_key("g", "m1"))
    group.replace_static_member("static-1", "m1", "m2")
    assert armed(group, member) == ScheduleTimer(c.heartbeat_key("g", "m2"), 20_000, c.HeartbeatExpired("g", "m2"))
    # an explicit timeout (a pending member's) is its own op and leaves the member's alone
    assert armed(group, member, 5_000).delay_ms == 5_000
    assert armed(group, member).delay_ms == 20_000
