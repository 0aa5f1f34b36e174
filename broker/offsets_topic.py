"""`__consumer_offsets`: where the coordinator's records become durable, and where they come back from.

The coordinator hands us records for one partition; we encode them in Kafka's key/value formats,
append them as one record batch (one writer per partition: appends run on the event loop thread),
and return only once the batch is durable under the broker's flush policy. At start-up every
partition is replayed into the coordinator; its groups answer COORDINATOR_LOAD_IN_PROGRESS until
then.

Transactional offsets (TxnOffsetCommit) are transactional batches here, as in Kafka: the replay
applies their records at the position of their producer's COMMIT marker, drops them at an ABORT
marker, and keeps those of transactions with no marker yet in `open_txn_offsets` for the
transaction coordinator, which completes or aborts them (broker/transactions.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable

import structlog

from kbroker.coordinator.record_codec import UnknownRecordType, decode_record, encode_record
from kbroker.coordinator.records import Record
from kbroker.protocol.control_records import COMMIT, control_type
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import Record as LogRecord
from kbroker.protocol.record_batch import decode_batches, encode_batch

log = structlog.get_logger("kbroker.offsets_topic")

TOPIC = "__consumer_offsets"
# Kafka's internal-topic settings: compacted, producer's compression, offsets.topic.segment.bytes.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
_READ_CHUNK = 5 * 1024 * 1024  # offsets.load.buffer.size


class OffsetsTopic:
    def __init__(self, logs: Any, num_partitions: int) -> None:
        self.logs = logs
        self.num_partitions = num_partitions
        # partition -> producer id -> records of a transaction with no marker yet (filled by the replay)
        self.open_txn_offsets: dict[int, dict[int, list[Record]]] = {}

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
        """Every coordinator record of one partition, oldest first (tombstones included)."""
        plog = self.logs.get_log(TOPIC, partition)
        if plog is None:
            return []
        out: list[Record] = []
        open_txns: dict[int, list[Record]] = {}
        offset, end = plog.log_start_offset, plog.log_end_offset
        while offset < end:
            chunk = plog.read(offset, _READ_CHUNK, min_one_batch=True).records
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
            if next_offset <= offset:
                break
            offset = next_offset
        self.open_txn_offsets[partition] = {pid: records for pid, records in open_txns.items() if records}
        return out

    async def load_all(self, coordinator: Any) -> None:
        """Replay every partition into the coordinator, yielding between partitions."""
        started = time.monotonic()
        total = 0
        for partition in range(self.num_partitions):
            records = self.read_partition(partition)
            total += len(records)
            await coordinator.load(partition, records)
            await asyncio.sleep(0)
        log.info("offsets_loaded", partitions=self.num_partitions, records=total,
                 load_ms=round(1000 * (time.monotonic() - started), 1))
