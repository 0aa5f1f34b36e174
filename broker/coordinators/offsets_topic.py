"""`__consumer_offsets`: where the coordinator's records become durable, and where they come back from.

The coordinator hands us records for one partition; we encode them in Kafka's key/value formats,
append them as one record batch (one writer per partition: appends run on the event loop thread),
and return only once the batch is durable under the broker's flush policy. At start-up every
partition is replayed into the coordinator, each on its own (a damaged batch or a failure affects only
its partition); its groups answer COORDINATOR_LOAD_IN_PROGRESS until then.

Transactional offsets (TxnOffsetCommit) are transactional batches here, as in Kafka: the replay
applies their records at the position of their producer's COMMIT marker, drops them at an ABORT
marker, and keeps those of transactions with no marker yet in `open_txn_offsets` for the
transaction coordinator, which completes or aborts them (broker/coordinators/transactions.py).
"""

from __future__ import annotations

import asyncio
import gc
import struct
import time
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator

import structlog

from ...protocol.control_records import COMMIT, marker_of
from ...protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ...protocol.latest_records import in_write_order, latest_per_key
from ...protocol.record_batch import (CRC_OFFSET, HEADER_SIZE, compute_crc, decode_batch, encode_keyed_batch,
                                     iter_batches, read_header)
from ..partitions.catalogue import INTERNAL_TOPIC_CONFIGS, LogConfig
from ..partitions.replay_read import chunks as replay_chunks

if TYPE_CHECKING:
    from ...protocol.records.classic_records import Record
    from ..partitions.service import PartitionService
    from ..partitions.service import PartitionStore

log = structlog.get_logger("kbroker.offsets_topic")

TOPIC = "__consumer_offsets"
# Kafka's internal-topic settings: compacted, producer's compression, offsets.topic.segment.bytes.
TOPIC_CONFIGS = INTERNAL_TOPIC_CONFIGS
_PARALLEL_LOADS = 2  # partitions read at once (each holds its records in memory until replayed)
_LOAD_ATTEMPTS = 5
_SLICE_S = 0.002  # the longest the replay's fold keeps the event loop before letting others run
# A held batch (see append_records_nowait) stays well under max.message.bytes (1 MiB by default).
_HELD_MAX_BYTES = 256 * 1024
_DEFAULT_MAX_MESSAGE_BYTES = LogConfig().max_message_bytes
_RECORD_OVERHEAD = 32  # a generous bound of a record's framing beside its key and value
_YOUNG_GC_THRESHOLD = 20_000  # net allocations of tracked objects between young collections (default 700)


class _Held:
    """Records taken in this turn of the loop for one partition, and the wait they share."""

    __slots__ = ("store", "durable", "records", "size")

    def __init__(self, store: PartitionStore, durable: asyncio.Future[None]) -> None:
        self.store = store
        self.durable = durable
        self.records: list[tuple[bytes, bytes | None]] = []
        self.size = 0


def _settle(durable: asyncio.Future[None], wait: asyncio.Future[None]) -> None:
    if durable.done():
        return
    if wait.cancelled():
        durable.set_exception(KafkaError("log closed before the records became durable", ErrorCode.KAFKA_STORAGE_ERROR))
    elif (exc := wait.exception()) is not None:
        durable.set_exception(exc)
    else:
        durable.set_result(None)


@dataclass(slots=True)
class PartitionReplay:
    records: list[Record]  # the last record per key, in the order of those last writes
    read: int  # how many records the partition held, superseded ones included


@dataclass(slots=True)
class _PartitionFold:
    """A partition's records as they are read: the last (offset, value) per key, and where a key's last
    write was a transaction's, the offset of the marker that committed it (`in_write_order` orders
    them); per producer, the same for its transaction with no marker yet; keyless offsets."""

    latest: dict[bytes, tuple[int, bytes | None]] = field(default_factory=dict)
    committed_at: dict[bytes, int] = field(default_factory=dict)
    open_txns: dict[int, dict[bytes, tuple[int, bytes | None]]] = field(default_factory=dict)
    keyless: list[int] = field(default_factory=list)
    read: int = 0


