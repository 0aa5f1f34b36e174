"""Idempotent producers: producer-id allocation and per-partition sequence state.

Kafka's rules (ProducerStateManager / ProducerAppendInfo), per (producer id, partition):
* a batch whose (epoch, first sequence, last sequence) equals one of the last five batches appended
  for that producer is a retry: it is answered with the original offsets and not appended again;
* an epoch below the current one is INVALID_PRODUCER_EPOCH;
* a new (higher) epoch must start at sequence 0, unless the producer is unknown here: a producer with
  no state (never seen, or expired) is accepted at any sequence. Since KIP-360 (Kafka 2.5) brokers no
  longer answer UNKNOWN_PRODUCER_ID for this case;
* with the same epoch, the first sequence must follow the last one (wrapping at 2^31-1 to 0),
  otherwise OUT_OF_ORDER_SEQUENCE_NUMBER.

Persistence, the same shape as Kafka's producer snapshots: each partition directory may hold
`producer_state.json`, the state as of some log offset, with a CRC32C of its content
(broker/storage/checksummed.py; one without, an older kbroker's, is read as before). A snapshot whose
checksum fails or that does not parse is never trusted: an error event names it, it is deleted and
the state is rebuilt from the log, as Kafka rebuilds it from a corrupt snapshot. Start-up loads it and replays batch *headers*
(never record bodies) from that offset to the log end; with no usable snapshot it replays the whole
log. Snapshots are written on a timer for partitions that changed, and at shutdown, so after a clean
stop nothing is replayed and after a kill -9 only what was appended since the last snapshot. A
snapshot whose offset is past the recovered log end (the tail it saw was lost in the crash) is
deleted and the log is replayed in full, because the state it holds may describe lost batches.

Transactional producers (KIP-98): a transactional batch opens the producer's transaction in the
partition (`ongoing`: producer id -> first offset); a commit or abort marker closes it once the marker
is durable (`complete_txn`), and an aborted one is kept in `aborted` (producer id, first offset,
marker offset), Kafka's aborted-transaction index. The first unstable offset is the smallest open
first offset; the last stable offset is that or the high watermark. Both lists are in the snapshot
and are rebuilt by the replay (which reads each control batch's marker type).

Producer ids are never reused across restarts: ids are handed out from blocks whose upper bound is
written durably (with its checksum) to `<data dir>/producer_ids.json` before the first id of the
block is used. A damaged file cannot say where the next block starts: the allocator then starts past
every producer id the partitions' states know, plus a wide margin (an error event says so).

The state is the log's own: a partition's is loaded with its first use and kept on its log
(`PartitionLog.txn_state`), so it goes with the log when the topic is deleted or re-created.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import structlog

from . import checksummed
from .log.partition_log import write_file_durably
from ...protocol import control_records
from ...purgatory.clock import Clock, SystemClock
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.record_batch import BatchHeader

if TYPE_CHECKING:
    from .log.manager import LogManager
    from .log.partition_log import PartitionLog

log = structlog.get_logger(__name__)

BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
NO_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_FILE = "producer_state.json"
PRODUCER_IDS_FILE = "producer_ids.json"
PRODUCER_ID_BLOCK = 1000
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
# How far past the highest producer id it can find a damaged producer_ids.json makes the allocator
# start: ids a transaction coordinator handed out but no partition has seen yet stay unused.
DAMAGED_IDS_MARGIN = 1_000_000
_SNAPSHOT_VERSION = 2  # 2 adds the open and aborted transactions; 1 is still read


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap from 2^31-1 to 0 (DefaultRecordBatch)."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_timestamp_ms: int = -1  # wall clock of the last append (or the batch timestamp when replayed)
    coordinator_epoch: int = -1  # of the last transaction marker (Kafka's ProducerStateEntry); none yet: -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


class InvalidProducerEpochError(KafkaError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class OutOfOrderSequenceError(KafkaError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class PartitionProducerState:
    """The producers of one partition, with the log offset up to which the state is current."""

    def __init__(self, topic: str, partition: int, directory: Path | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        self.dirty = False
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction here
        self.aborted: list[tuple[int, int, int]] = []  # (producer id, first offset, marker offset)
        self.unresolved_markers: dict[int, int] = {}  # producer id -> offset of a marker not yet durable

    # --- the client-append path -----------------------------------------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a produced batch before it is appended. Returns the original batch for a retry of
        one of the last five batches (answer with its offsets, append nothing); raises on a violation."""
        pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
        last_seq = last_sequence(first_seq, header.last_offset_delta)
        entry = self.producers.get(pid)
        current_epoch = NO_EPOCH if entry is None else entry.epoch
        if entry is not None:
            duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
            if duplicate is not None:
                return duplicate
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {pid} is older than the current epoch {current_epoch} "
                f"on {self.topic}-{self.partition}"
            )
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {pid} started epoch {epoch} at sequence {first_seq}, expected 0 "
                    f"on {self.topic}-{self.partition}"
                )
        elif current_epoch != NO_EPOCH and not in_sequence(entry.last_seq, first_seq):  # type: ignore[union-attr]
            raise OutOfOrderSequenceError(
                f"producer {pid} sent sequence {first_seq} after {entry.last_seq} "  # type: ignore[union-attr]
                f"on {self.topic}-{self.partition}"
            )
        return None

    def update(self, header: BatchHeader, first_offset: int, last_offset: int, now_ms: int) -> None:
        """Record an appended batch (client appends after `check`, and start-up replay)."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        first_seq = header.base_sequence
        entry.batches.append(
            BatchMetadata(first_seq, last_sequence(first_seq, header.last_offset_delta), first_offset, last_offset,
                          header.max_timestamp)
        )
        entry.last_timestamp_ms = now_ms
        if header.is_transactional:
            self.ongoing.setdefault(pid, first_offset)
        self.dirty = True

    # --- transactions ---------------------------------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int, transaction_version: int = 0) -> None:
        """A marker with an epoch older than the producer's is refused (Kafka's appendEndTxnMarker).
        A transactions v2 marker carries the bumped epoch, so it must be newer than the producer's,
        except the same marker again once its transaction is over (a retry: written again, KAFKA-19999)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        current = entry.epoch
        if transaction_version >= 2 and epoch == current and (producer_id not in self.ongoing or epoch == 32767):
            return
        if epoch < current or (transaction_version >= 2 and epoch == current):
            newer = "newer than" if transaction_version >= 2 else "at least"
            raise InvalidProducerEpochError(
                f"marker epoch {epoch} of producer {producer_id} is not {newer} its epoch {current} "
                f"(transaction version {transaction_version}) on {self.topic}-{self.partition}")

    def update_marker_epoch(self, producer_id: int, epoch: int, now_ms: int, coordinator_epoch: int = 0) -> None:
        """An appended marker carries the producer's (possibly bumped) epoch: older epochs are fenced.
        (`coordinator_epoch` is the marker's: kbroker's one transaction coordinator writes epoch 0, and a
        replay of the log reads it from the marker's value.)"""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_timestamp_ms = now_ms
        entry.coordinator_epoch = coordinator_epoch
        self.dirty = True

    def marker_appended(self, producer_id: int, marker_offset: int) -> None:
        self.unresolved_markers[producer_id] = marker_offset

    def snapshot_offset(self, log_end_offset: int) -> int:
        """A snapshot must not claim to be current past a marker it has not applied: the replay from
        its offset would never see that marker, and the transaction would stay open for ever."""
        return min(log_end_offset, *self.unresolved_markers.values()) if self.unresolved_markers else log_end_offset

    def complete_txn(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        """The marker at `marker_offset` is durable: the transaction is no longer open here."""
        self.unresolved_markers.pop(producer_id, None)
        first = self.ongoing.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append((producer_id, first, marker_offset))
        self.dirty = True

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_between(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, upper): Kafka's
        collectAbortedTransactions for a fetch from `start` whose data ends before `upper`."""
        return [(pid, first) for pid, first, last in self.aborted if last >= start and first < upper]

    def prune_aborted(self, log_start_offset: int) -> None:
        kept = [a for a in self.aborted if a[2] >= log_start_offset]
        if len(kept) != len(self.aborted):
            self.aborted = kept
            self.dirty = True

    def expire(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        stale = [pid for pid, e in self.producers.items()
                 if now_ms - e.last_timestamp_ms >= expiration_ms and pid not in self.ongoing]
        for pid in stale:
            del self.producers[pid]
        if stale:
            self.dirty = True
        return len(stale)

    # --- snapshots and replay -------------------------------------------------------------------------

    def to_json(self, offset: int) -> bytes:
        body: dict[str, object] = {
            "version": _SNAPSHOT_VERSION,
            "offset": offset,
            "producers": [
                {
                    "id": e.producer_id,
                    "epoch": e.epoch,
                    "last_timestamp_ms": e.last_timestamp_ms,
                    "coordinator_epoch": e.coordinator_epoch,
                    "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp] for b in e.batches],
                }
                for e in self.producers.values()
            ],
            "ongoing": [[pid, first] for pid, first in self.ongoing.items()],
            "aborted": [list(a) for a in self.aborted],
        }
        return checksummed.dumps(body)

    def load_json(self, raw: bytes) -> int:
        """Load a snapshot; ValueError (checksummed.ChecksumMismatch for a failed checksum) when it
        cannot be trusted."""
        body = checksummed.loads(raw).body
        if body.get("version") not in (1, _SNAPSHOT_VERSION):
            raise ValueError(f"unknown producer snapshot version {body.get('version')!r}")
        self.producers.clear()
        for p in body["producers"]:
            entry = ProducerEntry(int(p["id"]), int(p["epoch"]), last_timestamp_ms=int(p["last_timestamp_ms"]),
                                  coordinator_epoch=int(p.get("coordinator_epoch", -1)))
            for b in p["batches"]:
                entry.batches.append(BatchMetadata(*(int(x) for x in b)))
            self.producers[entry.producer_id] = entry
        self.ongoing = {int(pid): int(first) for pid, first in body.get("ongoing", [])}
        self.aborted = [(int(a[0]), int(a[1]), int(a[2])) for a in body.get("aborted", [])]
        return int(body["offset"])

    def replay(self, headers: Iterable[BatchHeader], markers: dict[int, tuple[bool, int]] | None = None) -> int:
        """Apply stored batches (offsets already assigned) without checks, as Kafka does for recovery.
        `markers` maps a control batch's offset to (commit (True) or abort (False), coordinator epoch);
        the caller fills it while `headers` is iterated."""
        count = 0
        for header in headers:
            if header.producer_id < 0:
                continue
            if header.is_control:
                marker = None if markers is None else markers.get(header.base_offset)
                if marker is not None:
                    commit, coordinator_epoch = marker
                    self.update_marker_epoch(header.producer_id, header.producer_epoch, header.max_timestamp,
                                             coordinator_epoch)
                    self.complete_txn(header.producer_id, commit, header.base_offset)
                    count += 1
                continue
            self.update(header, header.base_offset, header.last_offset, header.max_timestamp)
            count += 1
        return count

    def snapshot_path(self) -> Path | None:
        return None if self.directory is None else self.directory / SNAPSHOT_FILE

    def write_snapshot(self, offset: int) -> None:
        path = self.snapshot_path()
        if path is None or not path.parent.exists():
            return
        write_file_durably(path, self.to_json(offset))
        self.dirty = False


def _headers_from(plog: PartitionLog, start_offset: int, markers: dict[int, tuple[bool, int]]) -> Iterable[BatchHeader]:
    """Batch headers from `start_offset`; a control batch's marker (commit?, coordinator epoch) goes into
    `markers` first."""
    for segment in plog.segments:
        if segment.size == 0 or segment.next_offset <= start_offset:
            continue
        for pos, header in segment.iter_headers():
            if header.last_offset >= start_offset:
                if header.is_control and header.producer_id >= 0:
                    try:
                        marker = control_records.marker_of(segment.read_at(pos, header.size))
                    except (KafkaError, ValueError, IndexError):
                        marker = None
                    if marker is not None:
                        markers[header.base_offset] = (marker[0] == control_records.COMMIT, marker[1])
                yield header


def load_partition_state(plog: PartitionLog) -> PartitionProducerState:
    """Build a partition's producer state: snapshot (if usable) plus a header replay of the tail."""
    started = time.monotonic()
    directory = plog.directory  # a new Path per call: every partition is loaded at start
    state = PartitionProducerState(plog.topic, plog.partition, directory)
    path = directory / SNAPSHOT_FILE
    start = 0
    source = "log"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raw = None
    if raw is not None:
        try:
            offset = state.load_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("producer_snapshot_damaged", topic=plog.topic, partition=plog.partition, file=str(path),
                      error=str(exc), action="deleted; the state is rebuilt from the whole log")
            offset = -1
        if 0 <= offset <= plog.log_end_offset:
            start = offset
            source = "snapshot"
        else:
            # The snapshot saw a tail the crash took away: its entries may describe lost batches.
            state.producers.clear()
            state.ongoing.clear()
            state.aborted.clear()
            path.unlink(missing_ok=True)
    markers: dict[int, tuple[bool, int]] = {}
    replayed = state.replay(_headers_from(plog, start, markers), markers)
    state.dirty = replayed > 0 or source == "log" and bool(state.producers)
    if replayed or source == "snapshot":
        log.info("producer_state_loaded", topic=plog.topic, partition=plog.partition, source=source,
                 from_offset=start, batches_replayed=replayed, producers=len(state.producers),
                 load_ms=round(1000 * (time.monotonic() - started), 1))
    return state


class ProducerIdAllocator:
    """Producer ids in durable blocks: the bound is fsynced before any id below it is handed out.

    `highest_known`: the highest producer id the partitions' states hold, asked only when the file
    is damaged (see the module docstring)."""

    def __init__(self, data_dir: Path, block: int = PRODUCER_ID_BLOCK,
                 highest_known: Callable[[], int] | None = None) -> None:
        self.path = Path(data_dir) / PRODUCER_IDS_FILE
        self.block = block
        self._highest_known = highest_known
        self._damaged: str | None = None
        try:
            self._next = int(checksummed.loads(self.path.read_bytes()).body["next_block_start"])
        except FileNotFoundError:
            self._next = 0
        except (ValueError, KeyError, TypeError) as exc:
            self._next = 0
            self._damaged = str(exc)  # resolved once the states are loaded (or with the first allocation)
        self._limit = self._next  # nothing reserved yet in this run

    def past_damage(self) -> None:
        """Where a damaged file left the next id unknown: past every id the loaded states know."""
        if self._damaged is not None:
            self._past_damage()

    def _past_damage(self) -> None:
        highest = self._highest_known() if self._highest_known is not None else -1
        self._next = max(self._next, highest + 1) + DAMAGED_IDS_MARGIN
        self._limit = self._next
        log.error("producer_ids_file_damaged", file=str(self.path), error=self._damaged,
                  highest_known_producer_id=highest, next_producer_id=self._next,
                  action="ids continue past every producer id the partitions know, plus a margin")
        self._damaged = None

    def allocate(self) -> int:
        if self._damaged is not None:
            self._past_damage()
        if self._next >= self._limit:
            limit = self._next + self.block
            write_file_durably(self.path, checksummed.dumps({"next_block_start": limit}))
            self._limit = limit
        pid = self._next
        self._next += 1
        return pid


class ProducerStateManager:
    """The producer-id allocator and the snapshot schedule of every partition's producer state (each
    state lives on its log: `for_log`)."""

    def __init__(self, logs: LogManager, data_dir: Path, *, snapshot_interval_s: float = 30.0, clock: Clock | None = None,
                 expiration_ms: Callable[[], int] | None = None) -> None:
        self.logs = logs
        self.clock: Clock = clock if clock is not None else SystemClock()  # producer expiry (wall clock)
        # producer.id.expiration.ms, read at each expiry pass (a dynamic broker config)
        self.expiration_ms: Callable[[], int] = expiration_ms or (lambda: PRODUCER_ID_EXPIRATION_MS)
        self.ids = ProducerIdAllocator(Path(data_dir), highest_known=self.highest_producer_id)
        self.snapshot_interval_s = snapshot_interval_s

    def load_all(self) -> None:
        for plog in self.logs.logs():
            self.for_log(plog)
        self.ids.past_damage()

    @staticmethod
    def for_log(plog: PartitionLog) -> PartitionProducerState:
        state = plog.txn_state
        if state is None:
            # compaction reads it there too (log/txn_cleaning.py)
            state = plog.txn_state = load_partition_state(plog)
        return state

    def highest_producer_id(self) -> int:
        return max((pid for plog in self.logs.logs() if plog.txn_state is not None
                    for pid in plog.txn_state.producers), default=-1)

    def _collect(self, force: bool) -> list[tuple[PartitionLog, PartitionProducerState, Path, bytes]]:
        """Serialise every changed state on the loop (consistent with the log end offset it names)."""
        out = []
        now_ms, expiration_ms = self.clock.wall_ms(), self.expiration_ms()
        for plog in self.logs.logs():
            state = plog.txn_state
            if state is None or plog.closed:
                continue
            state.expire(now_ms, expiration_ms)
            state.prune_aborted(plog.log_start_offset)
            path = state.snapshot_path()
            if path is not None and (state.dirty or (force and state.producers)):
                out.append((plog, state, path, state.to_json(state.snapshot_offset(plog.log_end_offset))))
                state.dirty = False
        return out

    def _write(self, items: list[tuple[PartitionLog, PartitionProducerState, Path, bytes]]) -> int:
        written = 0
        for plog, state, path, data in items:
            try:
                # Skip a partition whose topic was deleted (or deleted and re-created) meanwhile.
                if not plog.closed and path.parent.exists():
                    write_file_durably(path, data)
                    written += 1
            except OSError as exc:
                state.dirty = True
                log.warning("producer_snapshot_failed", topic=state.topic, partition=state.partition, error=repr(exc))
        return written

    def snapshot_all(self, *, force: bool = False) -> int:
        """Synchronous: used at shutdown, after the server stopped taking requests."""
        return self._write(self._collect(force))

    async def snapshot_all_async(self) -> int:
        import asyncio

        items = self._collect(False)
        return await asyncio.to_thread(self._write, items) if items else 0

    async def run_snapshots(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(self.snapshot_interval_s)
            try:
                await self.snapshot_all_async()
            except Exception:
                log.exception("producer_snapshots_failed")


def remove_snapshot(directory: Path) -> None:
    try:
        os.unlink(directory / SNAPSHOT_FILE)
    except FileNotFoundError:
        pass
