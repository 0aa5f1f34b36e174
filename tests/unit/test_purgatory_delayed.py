"""Delayed operations complete exactly once, by condition or by expiry."""

from __future__ import annotations

from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.delayed import DelayedOperation, Purgatory
from kbroker.purgatory.timers import KeyedTimers


class WaitForBytes(DelayedOperation):
    def __init__(self, deadline_ms: int, available: dict[str, int], need: int) -> None:
        super().__init__(deadline_ms)
        self.available = available
        self.need = need
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        if self.available["bytes"] >= self.need:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def _setup() -> tuple[ManualClock, KeyedTimers, Purgatory[WaitForBytes]]:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    return clock, timers, Purgatory(timers, "fetch")


def test_completes_immediately_when_condition_already_holds() -> None:
    _, _, purgatory = _setup()
    op = WaitForBytes(100, {"bytes": 10}, need=5)
    assert purgatory.try_complete_else_watch(op, ["t-0"]) is True
    assert op.completions == 1
    assert purgatory.watched("t-0") == 0


def test_check_and_complete_completes_once() -> None:
    clock, timers, purgatory = _setup()
    data = {"bytes": 0}
    op = WaitForBytes(100, data, need=5)
    assert purgatory.try_complete_else_watch(op, ["t-0", "t-1"]) is False
    assert purgatory.check_and_complete("t-0") == 0
    data["bytes"] = 5
    assert purgatory.check_and_complete("t-0") == 1
    assert purgatory.check_and_complete("t-1") == 0  # same op, other key: not twice
    clock.advance(200)
    timers.advance_to(clock.now_ms())
    assert (op.completions, op.expirations) == (1, 0)


def test_expiry_completes_once_and_later_checks_do_nothing() -> None:
    clock, timers, purgatory = _setup()
    data = {"bytes": 0}
    op = WaitForBytes(100, data, need=5)
    purgatory.try_complete_else_watch(op, ["t-0"])
    clock.advance(99)
    timers.advance_to(clock.now_ms())
    assert op.completions == 0
    clock.advance(1)
    timers.advance_to(clock.now_ms())
    assert (op.completions, op.expirations) == (1, 1)
    data["bytes"] = 100
    assert purgatory.check_and_complete("t-0") == 0
    assert op.completions == 1


def test_operation_past_its_deadline_expires_at_once() -> None:
    clock, timers, purgatory = _setup()
    clock.advance(1_000)
    timers.advance_to(clock.now_ms())
    op = WaitForBytes(500, {"bytes": 0}, need=1)
    assert purgatory.try_complete_else_watch(op, ["t"]) is False
    assert (op.completions, op.expirations) == (1, 1)


def test_purge_drops_expired_watchers() -> None:
    clock, timers, purgatory = _setup()
    for deadline in (10, 20, 30):
        purgatory.try_complete_else_watch(WaitForBytes(deadline, {"bytes": 0}, 1), ["t"])
    clock.advance(25)
    timers.advance_to(clock.now_ms())
    assert purgatory.watched("t") == 1
    assert purgatory.purge_completed() == 2
