"""The log of one topic-partition: a list of segments, the last one active.

One writer per partition: `append` is synchronous and runs on the event-loop thread, so appends never
interleave; only fsyncs leave the loop (see flusher.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import structlog

from ....protocol import record_batch as rb
from ....protocol.errors import ErrorCode, KafkaError

from .config import FlushPolicy, LogConfig
from .files import bounded_name, fsync_dir, write_file_durably
from .flusher import Flusher, StorageError
from ....purgatory.clock import Clock, SystemClock
from .segment import LogSegment
from .sync_batcher import SyncBatcher
from .timestamp_search import BatchToWalk
from .validation import InlineBudget, check_appended_batches

if TYPE_CHECKING:
    from ..producer_state import PartitionProducerState

log = structlog.get_logger(__name__)

CHECKPOINT_FILE = "checkpoint.json"


class OffsetOutOfRangeError(KafkaError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


@dataclass(slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


@dataclass(slots=True)
class ReadResult:
    records: bytes | memoryview  # a memoryview only for read(view=True)
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int


__all__ = ["AppendInfo", "OffsetOutOfRangeError", "PartitionLog", "ReadResult", "fsync_dir", "write_file_durably"]


# Shared by every partition with no background task (see _flush_after_roll): never added to.
_NO_TASKS: frozenset[asyncio.Task[None]] = frozenset()


class PartitionLog:
    # Slots and lazily made members: thousands of idle partitions each hold one of these. "__dict__"
    # keeps other attributes possible (a dict is made only for an object that gets one).
    __slots__ = ("_dir", "clock", "topic", "partition", "config", "segments", "_segment_bases",
                 "_recovery_point", "log_start_offset", "_background", "last_compaction", "txn_state",
                 "_maintenance_lock", "closed", "before_append", "_flusher", "_flush_policy", "_fsync",
                 "_batcher", "__dict__")

    def __init__(
        self,
        directory: str | Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        flush_policy: FlushPolicy | str = "always",
        clean_shutdown: bool = False,
        fsync: Callable[[int], None] = os.fsync,
        batcher: SyncBatcher | None = None,
        clock: Clock | None = None,
        empty_at: int | None = None,
    ) -> None:
        """Load the partition's files (making the directory and a first segment when there are none).
        `empty_at`: do not read them; the log is one empty segment at that base offset, as a load
        found it (a dormant partition, see dormant.py)."""
        self._dir = os.fspath(directory)  # a str: a Path per partition cost ~250 B (`directory` makes one)
        self.clock: Clock = clock if clock is not None else SystemClock()  # segment creation times
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[LogSegment] = []
        self._segment_bases: list[int] = []
        self._recovery_point = 0
        self.log_start_offset = 0
        self._background: set[asyncio.Task[None]] | frozenset[asyncio.Task[None]] = _NO_TASKS
        self.last_compaction: tuple[object, int] | None = None  # compaction.py's skip-if-unchanged memo
        # The partition's producer state (broker/storage/producer_state.py) once loaded; compaction respects
        # its open and aborted transactions (log/txn_cleaning.py).
        self.txn_state: PartitionProducerState | None = None
        # Held by whoever reads or rewrites inactive segments from a worker thread (compaction, replay)
        # so that two of them never interleave; appends never need it (they touch only the active one).
        self._maintenance_lock: asyncio.Lock | None = None  # made on first use (maintenance_lock)
        self.closed = False  # closed or deleted: background work must leave it alone
        # Set by a writer that holds records back to write them in one batch (the offsets topic, see
        # OffsetsTopic.append_records_nowait): any other append writes those first, keeping log order.
        self.before_append: Callable[[], None] | None = None
        if empty_at is None:
            os.makedirs(self._dir, exist_ok=True)
            self._load(clean_shutdown)
        else:
            self.segments.append(LogSegment(self._dir, empty_at, config.index_interval_bytes,
                                            created_ms=self.clock.wall_ms(), known_empty=True))
            self._segment_bases.append(empty_at)
            self.log_start_offset = self._recovery_point = empty_at
        # The group-commit state (flusher.py), made with its first use: the first append, wait, flush
        # or close. Only an append moves the log end forward and it asks for the flusher first, so one
        # made late starts from the same durable offset as one made here would have (what load found).
        self._flusher: Flusher | None = None
        self._flush_policy = FlushPolicy.parse(flush_policy)  # the manager's one object, not a copy
        self._fsync = fsync
        self._batcher = batcher

    @staticmethod
    def create_empty(directory: str) -> bool:
        """Make a new partition's directory and first segment's files, with no log object: what
        `PartitionLog(directory, ...)` would leave on disk for a new partition. False, and nothing
        made, when the directory exists already (what it holds must be loaded, not assumed)."""
        try:
            os.mkdir(directory)
        except FileExistsError:
            return False
        LogSegment.create_files(directory, 0)
        return True

    @property
    def directory(self) -> Path:
        return Path(self._dir)

    @property
    def flusher(self) -> Flusher:
        flusher = self._flusher
        if flusher is None:
            flusher = self._flusher = Flusher(self._flush_policy, self, self._fsync, batcher=self._batcher)
        return flusher

    @property
    def has_flusher(self) -> bool:
        return self._flusher is not None

    @property
    def fenced(self) -> StorageError | None:
        """The storage error that took this log offline (flusher.py), without making a flusher."""
        flusher = self._flusher
        return None if flusher is None else flusher.fenced

    @property
    def untouched_empty(self) -> bool:
        """One empty segment and nothing made or held since load: a log that may go dormant (dormant.py),
        since `PartitionLog(..., empty_at=base)` builds it again as it is."""
        segments = self.segments
        if len(segments) != 1:
            return False
        segment = segments[0]
        return (segment.size == 0 and segment.next_offset == segment.base_offset == self.log_start_offset
                and self._flusher is None and not self._background and self._maintenance_lock is None
                and self.txn_state is None and self.before_append is None and not self.closed
                and self.last_compaction is None and segment.untouched)

    @property
    def maintenance_lock(self) -> asyncio.Lock:
        lock = self._maintenance_lock
        if lock is None:
            lock = self._maintenance_lock = asyncio.Lock()  # binds to the running loop on first wait
        return lock

    # --- loading and recovery -------------------------------------------------------------------------

    def _read_checkpoint(self) -> tuple[int | None, int, int | None]:
        """(log start, recovery point, log end offset at the last clean close or None)."""
        try:
            with open(os.path.join(self._dir, CHECKPOINT_FILE), encoding="utf-8") as f:
                data = json.loads(f.read())
            end = data.get("log_end_offset")
            return int(data["log_start_offset"]), int(data["recovery_point"]), None if end is None else int(end)
        except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
            return None, 0, None  # no trustworthy checkpoint: recover every segment

    def persist_checkpoint(self, *, closing: bool = False) -> None:
        body = {"log_start_offset": self.log_start_offset, "recovery_point": self._recovery_point}
        if closing:
            # Only a clean close knows the final log end; any later checkpoint drops it again, so a
            # start that finds less than this knows the tail was lost while the broker was stopped.
            body["log_end_offset"] = self.log_end_offset
        write_file_durably(self.directory / CHECKPOINT_FILE, json.dumps(body).encode())

    def _load(self, clean_shutdown: bool) -> None:
        # One listing of plain names: a start loads every partition, and three pathlib globs each were
        # most of the time to open 2,000 of them.
        names = os.listdir(self._dir)
        for name in names:
            # compaction output that never got swapped in, and half-written checkpoints
            if name.endswith(".cleaned") or name.endswith(".tmp"):
                os.unlink(os.path.join(self._dir, name))
        checkpoint_start, recovery_point, checkpoint_end = self._read_checkpoint()
        bases = sorted(int(name[:-4]) for name in names if name.endswith(".log") and name[:-4].isdigit())
        interval = self.config.index_interval_bytes
        damaged = False
        for i, base in enumerate(bases):
            last = i == len(bases) - 1
            # The active segment is always validated, clean shutdown or not: appends must never land
            # behind a batch that does not validate. Older ones are when the stop was unclean and they
            # are past the recovery point, when their index fails its sanity check, or when an
            # earlier segment was damaged.
            recover = last or damaged or (not clean_shutdown and base >= recovery_point)
            segment, result = LogSegment.open(self._dir, base, interval, recover=recover,
                                              created_ms=self.clock.wall_ms())
            if segment.next_offset > base and self.segments and self.segments[-1].next_offset > base:
                # Overlaps the segment before it (which must have been damaged into nonsense): keep the
                # earlier data, never serve two batches for one offset.
                log.warning("segment_deleted_overlapping", file=str(segment.log_path), base_offset=base)
                segment.delete()
                continue
            self.segments.append(segment)
            if result is not None and result.truncated_bytes and not last:
                # Unlike Kafka (which refetches from replicas) we have no other copy: later segments
                # are kept, each validated, and the offsets lost in between become a gap readers skip.
                damaged = True
                log.warning("segment_truncated_in_middle_of_log", file=str(segment.log_path),
                            lost_from_offset=segment.next_offset, next_segment_base=bases[i + 1],
                            bytes=result.truncated_bytes)
        if not self.segments:
            self.segments.append(LogSegment(self._dir, checkpoint_start or 0, interval,
                                            created_ms=self.clock.wall_ms()))
        self._segment_bases = [s.base_offset for s in self.segments]
        if not self.config.compact:  # compaction leaves gaps on purpose; elsewhere a gap is lost data
            for before, after in zip(self.segments, self.segments[1:]):
                if before.next_offset < after.base_offset:
                    log.warning("log_gap_between_segments", file=str(before.log_path),
                                lost_from_offset=before.next_offset, lost_to_offset=after.base_offset - 1)
        if checkpoint_end is not None and self.log_end_offset < checkpoint_end:
            # The log was cut (on a batch boundary, or recovery just truncated it) while the broker was
            # stopped after a clean close. The records are gone; their offsets must not be reused, or
            # consumers positioned past them would silently skip new records: restart at the old end.
            log.warning("log_end_behind_checkpoint", topic=self.topic, partition=self.partition,
                        log_end_offset=self.log_end_offset, checkpointed_log_end_offset=checkpoint_end,
                        offsets_lost=checkpoint_end - self.log_end_offset)
            self._start_segment_at(checkpoint_end)
        first = self.segments[0].base_offset
        start = first if checkpoint_start is None else max(checkpoint_start, first)
        self.log_start_offset = min(start, self.log_end_offset)
        self._recovery_point = self.active.base_offset

    def _start_segment_at(self, offset: int) -> None:
        interval = self.config.index_interval_bytes
        if self.active.size == 0:
            self.segments.pop().delete()
            self._segment_bases.pop()
        else:
            self.active.mark_inactive()
        self.segments.append(LogSegment(self._dir, offset, interval, created_ms=self.clock.wall_ms()))
        self._segment_bases.append(offset)

    # --- offsets --------------------------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    def end_to_sync(self) -> int:  # (Flusher)
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset  # one node: every appended record is "replicated"

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark  # no transactions are tracked yet

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appending ------------------------------------------------------------------------------------

    def append(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int, now_ms: int, single_batch: bool = False,
        control: bool = False, validated: list[rb.BatchHeader] | None = None,
    ) -> AppendInfo:
        """Validate, assign offsets, and write to the page cache. Durability: `await wait_durable(last)`.

        `validated`: the headers `rb.validate_produced_batches` returned for `records`, when the caller
        has run it and the timestamp and per-record rules (Produce, through `check_produced_batch`;
        the coordinator, for the batches it builds): none is repeated here."""
        if self.before_append is not None:
            self.before_append()
        config = self.config
        headers = validated if validated is not None else rb.validate_produced_batches(
            records, single_batch=single_batch, allow_control=control)
        if self.flusher.fenced is not None:
            raise self.flusher.fenced
        check_appended_batches(records, headers, config, now_ms, records_checked=validated is not None)
        offset = self.log_end_offset
        base_offset = offset
        positions: list[tuple[int, rb.BatchHeader]] = []
        data: list[bytes | bytearray | memoryview]
        if len(headers) == 1 and not config.log_append_time and headers[0].timestamp_type == rb.TIMESTAMP_CREATE_TIME:
            # The one batch of a Produce: its new first 16 bytes (base offset, length, leader epoch)
            # and the rest as received, written together, rather than a copy of the whole batch.
            header = headers[0]
            data = [rb.offsets_prefix(records, offset, leader_epoch), memoryview(records)[rb.OFFSETS_PREFIX_SIZE:]]
            header.base_offset = offset
            header.partition_leader_epoch = leader_epoch
            positions.append((0, header))
            offset = header.next_offset
        else:
            buf = bytearray(records)
            pos = 0
            for header in headers:
                rb.assign_offsets(buf, pos, offset, leader_epoch)
                if config.log_append_time:
                    rb.set_log_append_time(buf, pos, now_ms)
                    header.max_timestamp = now_ms
                elif header.timestamp_type == rb.TIMESTAMP_LOG_APPEND_TIME:
                    rb.set_create_time(buf, pos)
                    header.attributes = rb.read_header(buf, pos).attributes
                header.base_offset = offset
                header.partition_leader_epoch = leader_epoch
                positions.append((pos, header))
                offset = header.next_offset
                pos += header.size
            data = [buf]
        last_offset = offset - 1
        try:
            self._maybe_roll(len(records), headers[0].max_timestamp, last_offset, now_ms)
            self.active.append(data, positions)
        except OSError as exc:
            # A full or failing disk: what reached the file is unknown, so the log takes no more
            # appends until a restart's recovery has checked it (Kafka takes the log dir offline).
            raise self.flusher.fence(exc) from exc
        return AppendInfo(
            base_offset, last_offset, now_ms if config.log_append_time else -1, self.log_start_offset
        )

    def _maybe_roll(self, incoming_bytes: int, incoming_max_ts: int, last_offset: int, now_ms: int) -> None:
        segment = self.active
        if segment.size == 0:
            return
        config = self.config
        if segment.first_batch_timestamp >= 0 and incoming_max_ts >= 0:
            waited = incoming_max_ts - segment.first_batch_timestamp  # Kafka compares record time to record time
        else:
            waited = now_ms - segment.created_ms
        if (
            segment.size + incoming_bytes > config.segment_bytes
            or waited > config.segment_ms
            or not segment.can_hold_offset(last_offset)
        ):
            self.roll(now_ms)

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        old = self.active
        if old.size == 0:
            return old
        old.mark_inactive()
        new = LogSegment(self._dir, self.log_end_offset, self.config.index_interval_bytes,
                         created_ms=now_ms if now_ms is not None else self.clock.wall_ms())
        self.segments.append(new)
        self._segment_bases.append(new.base_offset)
        log.info("segment_rolled", topic=self.topic, partition=self.partition, base_offset=new.base_offset)
        self._flush_after_roll()
        return new

    def _flush_after_roll(self) -> None:
        # Like Kafka, a rolled segment is fsynced (with its indexes) whatever the flush policy, so the
        # recovery point can move past it and an unclean restart only rescans the active segment.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flusher.sync_now()
            return
        task = loop.create_task(self.flusher.flush_async(), name="log-roll-flush")
        background = self._background
        if not isinstance(background, set):
            background = self._background = set()
        background.add(task)
        task.add_done_callback(background.discard)
        # A failure has fenced the log and been logged (log_fenced); nobody awaits this task.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def segments_to_sync(self) -> list[tuple[LogSegment, bool]]:  # (Flusher)
        active = self.active
        return [
            (s, s is not active and not s.indexes_synced)
            for s in self.segments
            if not s.closed and (s.dirty or (s is not active and not s.indexes_synced))
        ]

    def after_sync(self) -> None:  # (Flusher)
        """Advance the recovery point past fully synced inactive segments and persist it."""
        point = self.active.base_offset
        for segment in self.segments[:-1]:
            if segment.dirty or not segment.indexes_synced:
                point = segment.base_offset
                break
        if point != self._recovery_point:
            self._recovery_point = point
            self.persist_checkpoint()

    async def wait_durable(self, offset: int) -> None:
        await self.flusher.wait_durable(offset)

    async def quiesce(self) -> None:
        """Return once the flushes under way (after a roll, or a group-commit round) have finished: an
        explicit point to wait for instead of a sleep."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.flusher.drain()

    def flush(self) -> None:
        self.flusher.sync_now()

    # --- reading --------------------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}"
            )

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True, view: bool = False) -> ReadResult:
        """Whole batches from the one holding `offset` (it may start earlier), within one segment.

        `view=True` (Fetch) may return a memoryview of the bytes read instead of a copy of them."""
        self._check_range(offset)
        data: bytes | memoryview = b""
        i = max(bisect_right(self._segment_bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            if segment.size and segment.next_offset > offset:  # skips segments emptied by compaction
                data = segment.read(offset, max_bytes, min_one_batch)
                break
        if not view and type(data) is memoryview:
            data = data.tobytes()
        return ReadResult(data, self.high_watermark, self.log_start_offset, self.last_stable_offset)

    def offset_for_timestamp(self, timestamp: int, from_offset: int = 0, budget: InlineBudget | None = None
                             ) -> tuple[int, int] | BatchToWalk | None:
        """First (offset, timestamp) at or past `from_offset` whose timestamp >= `timestamp`, for
        ListOffsets. With a `budget` (what the request may still walk on the loop), a batch past it
        comes back as a BatchToWalk (log/timestamp_search.py) for the caller to walk elsewhere and
        go on from."""
        start = max(from_offset, self.log_start_offset)
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            found = segment.find_offset_by_timestamp(timestamp, start, budget)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self, budget: InlineBudget | None = None) -> tuple[int, int] | BatchToWalk:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3); (-1, -1) if
        none. `budget` as for offset_for_timestamp."""
        best: LogSegment | None = None
        for segment in self.segments:
            if segment.next_offset > self.log_start_offset and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None or best.max_timestamp < 0:
            return -1, -1
        return best.record_with_max_timestamp(budget) or (-1, -1)

    # --- truncation and deletion ----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch that holds offsets >= `offset` (batches are removed whole)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            self._reset_at(offset)  # nothing readable survives: start over, empty, at `offset`
        else:
            while self.active.base_offset >= offset:  # cannot empty the list: base[0] <= log start < offset
                self.segments.pop().delete()
                self._segment_bases.pop()
            removed = self.active.truncate_to(offset)
            log.info("log_truncated", topic=self.topic, partition=self.partition, offset=offset, bytes=removed)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.flusher.durable_offset = min(self.flusher.durable_offset, self.log_end_offset)
        self._recovery_point = min(self._recovery_point, self.active.base_offset)
        self.persist_checkpoint()

    def _reset_at(self, offset: int) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = [LogSegment(self._dir, offset, self.config.index_interval_bytes,
                                    created_ms=self.clock.wall_ms())]
        self._segment_bases = [offset]
        self.log_start_offset = offset

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make `offset` the new log start; returns the (possibly unchanged) log start."""
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(f"cannot delete before {offset}: high watermark is {self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.delete_segments_before_log_start()
            self.persist_checkpoint()
        return self.log_start_offset

    def delete_segments_before_log_start(self) -> int:
        """Drop inactive segments wholly below the log start (the next one starts at or before it)."""
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            self.remove_oldest_segment()
            deleted += 1
        return deleted

    def remove_oldest_segment(self) -> None:
        segment = self.segments.pop(0)
        self._segment_bases.pop(0)
        segment.delete()
        if self.segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self.segments[0].base_offset
        log.info("segment_deleted", topic=self.topic, partition=self.partition, base_offset=segment.base_offset)

    def replace_segment(self, index: int, segment: LogSegment) -> None:
        """Swap in a rewritten segment with the same base offset (compaction)."""
        self.segments[index] = segment

    def remove_emptied_segment(self, index: int) -> None:
        """Drop an inactive segment that compaction emptied. Not the first one, so the log start
        offset stays where it was (Kafka never moves it for compaction); reads skip the gap."""
        assert 0 < index < len(self.segments) - 1 and self.segments[index].size == 0
        segment = self.segments.pop(index)
        self._segment_bases.pop(index)
        segment.delete()

    # --- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        if self.before_append is not None and self.flusher.fenced is None:
            self.before_append()  # records held for a batch go out with the final flush
        self.closed = True
        for task in list(self._background):
            task.cancel()  # the final synchronous flush below covers whatever they were doing
        if self.flusher.fenced is not None:
            # Offline after a storage error: write nothing more (no index entry, no checkpoint), so
            # the next start recovers this log from what its files really hold.
            self.flusher.close()
            for segment in self.segments:
                segment._close_files(write_indexes=False)
            return
        self.flusher.close()
        for segment in self.segments:
            segment.close()
        # Everything is synced, but the active segment stays the recovery point: after a later unclean
        # stop it is the one that may have been appended to since.
        self._recovery_point = self.active.base_offset
        self.persist_checkpoint(closing=True)

    def delete(self) -> None:
        """Remove the partition's files (topic deletion)."""
        self.closed = True
        for task in list(self._background):
            task.cancel()
        self.flusher.abandon()
        for segment in self.segments:
            segment._close_files(write_indexes=False)
        # Rename first so a crash mid-delete leaves a "-delete" directory the manager sweeps at start-up,
        # never a half-deleted partition that looks live.
        directory = self.directory
        doomed = directory.with_name(bounded_name(directory.name, f".{uuid.uuid4().hex}-delete"))
        os.replace(directory, doomed)
        import shutil  # here only: shutil imports bz2 and lzma, ~2 ms of every start

        shutil.rmtree(doomed, ignore_errors=True)
