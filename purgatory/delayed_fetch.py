"""The delayed Fetch: a long poll parked in the purgatory until enough bytes arrive or max wait passes.

Watch keys are `(topic, partition)` tuples. Produce calls `notify(topic, partition)` after each append,
which re-checks the fetches watching that partition; the timing wheel expires the others at their
`max_wait_ms`. Completion only resolves a future: the fetch handler then reads the logs itself, so the
producer's request path never pays for a consumer's read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable

from .delayed import DelayedOperation, Purgatory
from .timers import KeyedTimers

PURGE_EVERY = 256  # sweep expired operations out of the watch lists after this many new watches


class DelayedFetch(DelayedOperation):
    """`ready()` is the handler's condition: min_bytes reached, or a partition has an error to report."""

    def __init__(self, deadline_ms: int, ready: Callable[[], bool]) -> None:
        super().__init__(deadline_ms)
        self._ready = ready
        self.future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.expired = False

    def try_complete(self) -> bool:
        if self._ready():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(True)

    def on_expiration(self) -> None:
        self.expired = True

    def cancel(self) -> None:
        """The waiting handler went away (shutdown): complete quietly so watchers drop it."""
        self.force_complete()


class FetchPurgatory:
    def __init__(self, timers: KeyedTimers) -> None:
        self.timers = timers
        self.purgatory: Purgatory[DelayedFetch] = Purgatory(timers, "fetch")
        self._since_purge = 0
        self._closing = False

    def shutdown(self) -> None:
        """Answer every parked fetch now (with what the logs hold) and stop parking new ones, so a
        broker stop is not held up by long polls."""
        self._closing = True
        for ops in list(self.purgatory._watchers.values()):
            for op in ops:
                op.force_complete()
        self.purgatory.purge_completed()

    def now_ms(self) -> int:
        return self.timers.clock.now_ms()

    async def wait(self, max_wait_ms: int, ready: Callable[[], bool], keys: Iterable[Hashable]) -> bool:
        """Park until `ready()` holds (re-checked on `notify`) or `max_wait_ms` passes.

        Returns True if the condition completed it, False on expiry."""
        if self._closing:
            return ready()
        op = DelayedFetch(self.now_ms() + max(0, max_wait_ms), ready)
        self._since_purge += 1
        if self._since_purge >= PURGE_EVERY:
            self._since_purge = 0
            self.purgatory.purge_completed()
        if self.purgatory.try_complete_else_watch(op, list(keys)) and not op.expired:
            return True
        try:
            await op.future
        finally:
            op.cancel()
        return not op.expired

    def notify(self, topic: str, partition: int) -> int:
        return self.purgatory.check_and_complete((topic, partition))

    def watched(self, topic: str, partition: int) -> int:
        return self.purgatory.watched((topic, partition))
