"""The hierarchical timing wheel driven by hand."""

from __future__ import annotations

import random

from kbroker.purgatory.timing_wheel import TimerTask, TimingWheelTimer


def test_add_rejects_task_already_due() -> None:
    timer = TimingWheelTimer(start_ms=100)
    assert timer.add(TimerTask(100)) is False
    assert timer.add(TimerTask(99)) is False
    assert timer.add(TimerTask(101)) is True


def test_add_rejects_cancelled_task() -> None:
    timer = TimingWheelTimer()
    task = TimerTask(50)
    task.cancel()
    assert timer.add(task) is False


def test_task_fires_exactly_at_deadline_not_before() -> None:
    timer = TimingWheelTimer()
    task = TimerTask(7)
    timer.add(task)
    assert timer.advance_clock(6) == []
    assert timer.advance_clock(7) == [task]
    assert timer.advance_clock(100) == []


def test_cancel_removes_task_in_constant_time() -> None:
    timer = TimingWheelTimer()
    keep, drop = TimerTask(10), TimerTask(10)
    timer.add(keep)
    timer.add(drop)
    drop.cancel()
    assert timer.advance_clock(10) == [keep]


def test_overflow_wheels_are_created_on_demand_and_cascade() -> None:
    timer = TimingWheelTimer(tick_ms=1, wheel_size=20)
    far = TimerTask(45_000)  # beyond 20 ms and 400 ms and 8 s: fourth level
    timer.add(far)
    assert timer._wheel.overflow is not None
    assert timer._wheel.overflow.overflow is not None
    assert timer._wheel.overflow.overflow.overflow is not None
    # The bucket comes due at its slot's lower bound; the cascade must not fire early.
    first_due = timer.next_expiration_ms()
    assert first_due is not None and first_due <= 45_000
    assert timer.advance_clock(44_999) == []
    assert timer.advance_clock(45_000) == [far]


def test_expiry_order_is_deadline_order_across_levels() -> None:
    timer = TimingWheelTimer()
    deadlines = [3, 25_000, 401, 17, 8_000, 401, 160_001, 2]
    tasks = [TimerTask(d) for d in deadlines]
    for t in tasks:
        timer.add(t)
    fired = timer.advance_clock(1_000_000)
    assert [t.expiration_ms for t in fired] == sorted(deadlines)
    # Equal deadlines keep insertion order.
    same = [t for t in fired if t.expiration_ms == 401]
    assert same == [tasks[2], tasks[5]]


def test_random_schedule_matches_a_sorted_reference() -> None:
    rng = random.Random(7)
    timer = TimingWheelTimer(start_ms=1_000)
    alive: list[TimerTask] = []
    for _ in range(2_000):
        task = TimerTask(1_000 + rng.randint(1, 600_000))
        assert timer.add(task)
        alive.append(task)
    for task in rng.sample(alive, 500):
        task.cancel()
    expected = sorted((t for t in alive if not t.cancelled), key=lambda t: (t.expiration_ms, t.seq))
    fired: list[TimerTask] = []
    now = 1_000
    while now < 602_000:
        now += rng.randint(1, 5_000)
        batch = timer.advance_clock(now)
        assert all(t.expiration_ms <= now for t in batch)
        fired.extend(batch)
    assert fired == expected


def test_task_added_after_clock_advanced_uses_new_time_base() -> None:
    timer = TimingWheelTimer()
    timer.advance_clock(1_000)
    assert timer.add(TimerTask(1_000)) is False
    late = TimerTask(1_005)
    assert timer.add(late)
    assert timer.advance_clock(1_004) == []
    assert timer.advance_clock(1_005) == [late]


def test_readding_a_task_moves_it() -> None:
    timer = TimingWheelTimer()
    task = TimerTask(10)
    timer.add(task)
    task.expiration_ms = 30
    timer.add(task)
    assert timer.advance_clock(10) == []
    assert timer.advance_clock(30) == [task]
