"""`__share_group_state`: where share-partitions' delivery states become durable (KIP-932; on one node
the share coordinator's state RPCs 83-87 are these in-process calls).

Each write is a ShareSnapshot record in Kafka's format, keyed by (group id, topic id, partition), in
the partition Kafka's share coordinator picks: `abs(javaHash("group:topicId:partition")) % 50`. A
snapshot carries the whole state (start offset, then runs of offsets with their delivery state and
count), so the last one of a key is the state; the acknowledgements it holds are answered only once
it is durable. At the share-partition manager's start every partition of the topic is replayed
(coordinator/share/persisted.py, which also applies Kafka's ShareUpdate records).

The topic has Kafka's settings (ShareCoordinatorService.shareGroupStateTopicConfigs): cleanup.policy
delete with retention.ms -1, compression.type producer, segment.bytes 100 MiB, min.insync.replicas; 50 partitions
(share.coordinator.state.topic.num.partitions).

Pruning (Kafka's share coordinator's "last redundant offset"): every record is a whole snapshot of its
key, so once a write is durable, each partition's records below the oldest still-current record of
its keys are redundant, and the partition's log start moves there (a key whose latest record is a
tombstone needs nothing kept). Only durable records count: the log start stays below every record
still in flight, and a key's last durable snapshot is kept until its newer one is durable.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING

import structlog

from ...coordinator.partitioning import java_string_hash, kafka_abs
from ...coordinator.share.persisted import PersistedStates
from ...protocol.errors import CorruptRecordError
from ...protocol.record_batch import decode_batches, encode_keyed_batch, read_header
from ...protocol.records.share_state_records import SNAPSHOT, ShareStateRecord, decode_share_state, encode_share_state
from ..partitions.service import Isolation

if TYPE_CHECKING:
    from ..partitions.service import PartitionService

log = structlog.get_logger("kbroker.share_state")

TOPIC = "__share_group_state"
# As Kafka 4.4 makes it (asked of the reference broker: its DescribeConfigs of the topic). Its
# min.insync.replicas is share.coordinator.state.topic.min.isr, 2 by default, which refuses every
# write on one node: 1 here, as the reference broker is configured.
TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
                 "segment.bytes": "104857600", "min.insync.replicas": "1"}
_READ_CHUNK = 5 * 1024 * 1024


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def partition_for(group: str, topic_id: uuid.UUID, partition: int, n: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor(SharePartitionKey.asCoordinatorKey())."""
    return kafka_abs(java_string_hash(f"{group}:{kafka_uuid(topic_id)}:{partition}")) % n


