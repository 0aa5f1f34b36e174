"""One partition this node leads, with its log in PostgreSQL, as a `PartitionStore` (broker/storage/api.py).

Opened by log.py when the node becomes the partition's leader: the index of the batches the database
holds is read then, with the bytes of the newest of them (the tail, batch_index.py; memory.py bounds
it); reads of the tail are served from memory, reads below it from the database: the fetch path awaits
`prepare_read` (which reads the missing batches into the node's read cache, one query per range
however many readers ask) before its synchronous `read`, so no reader blocks the event loop. The
database is the durable copy and what the next leader reads.
An append assigns offsets at once and queues the batch for the node's next commit round; the high
watermark is the committed end, so a consumer reads only what PostgreSQL committed.

The producer state is the store's own, as on the segment engine: rebuilt from the stored batches'
headers when the partition opens, so an idempotent producer's retry reaching the new leader is answered
with the first append's offsets, and its next batch must follow its last sequence.

DeleteRecords moves the log start here at once and in the database with the node's next round, fenced
as appends are (log.py); compaction's rewrites too (compaction.py). Partitions that are compacted or
replayed by a coordinator keep every batch in memory (`resident`, batch_index.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import TYPE_CHECKING, Any, AsyncContextManager, Callable, Iterable

from ....protocol import record_batch as rb
from ....protocol.control_records import encode_marker
from ....protocol.errors import ErrorCode, KafkaError
from ..api import AppendOrigin, AppendResult, Isolation
from ..log.epochs import LeaderEpochs
from ..log.partition_log import stamp_batch
from ..log.timestamp_search import BatchToWalk, first_at, first_at_or_after, walk_inline
from ..log.validation import check_appended_batches
from ..producer_state import PartitionProducerState, ProducerEntry
from .batch_index import kept_whole
from .compaction import still_there

if TYPE_CHECKING:
    from ..log.config import LogConfig
    from ..log.validation import InlineBudget
    from .batch_index import StoredBatches
    from .log import PostgresLog

# (base offset, last offset, header, bytes) of a batch appended and not yet committed
Pending = tuple[int, int, rb.BatchHeader, bytes]


class PostgresPartitionStore:
    def __init__(self, plog: PostgresLog, topic: str, partition: int, config: LogConfig, *, topic_id: uuid.UUID,
                 leader_epoch: int,
                 log_start: int, log_end: int, epochs: LeaderEpochs, producer_state: PartitionProducerState,
                 batches: StoredBatches, cleaned_to: int = 0) -> None:
        self._log = plog
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self._config = config
        self.leader_epoch = leader_epoch
        self._log_start = log_start
        self._end = log_end  # the next offset to assign (appended, committed or not)
        self._committed = log_end  # the high watermark
        self.epochs = epochs
        self.producer_state = producer_state
        self._batches = batches
        self._read_error: Exception | None = None  # the last read from the database that failed
        self._pending: list[Pending] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (offset, resolved once committed past it)
        self._start_to_store: int | None = None  # a log start moved here and not yet in a round
        self._start_stored = log_start  # the log start the database holds
        self._start_waiters: list[tuple[int, asyncio.Future[None]]] = []  # (log start, resolved once stored)
        self._rewrites: list[tuple[int, Pending | None]] = []  # compaction's: (stored base, its replacement)
        self.last_compaction: tuple[object, int] | None = None  # (what the log was, when), compaction.py
        # where the last compaction's cleanable part ended (the dirty part begins), as the database kept it
        # (partitions.cleaned_to, stored by the round after each run): a new leader starts from there
        self.cleaned_to = max(log_start, cleaned_to)
        self._cleaned_to_store: int | None = None  # a compaction run's end not yet in a round
        self._offline: Exception | None = None
        self._closed = False
        self.before_append: Callable[[], None] | None = None

    # --- offsets and state ------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:  # the topic's configs changed (engine.refresh)
        self._config = config
        if self._batches.resident and not kept_whole(self.topic, config):
            self._batches.let_go(self._committed)  # compact no longer: its old batches can go to the database

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def high_watermark(self) -> int:
        return self._committed

    @property
    def last_stable_offset(self) -> int:
        return self.producer_state.last_stable_offset(self._committed)

    @property
    def size_bytes(self) -> int:
        return self._batches.size

    @property
    def resident(self) -> bool:
        """Every batch's bytes in memory (compacted and replayed partitions), not a tail only."""
        return self._batches.resident

    @property
    def batches(self) -> StoredBatches:
        return self._batches

    @property
    def offline(self) -> Exception | None:
        return self._offline

    @property
    def closed(self) -> bool:
        return self._closed

    # --- writing ----------------------------------------------------------------------------------

    def _writable(self) -> None:
        if self._offline is not None:
            raise self._offline
        if self._closed:
            raise KafkaError(f"node {self._log.node_id} no longer leads {self.topic}-{self.partition}",
                             ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self._log.fenced():
            raise KafkaError(f"node {self._log.node_id}'s lease may have expired: it appends to no partition",
                             ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def append(self, records: bytes | bytearray | memoryview, *, origin: AppendOrigin, now_ms: int,
               leader_epoch: int, headers: list[rb.BatchHeader] | None = None) -> AppendResult:
        """As the segment engine's append (api.py): a client's retry of one of its last five batches
        is answered with the stored offsets; a sequence or epoch violation raises. The batch is in
        memory now and committed by the node's next round (`durable()` waits for it)."""
        if self.before_append is not None:
            self.before_append()
        self._writable()
        client = origin is AppendOrigin.CLIENT
        if headers is None:
            headers = rb.validate_produced_batches(records, single_batch=client, allow_control=False)
        state = self.producer_state
        if client and headers[0].producer_id >= 0:
            duplicate = state.check(headers[0])
            if duplicate is not None:
                return AppendResult(self, duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                    self._log_start, duplicate=True)
        config = self._config
        check_appended_batches(records, headers, config, now_ms, records_checked=client)
        return self._add(bytearray(records), headers, now_ms, leader_epoch)

    def _add(self, buf: bytearray, headers: list[rb.BatchHeader], now_ms: int, leader_epoch: int) -> AppendResult:
        config = self._config
        base = offset = self._end
        pos = 0
        for header in headers:
            stamp_batch(buf, pos, header, offset, self.leader_epoch, config.log_append_time, now_ms)
            data = bytes(buf[pos:pos + header.size])
            self._pending.append((offset, header.next_offset - 1, header, data))
            self._batches.append(offset, header.next_offset - 1, rb.read_header(data).max_timestamp, data)
            if header.producer_id >= 0 and not header.is_control:
                self.producer_state.update(header, offset, header.next_offset - 1, now_ms)
            offset = header.next_offset
            pos += header.size
        self._end = offset
        self._log.queue(self)
        return AppendResult(self, base, offset - 1, now_ms if config.log_append_time else -1, self._log_start)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int, leader_epoch: int, transaction_version: int = 0) -> AppendResult:
        self._writable()
        state = self.producer_state
        state.check_marker(producer_id, producer_epoch, transaction_version)  # raises when stale
        batch = bytearray(encode_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms))
        result = self._add(batch, [rb.read_header(batch)], now_ms, leader_epoch)
        state.update_marker_epoch(producer_id, producer_epoch, now_ms, coordinator_epoch)
        state.marker_appended(producer_id, result.last_offset)
        return AppendResult(self, result.base_offset, result.last_offset, -1, self._log_start)

    def complete_marker(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        self.producer_state.complete_txn(producer_id, commit, marker_offset)

    def durable_future(self, offset: int) -> asyncio.Future[None] | None:
        if offset < self._committed:
            return None
        if self._offline is not None:
            raise self._offline
        if self._closed:  # deposed before this offset committed: it never will here
            raise KafkaError(f"node {self._log.node_id} no longer leads {self.topic}-{self.partition}",
                             ErrorCode.NOT_LEADER_OR_FOLLOWER)
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        return future

    def request_durability(self) -> None:
        """Every append is committed by a round already (acks=0 included)."""

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: `offset` (at most the high watermark) is the new log start, at once for reads
        here; the node's next round stores it, fenced as appends are, and deletes the batches wholly
        below it (`durable_log_start` waits for that). Returns the log start, which never moves back."""
        if offset < 0 or offset > self._committed:
            raise KafkaError(f"cannot delete before {offset}: high watermark is {self._committed}",
                             ErrorCode.OFFSET_OUT_OF_RANGE)
        self._writable()
        if offset > self._log_start:
            self._move_log_start(offset)
        return self._log_start

    def _move_log_start(self, offset: int) -> None:
        self._log_start = offset
        self._batches.drop_first(self._batches.first_holding(offset))  # the batches wholly below it
        self._start_to_store = offset
        self._log.queue(self)

    def durable_log_start(self) -> asyncio.Future[None] | None:
        """Resolved once the log start this store moved is in the database (None: nothing to wait for)."""
        if self._start_to_store is None and self._start_stored >= self._log_start:
            return None
        if self._offline is not None:
            raise self._offline
        future = asyncio.get_running_loop().create_future()
        self._start_waiters.append((self._log_start, future))
        return future

    def after_durability_round(self, callback: Callable[[], None]) -> bool:
        return self._log.after_round(callback)

    # --- what the node's rounds tell the store --------------------------------------------------------

    def take_pending(self) -> list[Pending]:
        pending, self._pending = self._pending, []
        return pending

    def apply_rewrite(self, changes: list[tuple[int, bytes, Pending | None]]) -> int:
        """Compaction's result (compaction.py): each batch still here as it was read is replaced (or
        removed) in memory now and queued for the next round. Returns how many were."""
        if self._closed or self._offline is not None:
            return 0
        applied = 0
        batches = self._batches
        for base, old, new in changes:
            i = still_there(batches.bases, batches.data, base, old)
            if i is None:  # trimmed by DeleteRecords or retention meanwhile
                continue
            batches.replace(i, None if new is None else (new[0], new[1], new[2].max_timestamp, new[3]))
            self._rewrites.append((base, new))
            applied += 1
        if applied:
            self._log.queue(self)
        return applied

    def take_rewrites(self) -> list[tuple[int, Pending | None]]:
        rewrites, self._rewrites = self._rewrites, []
        return rewrites

    def cleaned(self, offset: int) -> None:
        """A compaction run's cleanable part ended at `offset`: kept here, and queued for the next round,
        which stores it with the run's rewrites (the cleaner's checkpoint, as Kafka's
        cleaner-offset-checkpoint file), so the next leader's cleaner starts where this one ended."""
        if offset <= self.cleaned_to or self._closed or self._offline is not None:
            return
        self.cleaned_to = offset
        self._cleaned_to_store = offset
        self._log.queue(self)

    def take_cleaned_to(self) -> int | None:
        cleaned, self._cleaned_to_store = self._cleaned_to_store, None
        return cleaned

    def take_log_start(self) -> int | None:
        """The log start to store in this round, if it moved since the last."""
        start, self._start_to_store = self._start_to_store, None
        return start

    def log_start_stored(self, start: int) -> None:
        self._start_stored = max(self._start_stored, start)
        waiters = self._start_waiters
        self._start_waiters = [(o, f) for o, f in waiters if o > self._start_stored]
        for offset, future in waiters:
            if offset <= self._start_stored and not future.done():
                future.set_result(None)

    def committed(self, end: int) -> None:
        """The database committed every batch below `end`: the high watermark moves, waiters are answered."""
        self._committed = max(self._committed, end)
        self._batches.trim(self._committed)
        waiters = self._waiters
        self._waiters = [(o, f) for o, f in waiters if o >= end]
        for offset, future in waiters:
            if offset < end and not future.done():
                future.set_result(None)

    def _fail_waiters(self, error: Exception) -> None:
        self._start_to_store = None
        self._rewrites = []
        self._cleaned_to_store = None
        waiters, self._waiters = self._waiters + self._start_waiters, []
        self._start_waiters = []
        for _, future in waiters:
            if not future.done():
                future.set_exception(error)

    def depose(self, error: Exception | None) -> None:
        """Another node leads the partition now (or this one closed it): nothing more is appended, and
        what was not committed is gone (its waiters get `error`, NOT_LEADER_OR_FOLLOWER)."""
        self._closed = True
        self._batches.release()
        self._drop_uncommitted()
        self._fail_waiters(error or KafkaError(f"{self.topic}-{self.partition} was closed",
                                               ErrorCode.NOT_LEADER_OR_FOLLOWER))

    def take_offline(self, error: Exception) -> None:
        self._offline = error
        self._batches.release()
        self._drop_uncommitted()
        self._fail_waiters(error)

    def _drop_uncommitted(self) -> None:
        self._pending = []
        self._batches.drop_from(self._batches.count_below(self._committed))
        self._end = self._committed

    # --- reading ----------------------------------------------------------------------------------

    def _upto(self, isolation: Isolation) -> int:
        if isolation is Isolation.LOG_END:
            return self._end
        if isolation is Isolation.HIGH_WATERMARK:
            return self._committed
        return self.last_stable_offset

    def read(self, offset: int, max_bytes: int, isolation: Isolation, *,
             min_one_batch: bool = True) -> bytes | memoryview:
        """Whole batches from `offset` below what `isolation` allows, up to `max_bytes` (one at least
        with `min_one_batch`), as far as they are in memory: the tail, and what `prepare_read` read
        into the cache (a read below the tail that was not prepared returns what is here: nothing, or
        KAFKA_STORAGE_ERROR when the database's last read failed). OffsetOutOfRangeError outside
        [log start, log end]."""
        if not self._log_start <= offset <= self._end:
            raise KafkaError(f"offset {offset} is outside [{self._log_start}, {self._end}] of "
                             f"{self.topic}-{self.partition}", ErrorCode.OFFSET_OUT_OF_RANGE)
        upto = self._upto(isolation)
        batches = self._batches
        i = batches.first_holding(offset)
        out: list[bytes] = []
        size = 0
        while i < len(batches) and batches.bases[i] < upto:
            data = batches.batch(i)
            if data is None:
                if not out and self._read_error is not None:
                    error, self._read_error = self._read_error, None
                    raise KafkaError(f"reading {self.topic}-{self.partition} from the database failed: {error!r}",
                                     ErrorCode.KAFKA_STORAGE_ERROR)
                break
            if size + len(data) > max_bytes and (out or not min_one_batch):
                break
            out.append(data)
            size += len(data)
            i += 1
        return b"".join(out)

    def prepare_read(self, offset: int, max_bytes: int) -> asyncio.Future[None] | None:
        """Make a read from `offset` of up to `max_bytes` servable from memory: None when it is (the
        tail, or cached), else a future resolved once the missing batches are read from the database
        into the node's read cache (readers of the same batches at once share that one query)."""
        if self._closed or self._offline is not None or not self._log_start <= offset < self._committed:
            return None
        batches = self._batches
        i = batches.first_holding(offset)
        if i >= batches.tail_from:
            return None
        span = batches.to_read(i, min(max_bytes, batches.cache.max_bytes // 2), self._committed)
        return None if span is None else self._log.read_batches(self, span)

    async def hold_whole(self, chunk_bytes: int = 4 * 1024 * 1024) -> bool:
        """Read every batch below the tail back into memory (the topic became compact while this node
        led it: compaction walks every batch), newest first, a chunk a query; True once whole. Stops if
        the store closes or the topic is compact no longer."""
        batches = self._batches
        batches.holding = True
        try:
            while not batches.resident:
                if self._closed or self._offline is not None or not kept_whole(self.topic, self._config):
                    return False
                span = batches.below_tail(chunk_bytes)
                if span is None:
                    batches.hold([])
                    break
                before = batches.tail_from
                batches.hold(await self._log.fetch_batches(self, span))
                if batches.tail_from == before:  # (the log start passing them meanwhile moves it too)
                    return False  # not as the index has it: the cleaner's next pass tries again
            return True
        finally:
            if not batches.resident:
                batches.holding = False
                batches.trim(self._committed)

    def read_failed(self, error: Exception) -> None:
        self._read_error = error

    def prepare_timestamp_search(self, timestamp: int | None, from_offset: int) -> asyncio.Future[None] | None:
        """Make the batch that ListOffsets' search by `timestamp` walks next (None: the largest
        timestamp's) readable: None when it is, else a future as `prepare_read`'s."""
        i = self._timestamp_batch(timestamp, from_offset)
        return None if i is None else self.prepare_read(max(self._batches.bases[i], self._log_start), 1)

    def _timestamp_batch(self, timestamp: int | None, from_offset: int) -> int | None:
        """The index of the first committed batch from `from_offset` that may hold `timestamp` (None:
        of the first with the largest timestamp), by the index's timestamps."""
        batches = self._batches
        committed = batches.count_below(self._committed)
        first = batches.first_holding(max(from_offset, self._log_start))
        if timestamp is None:
            stamps = batches.max_timestamps
            return max(range(first, committed), key=lambda i: (stamps[i], -i), default=None)
        for i in range(first, committed):
            if batches.max_timestamps[i] >= timestamp:
                return i
        return None

    def _batch_to_search(self, i: int) -> bytes:
        data = self._batches.batch(i)
        if data is None:  # not prepared, or evicted since (a storm of reads): the client asks again
            raise KafkaError(f"batch {self._batches.bases[i]} of {self.topic}-{self.partition} is not in memory",
                             ErrorCode.KAFKA_STORAGE_ERROR)
        return data

    def committed_batches(self) -> list[tuple[int, bytes]]:
        """(base offset, bytes) of each committed batch from the log start: compaction walks them, on a
        resident partition (every batch's bytes in memory)."""
        batches = self._batches
        end = batches.count_below(self._committed)
        return [(base, data) for base, data in zip(batches.bases[:end], batches.data[:end]) if data is not None]

    def committed_index(self) -> list[tuple[int, int, int]]:
        """(base offset, size, largest timestamp) of each committed batch from the log start (retention)."""
        batches = self._batches
        end = batches.count_below(self._committed)
        return list(zip(batches.bases[:end], batches.sizes[:end], batches.max_timestamps[:end]))

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        return self.producer_state.aborted_between(start, upper)

    def has_aborted_transactions(self) -> bool:
        return bool(self.producer_state.aborted)

    def offset_for_timestamp(self, timestamp: int, from_offset: int,
                             budget: InlineBudget | None) -> tuple[int, int] | BatchToWalk | None:
        i = self._timestamp_batch(timestamp, from_offset)
        if i is None:
            return None
        data = self._batch_to_search(i)
        header = rb.read_header(data)
        if not walk_inline(header, budget):
            return BatchToWalk(data, timestamp, from_offset, resume_offset=header.next_offset)
        found = first_at_or_after(data, timestamp, from_offset)
        if found is not None:
            return found
        # none from `from_offset` on in this batch: the search goes on from the next (prepared first)
        return BatchToWalk(data, timestamp, from_offset, resume_offset=header.next_offset)

    def max_timestamp_offset(self, budget: InlineBudget | None) -> tuple[int, int] | BatchToWalk:
        i = self._timestamp_batch(None, self._log_start)
        if i is None:
            return -1, -1
        data = self._batch_to_search(i)
        header = rb.read_header(data)
        otherwise = (header.next_offset - 1, header.max_timestamp)
        if not walk_inline(header, budget):
            return BatchToWalk(data, header.max_timestamp, header.base_offset, otherwise=otherwise, exact=True)
        return first_at(data, header.max_timestamp) or otherwise

    def offsets_before(self, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
        """ListOffsets v0: no segments here, so the log start and (latest) the high watermark."""
        offsets = [self._committed] if timestamp == -1 else [self._log_start] if timestamp == -2 else \
            [self._committed, self._log_start]
        return offsets[:max(0, max_num_offsets)]

    def producers(self) -> Iterable[tuple[ProducerEntry, int]]:
        state = self.producer_state
        return [(entry, state.ongoing.get(entry.producer_id, -1)) for entry in state.producers.values()]

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self._log_start, self._end)

    def epoch_at(self, offset: int) -> int:
        return self.epochs.epoch_at(offset)

    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch()

    def assign_leader_epoch(self, epoch: int) -> None:
        """The database's election opened the term (metadata.elect); the store learns of it."""
        self.epochs.assign(epoch, self._end)

    def stable_for_reading(self) -> AsyncContextManager[Any]:
        return contextlib.nullcontext()


if TYPE_CHECKING:  # mypy checks that the store is the port's PartitionStore
    from ..api import PartitionStore

    def _conforms(store: PostgresPartitionStore) -> PartitionStore:
        return store
