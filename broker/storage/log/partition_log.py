"""The log of one topic-partition: a list of segments, the last one active.

One writer per partition: `append` is synchronous and runs on the event-loop thread, so appends never
interleave; only fsyncs leave the loop (see flusher.py).
"""

from __future__ import annotations

import asyncio
import os
import struct
import uuid
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import structlog

from ....protocol import record_batch as rb
from ....protocol.errors import ErrorCode, KafkaError

from .checkpoint import CHECKPOINT_FILE, CheckpointWriter, write_checkpoint
from .config import FlushPolicy, LogConfig
from .epochs import LeaderEpochs
from .files import bounded_name, fsync_dir, write_file_durably
from .flusher import Flusher, StorageError
from .partition_load import load_partition_files
from ....purgatory.clock import Clock, SystemClock
from .segment import LogSegment
from .sync_batcher import SyncBatcher
from .timestamp_search import BatchToWalk
from .validation import InlineBudget, check_appended_batches

if TYPE_CHECKING:
    from ..producer_state import PartitionProducerState

log = structlog.get_logger(__name__)

_BASE_OFFSET_AND_LENGTH = struct.Struct(">qi")  # a stored batch's first 12 bytes
_LOG_OVERHEAD = 12


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


__all__ = ["AppendInfo", "CHECKPOINT_FILE", "OffsetOutOfRangeError", "PartitionLog", "ReadResult", "fsync_dir",
           "write_file_durably"]


def cut_before_offset(records: bytes | memoryview, limit: int) -> bytes | memoryview:
    """The leading whole batches of stored `records` whose first offset is below `limit` (a read
    never goes past the high watermark or the last stable offset: batches are never split)."""
    end = 0
    size = len(records)
    unpack = _BASE_OFFSET_AND_LENGTH.unpack_from
    while size - end >= _LOG_OVERHEAD:
        base, length = unpack(records, end)
        if base >= limit:
            break
        end += length + _LOG_OVERHEAD
    return records if end >= size else records[:end]


# Shared by every partition with no background task (see _flush_after_roll): never added to.
_NO_TASKS: frozenset[asyncio.Task[None]] = frozenset()



def stamp_batch(buf: bytearray, pos: int, header: rb.BatchHeader, offset: int, leader_epoch: int,
                log_append_time: bool, now_ms: int) -> None:
    """What the leader writes into a batch it appends at `offset` (and into its header): the base
    offset and leader epoch; on a LogAppendTime topic the append time, else a producer's
    LogAppendTime attribute cleared (Kafka keeps CreateTime there)."""
    rb.assign_offsets(buf, pos, offset, leader_epoch)
    if log_append_time:
        rb.set_log_append_time(buf, pos, now_ms)
        header.max_timestamp = now_ms
    elif header.timestamp_type == rb.TIMESTAMP_LOG_APPEND_TIME:
        rb.set_create_time(buf, pos)
        header.attributes = rb.read_header(buf, pos).attributes
    header.base_offset = offset
    header.partition_leader_epoch = leader_epoch