class OffsetsTopic:
    def __init__(self, partitions: PartitionService, num_partitions: int) -> None:
        self.partitions = partitions  # the one append and read path (broker/partitions/service.py)
        self.catalogue = partitions.catalogue
        self.num_partitions = num_partitions
        # partition -> producer id -> records of a transaction with no marker yet (filled by the replay)
        self.open_txn_offsets: dict[int, dict[int, list[Record]]] = {}
        self._load_offset: dict[int, int] = {}  # how far each partition's replay read (for failure logs)
        self._held: dict[int, _Held] = {}  # partition -> records taken in this turn of the loop, not yet written
        # Told of every append of the group coordinator's records (partition, records), once the
        # transaction coordinator is built: an offset tombstone ends the key's pending transactional offsets.
        self.tombstone_listener: Callable[[int, list[Record]], None] | None = None
        # The record codec (protocol/records/codec.py), imported with the first record written: a
        # broker that stores no group and serves none never loads the coordinator (broker/app.py).
        self._encode_record: Callable[[Record], tuple[bytes, bytes | None]] | None = None

    def ensure(self) -> int:
        """Create the topic at once if it does not exist (offline writers: tools, tests); an existing
        topic keeps its partition count (Kafka does too)."""
        if not self.adopt_existing():
            self.catalogue.create_internal_topic(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
            log.info("offsets_topic_created", partitions=self.num_partitions)
        return self.num_partitions

    def adopt_existing(self) -> bool:
        """Take an existing topic's partition count (which wins over the setting, as in Kafka); False
        when the topic does not exist yet (a first start), for create() to make while the broker serves."""
        info = self.catalogue.topic(TOPIC)
        if info is not None:
            self.num_partitions = info.num_partitions
        return info is not None

    async def create(self) -> None:
        """Create the topic on a first start with its files made in a worker thread while the broker
        already serves (its 50 partition directories were most of an empty broker's start-up); until
        then, and until each partition is replayed, the groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        if self.catalogue.topic(TOPIC) is None:
            await self.catalogue.create_internal_topic_async(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
            log.info("offsets_topic_created", partitions=self.num_partitions)

    def max_batch_bytes(self, partition: int) -> int:
        """The largest batch the partition takes: its max.message.bytes, read live (AlterConfigs may
        change it). The coordinator refuses a commit it proves larger without building its records."""
        info = self.catalogue.topic(TOPIC)
        return _DEFAULT_MAX_MESSAGE_BYTES if info is None else info.config.max_message_bytes

    async def append_records(self, partition: int, records: list[Record]) -> None:
        """Append and wait until durable; failures become Kafka errors the coordinator translates."""
        await self.append_records_nowait(partition, records)

    def append_records_nowait(self, partition: int, records: list[Record]) -> Awaitable[None]:
        """Take the records now (raising at once if the log cannot take them) and return the wait for
        their durability.

        Group commit of the writes themselves: the records of every call in one turn of the event
        loop become ONE record batch, written at the end of the turn (a call soon), so a burst of
        commits costs one encode, one write and one index entry instead of one each, and one fsync
        covers them; while an fsync of the log is in progress, until its end (_write_held_when_idle). A write that fails then fails the wait with KAFKA_STORAGE_ERROR, which unloads
        the coordinator partition exactly like a failed fsync: the records are applied in memory
        but never served. Any other append to the same log writes the held batch first
        (the store's `before_append`), so the log keeps the order in which records were taken.
        """
        held = self._held.get(partition)
        # The partition service asks the catalogue who leads once per batch written (`_write_held`); a
        # commit joining a batch held in this turn needs no second answer.
        store = held.store if held is not None and not held.store.closed else \
            self.partitions.leader_store(TOPIC, partition)  # raises when there is none, or not here
        if store.offline is not None:
            raise store.offline
        encode = self._encode_record
        if encode is None:
            from ...protocol.records.codec import encode_record

            encode = self._encode_record = encode_record
        encoded = [encode(r) for r in records]
        size = sum(_RECORD_OVERHEAD + len(k) + (0 if v is None else len(v)) for k, v in encoded)
        # A held batch stays within the partition's max.message.bytes too, should that be set lower:
        # else commits that each fit would fail together, and take the coordinator partition offline.
        cap = min(_HELD_MAX_BYTES, store.config.max_message_bytes - HEADER_SIZE)
        if held is not None and (held.store is not store or held.size + size > cap):
            self._write_held(partition)
            held = None
        if size > cap:
            # Larger than a held batch may grow: written alone and at once, so an oversized request
            # is refused (MESSAGE_TOO_LARGE) before anything is applied.
            now = self.partitions.clock.wall_ms()
            batch = encode_keyed_batch(encoded, now)
            appended = self.partitions.append(TOPIC, partition, batch, now_ms=now, headers=[read_header(batch)])
            if self.tombstone_listener is not None:
                self.tombstone_listener(partition, records)
            return appended.wait_durable()
        if held is None:
            loop = asyncio.get_running_loop()
            held = self._held[partition] = _Held(store, loop.create_future())
            store.before_append = partial(self._write_held, partition)
            loop.call_soon(self._write_held_when_idle, partition)
        held.records.extend(encoded)
        held.size += size
        if self.tombstone_listener is not None:
            self.tombstone_listener(partition, records)
        return held.durable

    def _write_held_when_idle(self, partition: int) -> None:
        """While an fsync of this log is in progress the held records wait for its end: they need the
        next fsync anyway, and written now they would only stall the loop on pages under writeback
        and split what that next fsync covers into more batches."""
        held = self._held.get(partition)
        if held is None:
            return
        if not held.store.after_durability_round(partial(self._write_held, partition)):
            self._write_held(partition)

    def _write_held(self, partition: int) -> None:
        held = self._held.pop(partition, None)
        if held is None:
            return
        store = held.store
        store.before_append = None
        if store.closed:  # deleted, or closed without writing them (fenced): nothing covers them now
            held.durable.set_exception(KafkaError(f"{TOPIC}-{partition} is closed", ErrorCode.KAFKA_STORAGE_ERROR))
            return
        try:
            now = self.partitions.clock.wall_ms()
            # Built here, every record keyed: the Produce checks (and a second CRC pass) have nothing to find.
            batch = encode_keyed_batch(held.records, now)
            result = self.partitions.append(TOPIC, partition, batch, now_ms=now, headers=[read_header(batch)])
        except Exception as exc:  # noqa: BLE001 - the waiters learn it; the partition unloads
            log.error("offsets_append_failed", partition=partition, records=len(held.records), error=repr(exc))
            held.durable.set_exception(exc if getattr(exc, "code", None) is ErrorCode.KAFKA_STORAGE_ERROR
                                       else KafkaError(f"append failed: {exc!r}", ErrorCode.KAFKA_STORAGE_ERROR))
            return
        # The flusher's own future (no task per batch); none when the policy does not wait (never,
        # interval), and then the waiters are released in this turn.
        try:
            wait = result.durable()
        except Exception as exc:  # noqa: BLE001 - fenced or closed: the waiters learn it
            held.durable.set_exception(exc)
            return
        if wait is None:
            held.durable.set_result(None)
        else:
            wait.add_done_callback(partial(_settle, held.durable))

    def read_partition(self, partition: int) -> PartitionReplay:
        """The coordinator records of one partition to replay: the last one per key (tombstones
        included), in the order of those last writes.

        That is what compaction keeps of the log, so replaying it rebuilds the same groups and offsets
        as replaying every record; a partition of a million commits to ten thousand partitions makes
        ten thousand record objects, not a million (the walk over the rest makes no object per record).
        (Replay equals compaction only if what the coordinator writes is compaction-safe, which
        Kafka's record design guarantees and the log cleaner relies on as well.) At start-up
        load_partition does the same in slices. A damaged batch is skipped, not fatal: its
        offsets, and the commits it held as far as its bytes still say, are logged at error level, and
        the rest of the partition still loads (the log's recovery already cut any torn tail)."""
        fold = _PartitionFold()
        for offset, chunk in self._chunks(partition):
            for _ in _fold_chunk(chunk, offset, fold):
                pass
        return self._replay_of(partition, fold)

    def _chunks(self, partition: int) -> Iterator[tuple[int, bytes]]:
        """(offset it was read from, whole batches) of the partition, oldest first; each step reads
        from disk. A damaged batch is logged with what it held and skipped."""
        store = self.partitions.replay_store(TOPIC, partition)
        if store is None:
            return

        def skipped(offset: int, end: int, exc: CorruptRecordError) -> int:
            resume = getattr(exc, "resume_offset", end)
            log.error("offsets_batch_skipped", partition=partition, offset=offset, resume_offset=resume,
                      file=getattr(exc, "file", None), position=getattr(exc, "position", None),
                      reason=getattr(exc, "reason", str(exc)), lost=_lost_commits(getattr(exc, "raw", None)))
            return resume

        for offset, chunk in replay_chunks(store, skipped):
            self._load_offset[partition] = offset
            yield offset, chunk

    def _replay_of(self, partition: int, fold: _PartitionFold) -> PartitionReplay:
        for at in fold.keyless:  # a record no coordinator wrote: skip it, loudly
            log.error("offsets_record_skipped", partition=partition, offset=at, error="record without a key")
        self.open_txn_offsets[partition] = {pid: records for pid, pending in fold.open_txns.items()
                                            if (records := _decoded(partition, in_write_order(pending, {})))}
        return PartitionReplay(_decoded(partition, in_write_order(fold.latest, fold.committed_at)), fold.read)

    async def load_partition(self, coordinator: Any, partition: int) -> int:
        """Replay one partition: read its chunks in a worker thread and fold them on the loop in slices
        of _SLICE_S (with the store held stable for reading: compaction swaps no segment under it),
        decode the live keys in a worker thread, then replay them into the coordinator. Returns how
        many records the partition held.

        The fold runs on the loop rather than in a thread: it is all Python, so a thread would only
        add GIL hand-offs (1 ms switch interval) to it, with two partitions' threads and the loop taking
        turns, while a slice lets clients in at a bounded pause."""
        # A partition with records is never dormant: one that is (empty) has nothing to replay, unbuilt.
        store = self.partitions.replay_store(TOPIC, partition)
        fold = _PartitionFold()
        if store is not None:
            async with store.stable_for_reading():
                chunks = self._chunks(partition)
                clock = time.perf_counter
                while (step := await asyncio.to_thread(next, chunks, None)) is not None:  # disk reads off the loop
                    pause_at = clock() + _SLICE_S
                    for _ in _fold_chunk(step[1], step[0], fold):
                        if clock() >= pause_at:
                            await asyncio.sleep(0)  # other partitions' loads and every client get their turn
                            pause_at = clock() + _SLICE_S
        replay = await asyncio.to_thread(self._replay_of, partition, fold)  # decoding every live key
        await coordinator.load(partition, replay.records)
        return replay.read

    async def load_all(self, coordinator: Any) -> None:
        """Replay every partition, each on its own: a failure is logged with its partition and leaves
        only that partition loading (its groups answer COORDINATOR_LOAD_IN_PROGRESS, a retriable
        error) while it is retried; the other partitions load regardless."""
        started = time.monotonic()
        gate = asyncio.Semaphore(_PARALLEL_LOADS)
        # Replay builds the coordinator's long-lived state: hundreds of thousands of objects at once. The
        # cyclic collector's full passes over them would stall the loop for 100 ms and more each (measured
        # by `python -m bench.stalls`), so it pauses while they are built, and the result is frozen
        # (gc.freeze) so later passes skip it. Reference counting still frees everything acyclic.
        collecting = gc.isenabled()
        gc.disable()
        try:
            counts = await asyncio.gather(*(self._load_with_retry(coordinator, p, gate)
                                            for p in range(self.num_partitions)))
        finally:
            _collect_for_serving()
            if collecting:
                gc.enable()
        log.info("offsets_loaded", partitions=self.num_partitions, records=sum(counts),
                 failed=[p for p, n in enumerate(counts) if n < 0],
                 load_ms=round(1000 * (time.monotonic() - started), 1))

    def holds_nothing(self) -> bool:
        """No partition holds a byte: nothing to replay (a first start, or every record gone)."""
        return not any(self.partitions.size(TOPIC, partition) for partition in range(self.num_partitions))

    def loaded_nothing(self) -> None:
        """What `load_all` ends with, when `holds_nothing` spared the replay (and the coordinator)."""
        _collect_for_serving()
        log.info("offsets_loaded", partitions=self.num_partitions, records=0, failed=[], load_ms=0.0)

    async def _load_with_retry(self, coordinator: Any, partition: int, gate: asyncio.Semaphore) -> int:
        delay = 1.0
        for attempt in range(1, _LOAD_ATTEMPTS + 1):
            try:
                async with gate:
                    return await self.load_partition(coordinator, partition)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("offsets_partition_load_failed", partition=partition, attempt=attempt,
                          offset=self._load_offset.get(partition), error=repr(exc), exc_info=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
        return -1


def _collect_for_serving() -> None:
    """The collector's settings once the replay is done."""
    gc.freeze()  # the replayed state: later passes skip it
    # Serving: every request in flight holds a few dozen tracked objects (request, command,
    # records, futures) that refcounting frees once it is answered. At the default young
    # threshold (700 net allocations) the collector ran every ~20 pipelined commits and
    # promoted the in-flight ones to older generations only to traverse them again: about 5 us
    # of the broker's ~40 us per OffsetCommit (gc callbacks over /tmp/cf/profgc.py runs, see
    # notes/commit-fast.md). Cycles are rare here, so a higher threshold costs little memory.
    gc.set_threshold(_YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])


def _fold_chunk(chunk: bytes, offset: int, fold: _PartitionFold) -> Iterator[None]:
    """Fold a chunk's batches (records before `offset` excepted) into `fold`, pausing after each batch."""
    latest, committed_at, open_txns = fold.latest, fold.committed_at, fold.open_txns
    for pos, header in iter_batches(chunk):
        if header.is_control:
            resolved = open_txns.pop(header.producer_id, None)
            if resolved and (marker_of(chunk, pos) or (None,))[0] == COMMIT:
                latest.update(resolved)  # the transaction's writes land at its marker
                committed_at.update(dict.fromkeys(resolved, header.base_offset))
            continue
        # While transactions are open, a plain batch is folded apart first: a tombstone in it ends what
        # they hold of its key (Kafka's replay of an offset tombstone clears the key's pending
        # transactional offsets), so their COMMIT markers bring none of it back.
        plain_beside_txns = not header.is_transactional and bool(open_txns)
        target = open_txns.setdefault(header.producer_id, {}) if header.is_transactional else \
            {} if plain_beside_txns else latest
        fold.read += latest_per_key(chunk, pos, header, target, fold.keyless, offset)
        if plain_beside_txns:
            for key, (_, value) in target.items():
                if value is None:
                    for pending in open_txns.values():
                        pending.pop(key, None)
            latest.update(target)
        yield


def _decoded(partition: int, latest: list[tuple[bytes, tuple[int, bytes | None]]]) -> list[Record]:
    from ...protocol.records.codec import UnknownRecordType, decode_record

    out: list[Record] = []
    for key, (offset, value) in latest:
        try:
            out.append(decode_record(key, value))
        except UnknownRecordType:
            continue  # KIP-848/share/streams records: not ours to manage
        except Exception as exc:  # a record no coordinator wrote: skip it, loudly
            log.error("offsets_record_skipped", partition=partition, offset=offset, error=repr(exc))
    return out


def _lost_commits(raw: bytes | None) -> list[str]:
    """What a damaged batch held, as far as its bytes still decode (best effort: it failed its CRC)."""
    if not raw:
        return []
    from ...protocol.records.codec import decode_record
    from ...protocol.records.classic_records import OffsetCommitRecord, OffsetCommitTombstone

    names: list[str] = []
    try:
        patched = bytearray(raw)
        struct.pack_into(">I", patched, CRC_OFFSET, compute_crc(patched, 0, len(patched)))  # decode past the CRC
        _, records = decode_batch(patched)
        for r in records:
            try:
                record = decode_record(r.key, r.value)
            except Exception:
                names.append(f"offset {r.offset}: undecodable")
                continue
            if isinstance(record, (OffsetCommitRecord, OffsetCommitTombstone)):
                names.append(f"{record.group} {record.topic}-{record.partition} (offset {r.offset})")
            else:
                names.append(f"group {record.group} metadata (offset {r.offset})")
    except Exception:
        names.append("batch undecodable")
    return names
