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


class _KeyedTimer:
    __slots__ = ("token", "task", "callback", "fired")

    def __init__(self, token: int, task: TimerTask, callback: TimerCallback) -> None:
        self.token = token
        self.task = task
        self.callback = callback
        self.fired = False


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

    @property
    def clock(self) -> Clock:
        return self._clock

    # -- keyed API -------------------------------------------------------------------------

    def schedule(self, key: str, delay_ms: int, callback: TimerCallback) -> int:
        """Arm `key` to fire `delay_ms` from now, replacing any timer it had; returns the token."""
        self.cancel(key)
        self._next_token += 1
        token = self._next_token
        task = TimerTask(self._clock.now_ms() + max(0, delay_ms))
        task.action = partial(self._fire, key, token)
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
        return None if timer is None else timer.task.expiration_ms

    def __contains__(self, key: str) -> bool:
        timer = self._timers.get(key)
        return timer is not None and not timer.fired

    def _fire(self, key: str, token: int) -> None:
        timer = self._timers.get(key)
        if timer is None or timer.token != token or timer.fired:
            return
        timer.fired = True
        timer.callback(TimerFired(key, token, timer.task.expiration_ms))

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
            expired = sorted(due + expired, key=lambda t: (t.expiration_ms, t.seq))
        fired = 0
        for task in expired:
            if not task.cancelled:
                fired += 1
                task.run()
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
