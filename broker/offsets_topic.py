"""`__consumer_offsets`: where the coordinator's records become durable, and where they come back from.

The coordinator hands us records for one partition; we encode them in Kafka's key/value formats,
append them as one record batch (one writer per partition: appends run on the event loop thread),
and return only once the batch is durable under the broker's flush policy. At start-up every
partition is replayed into the coordinator, each on its own (a damaged batch or a failure affects only
its partition); its groups answer COORDINATOR_LOAD_IN_PROGRESS until then.

Transactional offsets (TxnOffsetCommit) are transactional batches here, as in Kafka: the replay
applies their records at the position of their producer's COMMIT marker, drops them at an ABORT
marker, and keeps those of transactions with no marker yet in `open_txn_offsets` for the
transaction coordinator, which completes or aborts them (broker/transactions.py).
"""

from __future__ import annotations

import asyncio
import gc
import struct
import time
from typing import Any, Awaitable

import structlog

from ..coordinator.record_codec import UnknownRecordType, decode_record, encode_record
from ..coordinator.records import OffsetCommitRecord, OffsetCommitTombstone, Record
from ..protocol.control_records import COMMIT, control_type
from ..protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ..protocol.record_batch import Record as LogRecord
from ..protocol.record_batch import compute_crc, decode_batch, decode_batches, encode_batch

log = structlog.get_logger("kbroker.offsets_topic")

TOPIC = "__consumer_offsets"
# Kafka's internal-topic settings: compacted, producer's compression, offsets.topic.segment.bytes.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
_READ_CHUNK = 5 * 1024 * 1024  # offsets.load.buffer.size
_PARALLEL_LOADS = 2  # partitions read at once (each holds its records in memory until replayed)
_LOAD_ATTEMPTS = 5
_CRC_FIELD = 17  # baseOffset(8) + batchLength(4) + partitionLeaderEpoch(4) + magic(1)


class OffsetsTopic:
    def __init__(self, logs: Any, num_partitions: int) -> None:
        self.logs = logs
        self.num_partitions = num_partitions
        # partition -> producer id -> records of a transaction with no marker yet (filled by the replay)
        self.open_txn_offsets: dict[int, dict[int, list[Record]]] = {}
        self._load_offset: dict[int, int] = {}  # how far each partition's replay read (for failure logs)

    def ensure(self) -> int:
        """Create the topic on first start; an existing topic keeps its partition count (Kafka does too)."""
        info = self.logs.topics().get(TOPIC)
        if info is None:
            info = self.logs.create_topic(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
            log.info("offsets_topic_created", partitions=self.num_partitions)
        self.num_partitions = info.num_partitions
        return self.num_partitions

    async def append_records(self, partition: int, records: list[Record]) -> None:
        """Append and wait until durable; failures become Kafka errors the coordinator translates."""
        await self.append_records_nowait(partition, records)

    def append_records_nowait(self, partition: int, records: list[Record]) -> Awaitable[None]:
        """Append now (raising at once on failure) and return the wait for durability."""
        plog = self.logs.get_log(TOPIC, partition)
        if plog is None:
            raise KafkaError(f"{TOPIC}-{partition} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        now = int(time.time() * 1000)
        batch = encode_batch([
            LogRecord(offset=i, timestamp=now, key=key, value=value)
            for i, (key, value) in enumerate(encode_record(r) for r in records)
        ])
        info = plog.append(batch, leader_epoch=0, now_ms=now)
        return plog.wait_durable(info.last_offset)

    def read_partition(self, partition: int) -> list[Record]:
        """Every coordinator record of one partition, oldest first (tombstones included).

        Runs in a worker thread at start-up (see load_all). A damaged batch is skipped, not fatal: its
        offsets, and the commits it held as far as its bytes still say, are logged at error level, and
        the rest of the partition still loads (the log's recovery already cut any torn tail)."""
        plog = self.logs.get_log(TOPIC, partition)
        if plog is None:
            return []
        out: list[Record] = []
        open_txns: dict[int, list[Record]] = {}
        offset, end = plog.log_start_offset, plog.log_end_offset
        while offset < end:
            self._load_offset[partition] = offset
            try:
                chunk = plog.read(offset, _READ_CHUNK, min_one_batch=True).records
            except CorruptRecordError as exc:
                resume = getattr(exc, "resume_offset", end)
                log.error("offsets_batch_skipped", partition=partition, offset=offset, resume_offset=resume,
                          file=getattr(exc, "file", None), position=getattr(exc, "position", None),
                          reason=getattr(exc, "reason", str(exc)), lost=_lost_commits(getattr(exc, "raw", None)))
                if resume <= offset:
                    break
                offset = resume
                continue
            if not chunk:
                break
            next_offset = offset
            for header, records in decode_batches(bytes(chunk)):
                next_offset = max(next_offset, header.base_offset + header.last_offset_delta + 1)
                if header.is_control:
                    resolved = open_txns.pop(header.producer_id, [])
                    if records and control_type(records[0].key) == COMMIT:
                        out.extend(resolved)
                    continue
                target = open_txns.setdefault(header.producer_id, []) if header.is_transactional else out
                for r in records:
                    if r.offset < offset:
                        continue
                    try:
                        target.append(decode_record(r.key, r.value))
                    except UnknownRecordType:
                        continue  # KIP-848/share/streams records: not ours to manage
                    except Exception as exc:  # a record no coordinator wrote: skip it, loudly
                        log.error("offsets_record_skipped", partition=partition, offset=r.offset, error=repr(exc))
            if next_offset <= offset:
                break
            offset = next_offset
        self.open_txn_offsets[partition] = {pid: records for pid, records in open_txns.items() if records}
        return out

    async def load_partition(self, coordinator: Any, partition: int) -> int:
        """Replay one partition: the reading and decoding in a worker thread (under the log's maintenance
        lock, so compaction does not swap segments under it), the replay on the loop in slices."""
        plog = self.logs.get_log(TOPIC, partition)
        if plog is None:
            records: list[Record] = []
        else:
            async with plog.maintenance_lock:
                records = await asyncio.to_thread(self.read_partition, partition)
        await coordinator.load(partition, records)
        return len(records)

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
            gc.freeze()
            if collecting:
                gc.enable()
        log.info("offsets_loaded", partitions=self.num_partitions, records=sum(counts),
                 failed=[p for p, n in enumerate(counts) if n < 0],
                 load_ms=round(1000 * (time.monotonic() - started), 1))

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


def _lost_commits(raw: bytes | None) -> list[str]:
    """What a damaged batch held, as far as its bytes still decode (best effort: it failed its CRC)."""
    if not raw:
        return []
    names: list[str] = []
    try:
        patched = bytearray(raw)
        struct.pack_into(">I", patched, _CRC_FIELD, compute_crc(patched, 0, len(patched)))  # decode past the CRC
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
