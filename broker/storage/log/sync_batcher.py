"""Group commit across partitions: the flush rounds that start together share a few worker-thread jobs.

Each partition's Flusher (flusher.py) runs its own rounds, and each round fsyncs that partition's
files. A Produce naming 1,000 partitions starts 1,000 rounds in the same loop iteration; handing each
to its own `asyncio.to_thread` costs the loop a thread-pool submission, two futures and a wake-up per
partition (about a quarter of a millisecond of loop time each, measured), which dwarfed the append
itself. The batcher collects the rounds submitted during one loop iteration and runs them as at
most `max_jobs` jobs: still several fsyncs in flight at once (a journaling filesystem commits
concurrent fsyncs together, so parallel ones finish far sooner than a sequential walk), but a
constant number of submissions per iteration instead of one per partition.

A failure stays with its round: each round's fsyncs run in their own try, and only that round's
future carries the exception, so only that partition's log is fenced (see flusher.py).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .segment import LogSegment

SegmentsToSync = list[tuple["LogSegment", bool]]
MAX_JOBS = 8  # fsyncs in flight at once; the default executor has min(32, cores + 4) threads


def _run_rounds(rounds: list[tuple[SegmentsToSync, Callable[[int], None]]]) -> list[BaseException | None]:
    """In a worker thread: every round's fsyncs, each failure kept with its round."""
    outcomes: list[BaseException | None] = []
    for segments, fsync in rounds:
        try:
            for segment, with_indexes in segments:
                segment.sync(fsync, with_indexes=with_indexes)
        except Exception as exc:  # noqa: BLE001 - handed to the round's waiter, which fences its log
            outcomes.append(exc)
        else:
            outcomes.append(None)
    return outcomes


class SyncBatcher:
    def __init__(self, max_jobs: int = MAX_JOBS) -> None:
        self.max_jobs = max_jobs
        self._pending: list[tuple[SegmentsToSync, Callable[[int], None], asyncio.Future[None]]] = []
        self.jobs = 0  # worker-thread jobs submitted so far (tests and stats)

    async def sync(self, segments: SegmentsToSync, fsync: Callable[[int], None]) -> None:
        """fsync `segments` in a worker thread, together with the other rounds of this loop iteration."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._launch, loop)  # after the rounds already queued to start in this iteration
        self._pending.append((segments, fsync, future))
        await future

    def _launch(self, loop: asyncio.AbstractEventLoop) -> None:
        pending, self._pending = self._pending, []
        jobs = min(self.max_jobs, len(pending))
        for j in range(jobs):
            share = pending[j::jobs]
            self.jobs += 1
            job = loop.run_in_executor(None, _run_rounds, [(segments, fsync) for segments, fsync, _ in share])
            job.add_done_callback(partial(_settle, share=share))


def _settle(done: asyncio.Future[list[BaseException | None]],
            share: list[tuple[SegmentsToSync, Callable[[int], None], asyncio.Future[None]]]) -> None:
    if done.cancelled() or done.exception() is not None:
        error: BaseException = done.exception() or asyncio.CancelledError()
        outcomes: list[BaseException | None] = [error] * len(share)
    else:
        outcomes = done.result()
    for (_, _, future), outcome in zip(share, outcomes):
        if future.done():
            continue
        if outcome is None:
            future.set_result(None)
        else:
            future.set_exception(outcome)
