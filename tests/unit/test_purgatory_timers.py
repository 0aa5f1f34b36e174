"""Keyed timers: replace-by-key, stale-expiry detection, the asyncio driver."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.purgatory.clock import ManualClock, SystemClock
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


async def test_driver_fires_timer_on_time() -> None:
    clock = SystemClock()
    timers = KeyedTimers(clock)
    driver = asyncio.create_task(timers.run())
    try:
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        start = clock.now_ms()
        timers.schedule("k", 60, lambda f: done.set_result(clock.now_ms()))
        fired_at = await asyncio.wait_for(done, 2)
        assert 60 <= fired_at - start < 400
    finally:
        driver.cancel()
        with pytest.raises(asyncio.CancelledError):
            await driver


async def test_driver_wakes_for_an_earlier_timer() -> None:
    clock = SystemClock()
    timers = KeyedTimers(clock)
    driver = asyncio.create_task(timers.run())
    try:
        loop = asyncio.get_running_loop()
        early: asyncio.Future[int] = loop.create_future()
        timers.schedule("late", 10_000, lambda f: None)
        await asyncio.sleep(0.01)  # the driver is now sleeping towards the 10 s deadline
        start = clock.now_ms()
        timers.schedule("early", 30, lambda f: early.set_result(clock.now_ms()))
        fired_at = await asyncio.wait_for(early, 2)
        assert fired_at - start < 400
        assert "late" in timers
    finally:
        driver.cancel()
        with pytest.raises(asyncio.CancelledError):
            await driver
