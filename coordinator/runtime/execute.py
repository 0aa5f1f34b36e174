"""Carry out an Outcome: send replies, apply timers, append records, replay, follow up.

One implementation for the runtime (partition.py) and the synchronous test harness, so tests
exercise the same append-then-apply-then-reply path as production; it knows the shard only by the
`Shard` protocol (shard.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from ...protocol.errors import ErrorCode, KafkaError

from .outcome import Durability, Outcome, Reply, TimerOp
from .shard import Shard, append_error_to_response

Record = Any  # whatever records the shard writes; the writer encodes them
AppendRecords = Callable[[int, list[Record]], Awaitable[None]]
# Appends synchronously (raising at once if it cannot) and returns the wait for durability.
AppendNowait = Callable[[int, list[Record]], Awaitable[None]]
OnEvent = Callable[[Any], None]

log = structlog.get_logger("kbroker.coordinator")


async def execute_outcome(
    shard: Shard,
    outcome: Outcome,
    *,
    now_ms: Callable[[], int],
    append: AppendRecords,
    deliver: Callable[[Reply], None],
    apply_timer: Callable[[TimerOp], None],
    on_event: OnEvent,
    append_nowait: AppendNowait | None = None,
    pipelined: PipelinedWrites | None = None,
    on_storage_failure: Callable[[int, ErrorCode], None] | None = None,
) -> None:
    """`pipelined` keeps each pipelined write still waiting for its fsync (and its replies) until it
    is done; without it (or without `append_nowait`) writes are not pipelined.
    `on_storage_failure(partition, code)` of every failed append or fsync (the shell unloads the
    partition: memory may hold records that are not on disk)."""
    queue: deque[Outcome] = deque([outcome])
    while queue:
        out = queue.popleft()
        apply_unwritten(out, deliver, apply_timer, on_event)
        if not out.writes:
            continue

        records = [record for write in out.writes for record in write.records]
        if _all_in_log(out):
            _replay_in_log(shard, out, records, deliver, queue, now_ms)
            continue
        if append_nowait is not None and pipelined is not None and _all_pipelined(out):
            pipelined.add(shard, out, records, append_nowait, deliver, on_storage_failure)
            continue
        error: ErrorCode | None = None
        try:
            await append(shard.partition, records)
        except asyncio.CancelledError:
            # Shutting down mid-append: whether the records made it is unknown; tell the waiters
            # to find the coordinator again rather than leave them hanging.
            for write in out.writes:
                for reply in write.replies:
                    deliver(Reply(reply.to, reply.result.failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)))
            raise
        except KafkaError as exc:
            error = append_error_to_response(exc.code)
            if on_storage_failure is not None:
                on_storage_failure(shard.partition, exc.code)
        except Exception:  # noqa: BLE001 - any storage failure becomes a Kafka error code
            log.exception("append_failed", partition=shard.partition, records=len(records))
            error = ErrorCode.UNKNOWN_SERVER_ERROR

        if error is None:
            # Append, then apply, then reply.
            for record in records:
                shard.replay(record)
        for write in out.writes:
            for reply in write.replies:
                deliver(reply if error is None else Reply(reply.to, reply.result.failed(error)))
            if write.then is not None:
                queue.append(shard.on_write_done(write.then, error, now_ms()))


def apply_unwritten(out: Outcome, deliver: Callable[[Reply], None], apply_timer: Callable[[TimerOp], None],
                    on_event: OnEvent) -> None:
    """Steps 1-2 of the contract (outcome.py), what depends on no write: replies, timers, events.
    All of an Outcome without writes; the shell calls it directly for those (a Heartbeat)."""
    for reply in out.replies:
        deliver(reply)
    for op in out.timers:
        apply_timer(op)
    for event in out.events:
        on_event(event)


def runs_without_waiting(out: Outcome, pipelines: bool) -> bool:
    """Whether `execute_outcome` carries `out` out without suspending: no write, or (when the
    caller pipelines: append_nowait and `pipelined` given) only PIPELINED writes."""
    return not out.writes or (pipelines and _all_pipelined(out))


def execute_pipelined(shard: Shard, out: Outcome, *, append_nowait: AppendNowait,
                      pipelined: PipelinedWrites, deliver: Callable[[Reply], None],
                      apply_timer: Callable[[TimerOp], None], on_event: OnEvent,
                      on_storage_failure: Callable[[int, ErrorCode], None] | None) -> None:
    """`execute_outcome` of an Outcome whose writes are all PIPELINED (runs_without_waiting said so),
    called directly: the same steps, without a coroutine per command (every commit passes here)."""
    apply_unwritten(out, deliver, apply_timer, on_event)
    records = [record for write in out.writes for record in write.records]
    pipelined.add(shard, out, records, append_nowait, deliver, on_storage_failure)


def _all_in_log(out: Outcome) -> bool:
    return all(write.durability is Durability.IN_LOG for write in out.writes)


def _replay_in_log(shard: Shard, out: Outcome, records: list[Record], deliver: Callable[[Reply], None],
                   queue: deque[Outcome], now_ms: Callable[[], int]) -> None:
    """Writes whose records the log holds already (Durability.IN_LOG): apply them, reply, follow up."""
    for record in records:
        shard.replay(record)
    for write in out.writes:
        for reply in write.replies:
            deliver(reply)
        if write.then is not None:
            queue.append(shard.on_write_done(write.then, None, now_ms()))


def _all_pipelined(out: Outcome) -> bool:
    for write in out.writes:  # a loop, not all(<genexpr>): every commit asks
        if write.durability is not Durability.PIPELINED or write.then is not None:
            return False
    return True


class PipelinedWrites:
    """The pipelined writes of one partition still waiting for their fsync (the runtime owns one).

    Commits taken in one turn of the loop share one durability wait (broker/coordinators/offsets_topic.py holds
    them as one batch), so their replies are kept together: one list, one callback and one
    `released` future per wait rather than per commit. `pending` is the latest such future, which
    OffsetFetch waits for; `waits` keeps every one alive until done.
    """

    __slots__ = ("pending", "waits", "_durable", "_replies")

    def __init__(self) -> None:
        self.pending: asyncio.Future[None] | None = None
        self.waits: set[asyncio.Future[None]] = set()
        self._durable: object = None  # the wait `pending` was made for, while it may still be joined
        self._replies: list[Reply] = []

    def add(self, shard: Shard, out: Outcome, records: list[Record], append_nowait: AppendNowait,
            deliver: Callable[[Reply], None],
            on_storage_failure: Callable[[int, ErrorCode], None] | None) -> None:
        """PIPELINED writes: append and apply now, reply once durable.

        The group's next command then need not wait for this fsync, so a group's commits share fsyncs
        (Kafka's CoordinatorRuntime likewise applies records at append and holds responses until they
        are committed). What keeps memory honest: readers of offsets (OffsetFetch) are answered only
        once the pending writes they could see are durable (`pending`), and if the fsync fails the
        replies carry NOT_COORDINATOR and the partition is unloaded, so the applied-but-not-durable
        records are never served; the log itself is fenced until restart.
        """
        replies = [reply for write in out.writes for reply in write.replies]
        partition = shard.partition
        try:
            durable = append_nowait(partition, records)
        except KafkaError as exc:
            _fail(replies, append_error_to_response(exc.code), deliver)
            if on_storage_failure is not None:
                on_storage_failure(partition, exc.code)
            return
        except Exception:  # noqa: BLE001 - any storage failure becomes a Kafka error code
            log.exception("append_failed", partition=partition, records=len(records))
            _fail(replies, ErrorCode.UNKNOWN_SERVER_ERROR, deliver)
            return
        for record in records:
            shard.replay(record)
        if durable is self._durable and not durable.done():  # type: ignore[attr-defined]  # the same held batch as the last write: its replies go with those
            self._replies.extend(replies)
            return
        self._durable, self._replies = durable, replies
        self.pending = released = self._release_on(durable, replies, partition, deliver, on_storage_failure)
        self.waits.add(released)
        released.add_done_callback(self._done)

    def _done(self, released: asyncio.Future[None]) -> None:
        self.waits.discard(released)
        if not released.cancelled():
            released.exception()  # reported through the replies; keeps asyncio from logging it again
        if released is self.pending:
            self._durable = None

    def _release_on(self, durable: Awaitable[None], replies: list[Reply], partition: int,
                    deliver: Callable[[Reply], None],
                    on_storage_failure: Callable[[int, ErrorCode], None] | None) -> asyncio.Future[None]:
        # A callback on the wait, not a task per write: under load every commit passes here.
        waiting = asyncio.ensure_future(durable)
        released: asyncio.Future[None] = waiting.get_loop().create_future()

        def release(done: asyncio.Future[None]) -> None:
            if self._durable is durable:
                self._durable = None  # no later write joins a wait that has ended
            if done.cancelled():
                released.cancel()
                return
            exc = done.exception()
            if exc is None:
                for reply in replies:
                    deliver(reply)
                released.set_result(None)
                return
            if isinstance(exc, KafkaError):
                _fail(replies, append_error_to_response(exc.code), deliver)
                if on_storage_failure is not None:
                    on_storage_failure(partition, exc.code)
                released.set_exception(exc)
                return
            log.error("append_failed", partition=partition, replies=len(replies), exc_info=exc)
            _fail(replies, ErrorCode.UNKNOWN_SERVER_ERROR, deliver)
            if on_storage_failure is not None:
                on_storage_failure(partition, ErrorCode.KAFKA_STORAGE_ERROR)
            failure = KafkaError(str(exc), ErrorCode.KAFKA_STORAGE_ERROR)
            failure.__cause__ = exc
            released.set_exception(failure)

        waiting.add_done_callback(release)
        return released


def _fail(replies: list[Reply], error: ErrorCode, deliver: Callable[[Reply], None]) -> None:
    for reply in replies:
        deliver(Reply(reply.to, reply.result.failed(error)))


def run_now(awaitable: Awaitable[None]) -> None:
    """Run a coroutine that must not actually suspend (in-memory appends), synchronously."""
    coro = awaitable.__await__()
    try:
        coro.send(None)
    except StopIteration:
        return
    raise RuntimeError("the coroutine suspended; use an event loop")
