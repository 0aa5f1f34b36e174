"""The segment files as a `PartitionStore` (broker/storage/api.py): one per partition log in use, made
with its first use (`LogManager.store`) and kept on the log, so a deleted and re-created topic gets a
new one with its new log.

Everything file-shaped stays behind it: the log's segments and flusher, its maintenance lock, the
producer state and its snapshot. The producer state is the store's own: a client's batch is checked
against it, appended and recorded in one call (`append`), with no await in between, so no other
append to the partition can come between the check and the update.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncContextManager, Callable, Iterable

from ....protocol import record_batch as rb
from ....protocol.control_records import encode_marker
from ..api import AppendOrigin, AppendResult, Isolation
from ..producer_state import PartitionProducerState, ProducerEntry, load_partition_state

if TYPE_CHECKING:
    from ....protocol.record_batch import BatchHeader
    from .config import LogConfig
    from .partition_log import PartitionLog
    from .timestamp_search import BatchToWalk
    from .validation import InlineBudget


class FilePartitionStore:
    __slots__ = ("log", "topic", "partition", "_state")

    def __init__(self, plog: PartitionLog) -> None:
        self.log = plog
        self.topic = plog.topic
        self.partition = plog.partition
        self._state: PartitionProducerState | None = plog.txn_state

    # --- the producer state ---------------------------------------------------------------------------

    @property
    def producer_state(self) -> PartitionProducerState:
        """Loaded with its first use (snapshot plus the log's tail); compaction reads it on the log."""
        state = self._state
        if state is None:
            plog = self.log
            state = plog.txn_state
            if state is None:
                state = plog.txn_state = load_partition_state(plog)
            self._state = state
        return state

    # --- offsets and state ----------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.producer_state.last_stable_offset(self.log.high_watermark)

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def offline(self) -> Exception | None:
        return self.log.fenced

    @property
    def closed(self) -> bool:
        return self.log.closed

    # --- writing --------------------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview, *, origin: AppendOrigin, now_ms: int,
               leader_epoch: int, headers: list[BatchHeader] | None = None) -> AppendResult:
        """Append a client's batch (`headers`: what its checks returned, validation.py) or a
        coordinator's batch (`headers` None: its framing is checked here; a coordinator that read the
        header off the batch it built passes that). A batch with a producer id is recorded in the
        producer state, and a client's is checked against it first: a retry of one of the producer's
        last five batches is answered with that batch's offsets (`duplicate`), a sequence or epoch
        violation raises its Kafka error. Raises KafkaError: KAFKA_STORAGE_ERROR for a disk that
        refuses the write (the log fences itself)."""
        plog = self.log
        client = origin is AppendOrigin.CLIENT
        state = None
        if client:
            assert headers is not None, "a client's batch is checked before it is appended"
            header = headers[0]
            if header.producer_id >= 0:
                state = self.producer_state
                duplicate = state.check(header)
                if duplicate is not None:
                    # Kafka answers the stored batch's timestamp as its append time (UnifiedLog's duplicate)
                    return AppendResult(self, duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                        plog.log_start_offset, duplicate=True)
        try:
            info = plog.append(records, leader_epoch=leader_epoch, now_ms=now_ms, single_batch=client,
                               validated=headers)
        except OSError as exc:  # the log fenced itself (PartitionLog.append)
            raise plog.flusher.fence(exc) from exc
        if not client:
            header = headers[0] if headers else rb.read_header(records)
            if header.producer_id >= 0:
                state = self.producer_state
        if state is not None:
            state.update(header, info.base_offset, info.last_offset, now_ms)
        plog.appended()
        return AppendResult(self, info.base_offset, info.last_offset, info.log_append_time_ms,
                            info.log_start_offset)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int, leader_epoch: int, transaction_version: int = 0) -> AppendResult:
        """A transaction's COMMIT or ABORT marker; InvalidProducerEpochError, and nothing written, for
        a marker older than the producer's epoch (a newer one supersedes it). The transaction stays
        open here until `complete_marker` (once the marker is durable)."""
        state = self.producer_state
        state.check_marker(producer_id, producer_epoch, transaction_version)  # raises when stale
        batch = encode_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        info = self.log.append(batch, leader_epoch=leader_epoch, now_ms=now_ms, single_batch=True, control=True)
        state.update_marker_epoch(producer_id, producer_epoch, now_ms, coordinator_epoch)
        state.marker_appended(producer_id, info.last_offset)
        self.log.appended()
        return AppendResult(self, info.base_offset, info.last_offset, -1, info.log_start_offset)

    def complete_marker(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        self.producer_state.complete_txn(producer_id, commit, marker_offset)

    def durable_future(self, offset: int) -> asyncio.Future[None] | None:
        return self.log.flusher.durable_future(offset)

    def request_durability(self) -> None:
        self.log.flusher.request()

    def delete_records_before(self, offset: int) -> int:
        return self.log.delete_records_before(offset)

    def durable_log_start(self) -> asyncio.Future[None] | None:
        return self.log.durable_log_start()  # the checkpoint, written off the loop with others' prunes

    @property
    def before_append(self) -> Callable[[], None] | None:
        return self.log.before_append

    @before_append.setter
    def before_append(self, hook: Callable[[], None] | None) -> None:
        self.log.before_append = hook

    def after_durability_round(self, callback: Callable[[], None]) -> bool:
        return self.log.flusher.after_round(callback)

    # --- reading --------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, isolation: Isolation, *,
             min_one_batch: bool = True) -> bytes | memoryview:
        """Whole batches from `offset`, none past what `isolation` allows (the last one that fits
        may be cut off; one whole batch at least with `min_one_batch`). OffsetOutOfRangeError outside
        [log start, log end]; CorruptRecordError for damage (with where to resume)."""
        plog = self.log
        if isolation is Isolation.LOG_END:
            upto = None
        elif isolation is Isolation.HIGH_WATERMARK:
            upto = plog.high_watermark
        else:
            upto = self.last_stable_offset
        return plog.read(offset, max_bytes, min_one_batch=min_one_batch, view=True, upto=upto).records

    def prepare_read(self, offset: int, max_bytes: int) -> asyncio.Future[None] | None:
        return None  # the segments are read synchronously (the page cache's, or the disk's)

    def prepare_timestamp_search(self, timestamp: int | None, from_offset: int) -> asyncio.Future[None] | None:
        return None

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        return self.producer_state.aborted_between(start, upper)

    def has_aborted_transactions(self) -> bool:
        return bool(self.producer_state.aborted)

    def offset_for_timestamp(self, timestamp: int, from_offset: int,
                             budget: InlineBudget | None) -> tuple[int, int] | BatchToWalk | None:
        return self.log.offset_for_timestamp(timestamp, from_offset, budget)

    def max_timestamp_offset(self, budget: InlineBudget | None) -> tuple[int, int] | BatchToWalk:
        return self.log.max_timestamp_offset(budget)

    def offsets_before(self, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
        """ListOffsets v0 (Kafka's legacyFetchOffsetsBefore): the segments' base offsets (each at least
        the log start) paired with their files' modification times, plus the log end at `now_ms`
        when the active segment holds data, newest first."""
        plog = self.log
        entries = [(max(seg.base_offset, plog.log_start_offset), seg.last_modified_ms()) for seg in plog.segments]
        if plog.segments[-1].size > 0:
            entries.append((plog.high_watermark, now_ms))
        if timestamp == -1:
            start = len(entries) - 1
        elif timestamp == -2:
            start = 0
        else:
            start = len(entries) - 1
            while start >= 0 and entries[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        return sorted((entries[start - j][0] for j in range(count)), reverse=True)

    def producers(self) -> Iterable[tuple[ProducerEntry, int]]:
        state = self.producer_state
        return [(entry, state.ongoing.get(entry.producer_id, -1)) for entry in state.producers.values()]

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        return self.log.epoch_end_offset(epoch)

    def assign_leader_epoch(self, epoch: int) -> None:
        self.log.assign_leader_epoch(epoch)

    def stable_for_reading(self) -> AsyncContextManager[Any]:
        """Held while a replay reads from worker threads: compaction does not swap segments meanwhile."""
        return self.log.maintenance_lock

    def epoch_at(self, offset: int) -> int:
        """The leader epoch the record at `offset` was appended in (ListOffsets answers it)."""
        return self.log.epochs.epoch_at(offset)

    def latest_epoch(self) -> int:
        return self.log.epochs.latest_epoch()
