"""A hierarchical timing wheel (the idea of Kafka's `TimingWheel` / `SystemTimer`).

Why a wheel and not a heap of tasks: a broker with thousands of members re-arms one session
timer per heartbeat, so cancel + add must be O(1). Tasks sit in buckets (doubly linked lists);
adding is an index computation and a list append, cancelling is an unlink. Only buckets go into
the priority queue, and a bucket is queued once per expiration, so the heap holds at most one
entry per non-empty bucket instead of one per task.

Layout: the lowest wheel has `wheel_size` buckets of `tick_ms` each. A deadline beyond its span
goes to an overflow wheel whose tick is the lower wheel's whole span, created on demand. When an
overflow bucket expires its tasks are re-inserted and fall into finer wheels (or expire).

Wheel size 20 and tick 1 ms are Kafka's defaults: levels cover 20 ms, 400 ms, 8 s, 160 s, ...,
so a 10-45 s session timeout lives in the fourth level and cascades at most three times.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class TimerTask:
    """Something to run at `expiration_ms` unless cancelled first."""

    __slots__ = ("expiration_ms", "action", "cancelled", "seq", "_entry")

    def __init__(self, expiration_ms: int, action: Callable[[], None] | None = None) -> None:
        self.expiration_ms = expiration_ms
        self.action = action
        self.cancelled = False
        self.seq = 0  # insertion order, set by the timer; breaks ties between equal deadlines
        self._entry: _Entry | None = None

    def cancel(self) -> None:
        """O(1): unlink from the bucket; an already queued bucket simply comes up shorter."""
        self.cancelled = True
        entry = self._entry
        if entry is not None:
            entry.unlink()
            self._entry = None

    def run(self) -> None:
        if self.action is not None:
            self.action()

    def __repr__(self) -> str:
        return f"TimerTask(expiration_ms={self.expiration_ms}, cancelled={self.cancelled})"


class _Entry:
    """A node of a bucket's doubly linked list."""

    __slots__ = ("task", "prev", "next", "bucket")

    def __init__(self, task: TimerTask | None) -> None:
        self.task = task
        self.prev: _Entry = self
        self.next: _Entry = self
        self.bucket: _Bucket | None = None

    def unlink(self) -> None:
        bucket = self.bucket
        if bucket is not None:
            self.prev.next = self.next
            self.next.prev = self.prev
            self.prev = self.next = self
            self.bucket = None
            bucket.size -= 1


class _Bucket:
    """One slot of a wheel: a circular list with a sentinel, and the slot's expiration."""

    __slots__ = ("root", "expiration_ms", "size")

    def __init__(self) -> None:
        self.root = _Entry(None)
        self.expiration_ms = -1
        self.size = 0

    def append(self, entry: _Entry) -> None:
        tail = self.root.prev
        entry.prev = tail
        entry.next = self.root
        tail.next = entry
        self.root.prev = entry
        entry.bucket = self
        self.size += 1

    def set_expiration(self, expiration_ms: int) -> bool:
        """True when the slot starts a new round (so it must be queued again)."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def drain(self) -> list[_Entry]:
        entries: list[_Entry] = []
        node = self.root.next
        while node is not self.root:
            following = node.next
            node.prev = node.next = node
            node.bucket = None
            entries.append(node)
            node = following
        self.root.prev = self.root.next = self.root
        self.size = 0
        self.expiration_ms = -1
        return entries


class _Wheel:
    __slots__ = ("tick_ms", "wheel_size", "interval_ms", "current_ms", "buckets", "overflow", "_enqueue")

    def __init__(
        self, tick_ms: int, wheel_size: int, start_ms: int, enqueue: Callable[[_Bucket], None]
    ) -> None:
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self.current_ms = start_ms - start_ms % tick_ms
        self.buckets = [_Bucket() for _ in range(wheel_size)]
        self.overflow: _Wheel | None = None
        self._enqueue = enqueue

    def add(self, entry: _Entry) -> bool:
        task = entry.task
        assert task is not None
        expiration = task.expiration_ms
        if task.cancelled or expiration < self.current_ms + self.tick_ms:
            return False  # already due (or dead): the caller runs it now
        if expiration < self.current_ms + self.interval_ms:
            virtual_id = expiration // self.tick_ms
            bucket = self.buckets[virtual_id % self.wheel_size]
            bucket.append(entry)
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self._enqueue(bucket)
            return True
        if self.overflow is None:
            self.overflow = _Wheel(self.interval_ms, self.wheel_size, self.current_ms, self._enqueue)
        return self.overflow.add(entry)

    def advance(self, time_ms: int) -> None:
        if time_ms >= self.current_ms + self.tick_ms:
            self.current_ms = time_ms - time_ms % self.tick_ms
            if self.overflow is not None:
                self.overflow.advance(self.current_ms)


class TimingWheelTimer:
    """The wheel hierarchy plus the queue of buckets; no threads, no I/O.

    `add` refuses tasks that are already due; `advance_clock(now_ms)` returns the tasks that became
    due, earliest deadline first, without running them (the caller decides where they run).
    """

    def __init__(self, tick_ms: int = 1, wheel_size: int = 20, start_ms: int = 0) -> None:
        if tick_ms <= 0 or wheel_size <= 1:
            raise ValueError("tick_ms must be positive and wheel_size at least 2")
        self._queue: list[tuple[int, int, _Bucket]] = []
        self._queue_seq = itertools.count()
        self._task_seq = itertools.count()
        self._wheel = _Wheel(tick_ms, wheel_size, start_ms, self._enqueue)

    @property
    def current_ms(self) -> int:
        return self._wheel.current_ms

    def add(self, task: TimerTask) -> bool:
        """Insert `task`; False (and not inserted) if it is cancelled or already due."""
        if task._entry is not None:
            task._entry.unlink()
        task.seq = next(self._task_seq)
        entry = _Entry(task)
        if self._wheel.add(entry):
            task._entry = entry
            return True
        task._entry = None
        return False

    def advance_clock(self, now_ms: int) -> list[TimerTask]:
        expired: list[TimerTask] = []
        queue = self._queue
        while queue and queue[0][0] <= now_ms:
            expiration, _, bucket = heapq.heappop(queue)
            if bucket.expiration_ms != expiration:
                continue  # the slot was drained and reused since this entry was queued
            self._wheel.advance(expiration)
            for entry in bucket.drain():
                self._reinsert(entry, expired)
        self._wheel.advance(now_ms)
        expired.sort(key=lambda t: (t.expiration_ms, t.seq))
        return expired

    def next_expiration_ms(self) -> int | None:
        """When the earliest bucket is due; a bucket may come due before its tasks' deadlines
        (an overflow bucket starts at its slot's lower bound), which only costs a cascade."""
        queue = self._queue
        while queue and queue[0][2].expiration_ms != queue[0][0]:
            heapq.heappop(queue)
        return queue[0][0] if queue else None

    def _enqueue(self, bucket: _Bucket) -> None:
        heapq.heappush(self._queue, (bucket.expiration_ms, next(self._queue_seq), bucket))

    def _reinsert(self, entry: _Entry, expired: list[TimerTask]) -> None:
        task = entry.task
        assert task is not None
        if task.cancelled or task._entry is not entry:
            return
        if not self._wheel.add(entry):
            task._entry = None
            expired.append(task)
