"""Delayed operations for data-path waits (Kafka's `DelayedOperation` / `DelayedOperationPurgatory`).

A delayed Fetch waits until enough bytes arrive or its max wait passes. Producers of data call
`check_and_complete(key)` for the keys they affect (a topic-partition); the operation re-checks its
condition; the timing wheel expires it otherwise. Completion happens exactly once, whichever of
the two paths gets there first, guarded by `force_complete`.

The group coordinator does not use this: its joins and syncs are *checked* after each command and
timed by keyed timers (see timers.py), which is simpler for a single-threaded actor.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from .timers import KeyedTimers
from .timing_wheel import TimerTask


class DelayedOperation:
    """Subclass and implement `try_complete`, `on_complete`, `on_expiration`.

    `try_complete` checks the condition and, when it holds, returns `self.force_complete()`.
    """

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms
        self._completed = False
        self._timer_task: TimerTask | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now; True only for the one caller that actually completed it."""
        if self._completed:
            return False
        self._completed = True
        task, self._timer_task = self._timer_task, None
        if task is not None:
            task.cancel()
        self.on_complete()
        return True

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after the expiry path completed the operation (on_complete has run)."""

    def _expire(self) -> None:
        if self.force_complete():
            self.on_expiration()


Op = TypeVar("Op", bound=DelayedOperation)


class Purgatory(Generic[Op]):
    """Operations watched by key, expired through the shared timing wheel."""

    def __init__(self, timers: KeyedTimers, name: str = "") -> None:
        self.name = name
        self._timers = timers
        self._watchers: dict[Hashable, list[Op]] = {}

    def try_complete_else_watch(self, op: Op, watch_keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if possible; otherwise watch it under every key and arm its expiry.

        Returns True only if the operation's condition completed it during this call.
        """
        if op.try_complete():
            return True
        for key in watch_keys:
            if op.is_completed:
                return True
            self._watchers.setdefault(key, []).append(op)
        # The condition may have become true while we were registering.
        if op.is_completed or op.try_complete():
            return True
        task = TimerTask(op.deadline_ms, op._expire)
        op._timer_task = task
        if not self._timers.add_task(task):
            op._expire()  # already past its deadline: it expires rather than completes
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watched under `key`; returns how many completed now."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        still_waiting: list[Op] = []
        for op in ops:
            if op.is_completed:
                continue
            if op.try_complete():
                completed += 1
            elif not op.is_completed:
                still_waiting.append(op)
        if still_waiting:
            self._watchers[key] = still_waiting
        else:
            del self._watchers[key]
        return completed

    def watched(self, key: Hashable) -> int:
        return sum(1 for op in self._watchers.get(key, ()) if not op.is_completed)

    def purge_completed(self) -> int:
        """Drop completed operations (e.g. expired ones) from the watch lists."""
        removed = 0
        for key in list(self._watchers):
            ops = self._watchers[key]
            alive = [op for op in ops if not op.is_completed]
            removed += len(ops) - len(alive)
            if alive:
                self._watchers[key] = alive
            else:
                del self._watchers[key]
        return removed