class PartitionLog:
    # Slots and lazily made members: thousands of idle partitions each hold one of these. "__dict__"
    # keeps other attributes possible (a dict is made only for an object that gets one).
    __slots__ = ("_dir", "clock", "topic", "partition", "config", "segments", "_segment_bases",
                 "_recovery_point", "log_start_offset", "_background", "last_compaction", "cleaned_to", "txn_state",
                 "_maintenance_lock", "closed", "before_append", "_flusher", "_flush_policy", "_fsync",
                 "_batcher", "epochs", "hw_listener", "store", "__dict__")

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
        hw_listener: Callable[[str, int], None] | None = None,
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
        self._checkpoints: CheckpointWriter | None = None  # made by the first prune whose write may wait
        self._log_start_unsaved = False  # a prune moved the log start; durable_log_start writes it
        self._background: set[asyncio.Task[None]] | frozenset[asyncio.Task[None]] = _NO_TASKS
        self.last_compaction: tuple[object, int] | None = None  # compaction.py's skip-if-unchanged memo
        self.cleaned_to = 0  # the first dirty offset: where the last compaction stopped (cleaner.py)
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
        # The leader-epoch history (epochs.py), from the checkpoint; empty: epoch 0 from the log start.
        self.epochs = LeaderEpochs()
        # Told (topic, partition) whenever the high watermark moves: the partition service's, which
        # wakes the fetches waiting on it (broker/partitions/service.py).
        self.hw_listener = hw_listener
        self.store: object | None = None  # this log's PartitionStore (store.py), made with its first use
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
    def create_empty(directory: str, base_offset: int = 0) -> bool:
        """Make a new partition's directory and first segment's files, with no log object: what
        `PartitionLog(directory, ...)` would leave on disk for a new partition. False, and nothing
        made, when the directory exists already (what it holds must be loaded, not assumed)."""
        try:
            os.mkdir(directory)
        except FileExistsError:
            return False
        LogSegment.create_files(directory, base_offset)
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
                and self.last_compaction is None and segment.untouched and not self.epochs.entries
                and self.store is None)

    @property
    def maintenance_lock(self) -> asyncio.Lock:
        lock = self._maintenance_lock
        if lock is None:
            lock = self._maintenance_lock = asyncio.Lock()  # binds to the running loop on first wait
        return lock

    # --- loading and recovery -------------------------------------------------------------------------

    def persist_checkpoint(self, *, closing: bool = False) -> None:
        # Only a clean close knows the final log end; any later checkpoint drops it again, so a
        # start that finds less than this knows the tail was lost while the broker was stopped.
        content = (self.log_start_offset, self._recovery_point, self.epochs, self.log_end_offset if closing else None)
        if self._checkpoints is None:
            write_checkpoint(self._dir, *content)
        else:
            self._checkpoints.write_now(*content)
        self._log_start_unsaved = False

    def _checkpoint_content(self) -> tuple:
        # the epochs copied: the worker renders them while the loop may assign a new one
        return self.log_start_offset, self._recovery_point, LeaderEpochs.from_json(self.epochs.to_json()), None

    def durable_log_start(self) -> asyncio.Future[None] | None:
        """Resolved once the log start a prune moved is in a durable checkpoint (None: it is already);
        the prunes asked meanwhile share one write, off the loop (checkpoint.CheckpointWriter)."""
        if not self._log_start_unsaved or self.closed or self.flusher.fenced is not None:
            return None
        self._log_start_unsaved = False
        if self._checkpoints is None:
            self._checkpoints = CheckpointWriter(self._dir, self._checkpoint_content)
        return self._checkpoints.write_soon()

    def _load(self, clean_shutdown: bool) -> None:
        load_partition_files(self, clean_shutdown)

    def start_segment_at(self, offset: int) -> None:
        """A new empty active segment at `offset`, past a gap (a tail lost while the broker was stopped)."""
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
        """What consumers may read (broker/storage/api.py): with the `always` flush policy the durable
        end, since an acknowledgement promises that much; under the others, which acknowledge
        without the disk, the log end. A log never flushed since load is durable to its end."""
        flusher = self._flusher
        end = self.segments[-1].next_offset
        if flusher is None or self._flush_policy.kind != "always":
            return end
        durable = flusher.durable_offset
        return durable if durable < end else end

    def durable_moved(self) -> None:  # (Flusher)
        if self.hw_listener is not None and self._flush_policy.kind == "always":
            self.hw_listener(self.topic, self.partition)

    def appended(self) -> None:
        """After an append: under a policy that does not wait for the disk, the high watermark is the
        log end, so it moved now."""
        if self.hw_listener is not None and self._flush_policy.kind != "always":
            self.hw_listener(self.topic, self.partition)

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
                stamp_batch(buf, pos, header, offset, leader_epoch, config.log_append_time, now_ms)
                positions.append((pos, header))
                offset = header.next_offset
                pos += header.size
            data = [buf]
        last_offset = offset - 1
        epochs = self.epochs.entries
        if leader_epoch > (epochs[-1][0] if epochs else 0):
            self.assign_leader_epoch(leader_epoch, base_offset)  # a term the catalogue opened
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
            or waited > config.max_segment_ms
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

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True, view: bool = False,
             upto: int | None = None) -> ReadResult:
        """Whole batches from the one holding `offset` (it may start earlier), within one segment.

        `upto`: no batch starting at or past this offset (the high watermark, the last stable
        offset); None: up to the log end. `view=True` (Fetch) may return a memoryview of the bytes
        read instead of a copy of them."""
        self._check_range(offset)
        data: bytes | memoryview = b""
        if upto is None or offset < upto:
            i = max(bisect_right(self._segment_bases, offset) - 1, 0)
            for segment in self.segments[i:]:
                if segment.size and segment.next_offset > offset:  # skips segments emptied by compaction
                    data = segment.read(offset, max_bytes, min_one_batch)
                    if upto is not None and segment.next_offset > upto and data:
                        data = cut_before_offset(data, upto)
                    break
        if not view and type(data) is memoryview:
            data = data.tobytes()
        return ReadResult(data, self.high_watermark, self.log_start_offset, self.high_watermark)

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

    # --- leader epochs --------------------------------------------------------------------------------

    def assign_leader_epoch(self, epoch: int, start_offset: int | None = None) -> None:
        """A leadership term starts (at the log end unless told): persisted at once, as Kafka flushes
        its epoch cache, so that OffsetForLeaderEpoch answers the same after a restart."""
        if self.epochs.assign(epoch, self.log_end_offset if start_offset is None else start_offset):
            self.persist_checkpoint()

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_start_offset, self.log_end_offset)

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
        self.epochs.truncate_from_end(self.log_end_offset)
        self.flusher.durable_offset = min(self.flusher.durable_offset, self.log_end_offset)
        self._recovery_point = min(self._recovery_point, self.active.base_offset)
        self.cleaned_to = min(self.cleaned_to, offset)  # Kafka's maybeTruncateCheckpoint
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
            if self.delete_segments_before_log_start():
                self.persist_checkpoint()  # segments went: the file says where the log starts now
            else:  # written by durable_log_start, with the prunes asked meanwhile
                self._log_start_unsaved = True
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
        if self._checkpoints is not None:
            self._checkpoints.closed = True  # the close's own checkpoint (if any) is the last
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
        if self._checkpoints is not None:
            self._checkpoints.closed = True
        for task in list(self._background):
            task.cancel()
        self.flusher.abandon()
        for segment in self.segments:
            segment._close_files(write_indexes=False)
        self.remove_directory(self.directory)

    @staticmethod
    def remove_directory(directory: Path) -> None:
        # Rename first so a crash mid-delete leaves a "-delete" directory the manager sweeps at start-up,
        # never a half-deleted partition that looks live.
        doomed = directory.with_name(bounded_name(directory.name, f".{uuid.uuid4().hex}-delete"))
        os.replace(directory, doomed)
        import shutil  # here only: shutil imports bz2 and lzma, ~2 ms of every start

        shutil.rmtree(doomed, ignore_errors=True)
