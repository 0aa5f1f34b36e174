"""Keyed timers: replace-by-key, stale-expiry detection, the asyncio driver."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers, TimerFired
from kbroker.purgatory.timing_wheel import TimerTask


def _collector() -> tuple[list[TimerFired], object]:
    fired: list[TimerFired] = []
    return fired, fired.append


def test_schedule_fires_after_delay() -> None:
    clock = ManualClock(1_000)
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    token = timers.schedule("heartbeat-g-m", 500, cb)
    clock.advance(499)
    timers.advance_to(clock.now_ms())
    assert fired == []
    clock.advance(1)
    timers.advance_to(clock.now_ms())
    assert fired == [TimerFired("heartbeat-g-m", token, 1_500)]


def test_schedule_same_key_replaces_previous_timer() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 100, cb)
    clock.advance(50)
    second = timers.schedule("k", 100, cb)
    clock.advance(60)
    timers.advance_to(clock.now_ms())
    assert fired == []  # the first deadline (100) passed but that timer was replaced
    clock.advance(40)
    timers.advance_to(clock.now_ms())
    assert [f.token for f in fired] == [second]


def test_cancel_prevents_firing() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 10, cb)
    assert timers.cancel("k") is True
    assert timers.cancel("k") is False
    clock.advance(20)
    timers.advance_to(clock.now_ms())
    assert fired == []


def test_expiries_fire_in_deadline_order() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("late", 30_000, cb)
    timers.schedule("early", 5, cb)
    timers.schedule("middle", 700, cb)
    clock.advance(60_000)
    timers.advance_to(clock.now_ms())
    assert [f.key for f in fired] == ["early", "middle", "late"]


def test_claim_accepts_current_expiry_once() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 10, cb)
    clock.advance(10)
    timers.advance_to(clock.now_ms())
    (expiry,) = fired
    assert timers.claim(expiry.key, expiry.token) is True
    assert timers.claim(expiry.key, expiry.token) is False


def test_stale_expiry_detected_when_rescheduled_after_firing() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 10, cb)
    clock.advance(10)
    timers.advance_to(clock.now_ms())
    (expiry,) = fired
    # The expiry sits in a mailbox while a heartbeat re-arms the key.
    timers.schedule("k", 10, cb)
    assert timers.claim(expiry.key, expiry.token) is False
    assert "k" in timers


def test_stale_expiry_detected_when_cancelled_after_firing() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 10, cb)
    clock.advance(10)
    timers.advance_to(clock.now_ms())
    timers.cancel("k")
    assert timers.claim("k", fired[0].token) is False


def test_zero_delay_fires_on_next_advance_not_inside_schedule() -> None:
    clock = ManualClock(500)
    timers = KeyedTimers(clock)
    timers.advance_to(500)
    fired, cb = _collector()
    timers.schedule("now", 0, cb)
    assert fired == []
    assert timers.next_deadline_ms() == 500
    timers.advance_to(500)
    assert [f.key for f in fired] == ["now"]


def test_raw_tasks_share_the_wheel() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    ran: list[str] = []
    assert timers.add_task(TimerTask(20, lambda: ran.append("raw")))
    timers.schedule("k", 10, lambda f: ran.append(f.key))
    clock.advance(25)
    timers.advance_to(clock.now_ms())
    assert ran == ["k", "raw"]


async def _settle(done, rounds: int = 100) -> None:  # noqa: ANN001 - a predicate
    """Let the loop run, one turn at a time, until `done()` holds (no real time involved)."""
    for _ in range(rounds):
        if done():
            return
        await asyncio.sleep(0)
    raise AssertionError("the driver did not get there")


def _asleep_by(timers: KeyedTimers, deadline_ms: int) -> bool:
    """The driver took its last wake-up and sleeps towards a moment no later than `deadline_ms`
    (the wheel's bucket holding the timer may come due a little earlier)."""
    until = timers.sleeping_until_ms
    return until is not None and until <= deadline_ms and timers._wakeup is not None and not timers._wakeup.is_set()


async def test_driver_fires_a_timer_when_the_clock_reaches_it() -> None:
    clock = ManualClock(1_000)
    timers = KeyedTimers(clock)
    driver = asyncio.create_task(timers.run())
    try:
        fired: list[int] = []
        timers.schedule("k", 60, lambda f: fired.append(clock.now_ms()))
        await _settle(lambda: _asleep_by(timers, 1_060))
        clock.advance(59)
        timers.wake()
        await _settle(lambda: _asleep_by(timers, 1_060))
        assert fired == []  # one millisecond early: not yet
        clock.advance(1)
        timers.wake()
        await _settle(lambda: fired != [])
        assert fired == [1_060]
    finally:
        driver.cancel()
        with pytest.raises(asyncio.CancelledError):
            await driver


async def test_driver_wakes_for_an_earlier_timer() -> None:
    clock = ManualClock(0)
    timers = KeyedTimers(clock)
    driver = asyncio.create_task(timers.run())
    try:
        fired: list[str] = []
        timers.schedule("late", 10_000, lambda f: fired.append(f.key))
        await _settle(lambda: _asleep_by(timers, 10_000) and timers.sleeping_until_ms > 30)
        timers.schedule("early", 30, lambda f: fired.append(f.key))
        await _settle(lambda: _asleep_by(timers, 30))  # woke up and re-planned for the earlier one
        clock.advance(30)
        timers.wake()
        await _settle(lambda: fired != [])
        assert fired == ["early"] and "late" in timers
        await _settle(lambda: _asleep_by(timers, 10_000) and timers.sleeping_until_ms > 30)
    finally:
        driver.cancel()
        with pytest.raises(asyncio.CancelledError):
            await driver


def test_a_timer_pushed_later_fires_at_its_new_deadline_with_its_new_token() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 100, cb)
    clock.advance(50)
    token = timers.schedule("k", 100, cb)  # a heartbeat: the deadline moves to 150
    assert timers.deadline_ms("k") == 150
    clock.advance(70)
    timers.advance_to(clock.now_ms())  # 120: the old deadline has passed, the new one not
    assert fired == [] and "k" in timers
    clock.advance(30)
    timers.advance_to(clock.now_ms())
    assert [(f.key, f.token, f.deadline_ms) for f in fired] == [("k", token, 150)]
    assert timers.claim("k", token)


def test_timers_pushed_later_keep_deadline_order_in_one_big_advance() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("a", 100, cb)
    timers.schedule("c", 250, cb)
    clock.advance(50)
    timers.schedule("a", 250, cb)  # now due at 300, after c
    timers.schedule("b", 150, cb)  # due at 200
    timers.advance_to(1_000)
    assert [(f.key, f.deadline_ms) for f in fired] == [("b", 200), ("c", 250), ("a", 300)]


def test_a_timer_brought_earlier_is_moved_in_the_wheel() -> None:
    clock = ManualClock()
    timers = KeyedTimers(clock)
    fired, cb = _collector()
    timers.schedule("k", 1_000, cb)
    timers.schedule("k", 10, cb)
    timers.advance_to(10)
    assert [f.deadline_ms for f in fired] == [10]
