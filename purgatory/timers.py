"""Keyed timers over the timing wheel, and the one asyncio task that drives them.

A key names one logical timer (`heartbeat-<group>-<member>`); scheduling a key replaces whatever
timer it had, so "reset the session timeout" is one call. Every schedule gets a fresh token.

Expiries are meant to travel as messages: the callback usually just enqueues a `TimerFired` into
an actor's mailbox. Between the firing and the handling the key can be re-armed or cancelled, so
the handler calls `claim(key, token)`: it succeeds only for the expiry of the key's *current*
timer, which also retires the entry. A stale expiry (replaced or cancelled meanwhile) is dropped.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from .clock import Clock
from .timing_wheel import TimerTask, TimingWheelTimer


@dataclass(frozen=True, slots=True)
class TimerFired:
    key: str
    token: int
    deadline_ms: int


TimerCallback = Callable[[TimerFired], None]
_REARMED = 1 << 62  # orders a pushed-back timer after the wheel's tasks of the same deadline


class _KeyedTimer:
    __slots__ = ("token", "task", "callback", "fired", "deadline_ms")

    def __init__(self, token: int, task: TimerTask, callback: TimerCallback) -> None:
        self.token = token
        self.task = task
        self.callback = callback
        self.fired = False
        # When the timer fires; later than `task.expiration_ms` when it was pushed back without
        # touching the wheel (see `schedule`).
        self.deadline_ms = task.expiration_ms


class KeyedTimers:
    """Keyed timers plus raw tasks on one wheel, advanced by `advance_to` or by `run()`."""

    def __init__(self, clock: Clock, *, tick_ms: int = 1, wheel_size: int = 20) -> None:
        self._clock = clock
        self._wheel = TimingWheelTimer(tick_ms, wheel_size, clock.now_ms())
        self._timers: dict[str, _KeyedTimer] = {}
        self._next_token = 0
        # Tasks whose deadline had already passed when added; they fire on the next advance
        # rather than inside schedule(), so a callback never re-enters its caller.
        self._due: list[TimerTask] = []
        self._wakeup: asyncio.Event | None = None
        self._sleeping_until: int | None = None
        # While `advance_to` runs: the tasks due in this advance, as a heap by deadline.
        self._firing: list[tuple[int, int, int, TimerTask]] | None = None
        self._firing_now = 0
        self._firing_seq = 0

    @property
    def clock(self) -> Clock:
        return self._clock

    # -- keyed API -------------------------------------------------------------------------

    def schedule(self, key: str, delay_ms: int, callback: TimerCallback) -> int:
        """Arm `key` to fire `delay_ms` from now, replacing any timer it had; returns the token.

        Pushing a live timer later (a heartbeat re-arming its session timeout, the common case)
        leaves its wheel entry where it is and only moves the deadline: when the entry comes due
        it is put back for the rest (`_fire`). So a re-arm is a few field writes, not a cancel
        plus a cascade of wheel inserts.
        """
        self._next_token += 1
        token = self._next_token
        deadline = self._clock.now_ms() + max(0, delay_ms)
        timer = self._timers.get(key)
        if timer is not None and not timer.fired and deadline >= timer.task.expiration_ms:
            timer.token = token
            timer.callback = callback
            timer.deadline_ms = deadline
            return token
        self.cancel(key)
        task = TimerTask(deadline)
        task.action = partial(self._fire, key, task)
        self._timers[key] = _KeyedTimer(token, task, callback)
        self._insert(task)
        return token

    def cancel(self, key: str) -> bool:
        timer = self._timers.pop(key, None)
        if timer is None:
            return False
        timer.task.cancel()
        return not timer.fired

    def claim(self, key: str, token: int) -> bool:
        """Accept the expiry `token` of `key` if it is still the key's live timer."""
        timer = self._timers.get(key)
        if timer is None or timer.token != token or not timer.fired:
            return False
        del self._timers[key]
        return True

    def deadline_ms(self, key: str) -> int | None:
        timer = self._timers.get(key)
        return None if timer is None else timer.deadline_ms

    def __contains__(self, key: str) -> bool:
        timer = self._timers.get(key)
        return timer is not None and not timer.fired

    def _fire(self, key: str, task: TimerTask) -> None:
        timer = self._timers.get(key)
        if timer is None or timer.task is not task or timer.fired:
            return
        if timer.deadline_ms > task.expiration_ms:
            # Pushed back since this entry was inserted: wait for the rest.
            rest = TimerTask(timer.deadline_ms)
            rest.action = partial(self._fire, key, rest)
            timer.task = rest
            if self._firing is not None and rest.expiration_ms <= self._firing_now:
                # Already due in this very advance: take its place by deadline in the batch.
                self._firing_seq += 1  # after tasks of the same deadline armed before it
                heapq.heappush(self._firing, (rest.expiration_ms, _REARMED + self._firing_seq, 0, rest))
            else:
                self._insert(rest)
            return
        timer.fired = True
        timer.callback(TimerFired(key, timer.token, timer.deadline_ms))

    # -- raw tasks (used by the delayed-operation purgatory) -----------------------------------

    def add_task(self, task: TimerTask) -> bool:
        """Put an unkeyed task on the same wheel; False if it is already due (not inserted)."""
        if self._wheel.add(task):
            self._maybe_wake(task.expiration_ms)
            return True
        return False

    # -- time ----------------------------------------------------------------------------------

    def advance_to(self, now_ms: int) -> int:
        """Fire everything due at `now_ms`, earliest deadline first; returns how many fired."""
        due, self._due = self._due, []
        expired = self._wheel.advance_clock(now_ms)
        if due:
            expired = due + expired
        if not expired:
            return 0
        batch = [(t.expiration_ms, t.seq, 0, t) for t in expired]
        heapq.heapify(batch)
        self._firing, self._firing_now = batch, now_ms
        fired = 0
        try:
            while batch:
                task = heapq.heappop(batch)[3]
                if not task.cancelled:
                    fired += 1
                    task.run()
        finally:
            self._firing = None
        return fired

    def wake(self) -> None:
        """Make the driver look at the clock now (a manual clock moved; real clocks need not call it)."""
        if self._wakeup is not None:
            self._wakeup.set()

    @property
    def sleeping_until_ms(self) -> int | None:
        """The deadline the driver sleeps towards (None: not running, or nothing scheduled)."""
        return self._sleeping_until

    def next_deadline_ms(self) -> int | None:
        if self._due:
            return self._clock.now_ms()
        return self._wheel.next_expiration_ms()

    async def run(self) -> None:
        """The broker's single timer task: sleep until the next bucket is due (or until an
        earlier timer is added), then fire what is due. Cancel the task to stop it."""
        self._wakeup = asyncio.Event()
        try:
            while True:
                self.advance_to(self._clock.now_ms())
                next_ms = self.next_deadline_ms()
                self._wakeup.clear()
                self._sleeping_until = next_ms
                if next_ms is None:
                    await self._wakeup.wait()
                    continue
                delay_s = max(0, next_ms - self._clock.now_ms()) / 1000.0
                try:
                    await asyncio.wait_for(self._wakeup.wait(), delay_s)
                except TimeoutError:
                    pass
        finally:
            self._wakeup = None
            self._sleeping_until = None

    def _insert(self, task: TimerTask) -> None:
        if not self._wheel.add(task):
            self._due.append(task)
        self._maybe_wake(task.expiration_ms)

    def _maybe_wake(self, deadline_ms: int) -> None:
        if self._wakeup is None:
            return
        if self._sleeping_until is None or deadline_ms < self._sleeping_until:
            self._sleeping_until = deadline_ms
            self._wakeup.set()