class ShareStateLog:
    def __init__(self, partitions: PartitionService, num_partitions: int) -> None:
        self.partitions = partitions
        self.catalogue = partitions.catalogue
        self.num_partitions = num_partitions
        self._wall_ms = partitions.clock.wall_ms
        self.states = PersistedStates()
        self.writes = 0
        # per partition of the topic: each key's latest durable snapshot or tombstone (offset, is a
        # snapshot); only durable records count, so a prune never removes the last durable state of a
        # key whose newer snapshot is still in flight
        self._latest: dict[int, dict[tuple[str, uuid.UUID, int], tuple[int, bool]]] = {}
        # per partition: offsets of records appended and not yet noted durable (a prune stays below them)
        self._in_flight: dict[int, set[int]] = {}

    def ensure(self) -> None:
        """The topic, made now if it does not exist; an existing one keeps its partition count."""
        info = self.catalogue.topic(TOPIC)
        if info is None:
            self.catalogue.create_internal_topic(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
            log.info("share_state_topic_created", partitions=self.num_partitions)
        else:
            self.num_partitions = info.num_partitions

    def load(self) -> int:
        """Replay every partition into `states`; how many records were read."""
        count = 0
        for partition in range(self.num_partitions):
            for offset, record in self._read_partition(partition):
                self.states.replay(record)
                self._note(partition, record, offset)
                count += 1
        if count:
            log.info("share_state_loaded", records=count, share_partitions=len(self.states.states))
        return count

    def _read_partition(self, partition: int) -> Iterable[tuple[int, ShareStateRecord]]:
        store = self.partitions.replay_store(TOPIC, partition)
        if store is None:
            return
        offset, end = store.log_start_offset, store.log_end_offset
        while offset < end:
            try:
                chunk = store.read(offset, _READ_CHUNK, Isolation.LOG_END)  # CRC-checked by the log
            except CorruptRecordError as exc:
                resume = getattr(exc, "resume_offset", end)
                log.error("share_state_batch_skipped", partition=partition, offset=offset, resume_offset=resume,
                          reason=str(exc))
                if resume <= offset:
                    break
                offset = resume
                continue
            if not chunk:
                break
            next_offset = offset
            for header, records in decode_batches(bytes(chunk)):
                next_offset = max(next_offset, header.next_offset)
                if header.is_control:
                    continue
                for r in records:
                    if r.offset < offset or r.key is None:
                        continue
                    try:
                        decoded = decode_share_state(r.key, r.value)
                    except Exception as exc:  # noqa: BLE001 - one unreadable record, not the partition
                        log.error("share_state_record_skipped", partition=partition, offset=r.offset, error=repr(exc))
                        continue
                    yield r.offset, decoded
            if next_offset <= offset:
                break
            offset = next_offset

    def delete(self, group: str, topic_id: uuid.UUID, partition: int) -> Awaitable[None]:
        """Forget a share-partition's state (a tombstone of its key); the wait for its durability."""
        record = ShareStateRecord(SNAPSHOT, group, topic_id, partition, -1, -1, (), tombstone=True)
        return self._append(record)

    def write(self, group: str, topic_id: uuid.UUID, partition: int, start: int,
              batches: list[tuple[int, int, int, int]]) -> Awaitable[None]:
        """Append the share-partition's snapshot now (raising KafkaError if the log cannot take it) and
        return the wait for its durability. Appends happen in call order, so the last snapshot of a
        key in the log is the last state written."""
        key = (group, topic_id, partition)
        previous = self.states.states.get(key)
        now = self._wall_ms()
        record = ShareStateRecord(SNAPSHOT, group, topic_id, partition,
                                  snapshot_epoch=0 if previous is None else previous.snapshot_epoch + 1,
                                  start_offset=start, batches=tuple(batches),
                                  create_timestamp=now if previous is None else previous.create_timestamp,
                                  write_timestamp=now)
        self.writes += 1
        return self._append(record)

    def _append(self, record: ShareStateRecord) -> Awaitable[None]:
        now = self._wall_ms()
        batch = encode_keyed_batch([encode_share_state(record)], now)
        state_partition = partition_for(record.group, record.topic_id, record.partition, self.num_partitions)
        result = self.partitions.append(TOPIC, state_partition, batch, now_ms=now, headers=[read_header(batch)])
        self.states.replay(record)
        self._in_flight.setdefault(state_partition, set()).add(result.base_offset)
        return self._durable_then_prune(result.wait_durable(), state_partition, record, result.base_offset)

    async def _durable_then_prune(self, durable: Awaitable[None], state_partition: int, record: ShareStateRecord,
                                  offset: int) -> None:
        try:
            await durable
        finally:
            self._in_flight[state_partition].discard(offset)
        self._note(state_partition, record, offset)
        self.prune(state_partition, offset + 1)

    def _note(self, state_partition: int, record: ShareStateRecord, offset: int) -> None:
        """A durable record of a key: its latest unless a later one was noted first."""
        if not record.tombstone and record.record_type != SNAPSHOT:
            return  # a ShareUpdate (Kafka's) needs its snapshot kept
        latest = self._latest.setdefault(state_partition, {})
        key = (record.group, record.topic_id, record.partition)
        known = latest.get(key)
        if known is None or known[0] < offset:
            latest[key] = (offset, not record.tombstone)

    def prune(self, state_partition: int, durable_end: int) -> None:
        """Move the partition's log start to its last redundant offset + 1, no further than
        `durable_end` (every record below it is durable)."""
        latest = self._latest.get(state_partition, {})
        target = min((offset for offset, alive in latest.values() if alive), default=durable_end)
        target = min(target, durable_end, *self._in_flight.get(state_partition, ()))
        store = self.partitions.replay_store(TOPIC, state_partition)
        if store is None or target <= store.log_start_offset:
            return
        error, _ = self.partitions.prune(TOPIC, state_partition, target)
        if error:
            log.warning("share_state_prune_failed", partition=state_partition, offset=target, error=error)
