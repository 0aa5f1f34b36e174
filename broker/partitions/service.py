"""The partition service: the one append path and the one read path of every partition, for clients
and coordinators alike (Kafka's ReplicaManager: `appendRecords`, `fetchMessages`).

Appending: the catalogue says whether this node leads the partition (NOT_LEADER_OR_FOLLOWER when
not; KAFKA_STORAGE_ERROR for a fenced topic), a client's batch is checked against its topic's
limits (`check_batch`, storage/log/validation.py), then the store appends it in the leader's epoch
with its producer state (storage/api.py), and the result carries the way to its durability, which
the caller awaits before it answers (acks=1/-1, a coordinator's write-then-respond). Nothing else
appends to a partition: Produce, the `__consumer_offsets` adapter, the transaction markers and the
transaction coordinator all come through here.

Reading: the same leadership check, then a read bounded by the isolation level (up to the high
watermark, or for read_committed the last stable offset, with the aborted transactions of the
range), and the offsets the answer reports.

Waking long polls: a fetch parked in the purgatory waits for a partition's high watermark, which
the engine reports when it moves (under `--flush always`, once an fsync made new records durable;
otherwise at the append), not for its log end; and for its last stable offset, which moves when a
transaction's markers are durable (`write_markers`).
"""

from __future__ import annotations

import asyncio
import copy
from typing import TYPE_CHECKING, Iterable, Protocol

import structlog

from ...protocol import record_batch as rb
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.topic_names import is_internal_topic
from ..storage.api import AppendOrigin, AppendResult, Isolation, PartitionStore
from ..storage.log.timestamp_search import BatchToWalk
from ..storage.log.validation import CheckedBatch, InlineBudget, check_produced_batch
from ..workers import OFFSET_SEARCH, run_in_worker
from . import internal_topics
from .txn_read import PartitionRead, aborted_in

if TYPE_CHECKING:
    from ...purgatory.clock import Clock
    from ...purgatory.delayed_fetch import FetchPurgatory
    from collections import defaultdict
    from ..storage.log.config import LogConfig
    from ..storage.api import LogEngine
    from .catalogue import TopicCatalogue, TopicInfo

log = structlog.get_logger("kbroker.partitions")

E = ErrorCode
NO_EPOCH = -1
# ListOffsets' special timestamps
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6

# What handlers and coordinator adapters use of the storage port, from here rather than from storage.
__all__ = ["AppendResult", "CheckedBatch", "InlineBudget", "Isolation", "PartitionRead", "PartitionService",
           "PartitionStore"]


class Traffic(Protocol):
    """Bytes in and out per topic (operations/observe.py's Observations, for /metrics)."""

    bytes_in: defaultdict[str, int]
    bytes_out: defaultdict[str, int]


class Faults(Protocol):
    """Errors a test control injects into the next Produce or Fetch of a partition, or the next
    coordinator's append to it ("Append"; operations/test_controls.py's PartitionFaults)."""

    def take(self, api: str, topic: str, partition: int) -> ErrorCode | None: ...


async def _prepared(wait: asyncio.Future[None] | None) -> None:
    """Await an engine's read of what a synchronous call then finds in memory (shielded: it is shared)."""
    if wait is not None:
        await asyncio.shield(wait)


class PartitionService:
    def __init__(self, engine: LogEngine, catalogue: TopicCatalogue, *, purgatory: FetchPurgatory | None,
                 observations: Traffic | None, clock: Clock, faults: Faults | None = None,
                 node_id: int | None = None) -> None:
        self._engine = engine
        # The node whose clients this service answers (NOT_LEADER_OR_FOLLOWER for a partition another
        # node leads); None for the coordinators, which write as whichever node leads their partition.
        self.node_id = node_id
        # Several nodes: acks=all needs min.insync.replicas in-sync replicas (one node has one, and
        # pays nothing for the check)
        self.checks_isr = len(catalogue.nodes) > 1
        self.catalogue = catalogue
        self.purgatory = purgatory  # None offline (tools, tests): no long polls to wake
        self.observations = observations
        self.clock = clock
        self.faults = faults
        if purgatory is not None:
            engine.high_watermark_listener = purgatory.notify  # a moved high watermark wakes its long polls

    @classmethod
    def offline(cls, engine: LogEngine) -> PartitionService:
        """The service over an engine without a broker around it (tools that write or read a data
        directory, tests of the coordinator adapters): one node, no long polls, no producer ids."""
        from .catalogue import TopicCatalogue

        return cls(engine, TopicCatalogue(engine, 0, None), purgatory=None, observations=None, clock=engine.clock)

    def for_node(self, node_id: int) -> PartitionService:
        """The same service answering the clients of `node_id` (several nodes in one process)."""
        view = copy.copy(self)
        view.node_id = node_id
        view.__dict__.pop("_replica_reader", None)
        return view

    replica_reads = False  # reads served on a follower too (replica_reader)

    def replica_reader(self) -> PartitionService:
        """This node's service that also reads the partitions it follows: Kafka serves a consumer's
        Fetch v11+ (which carries client metadata, KIP-392) on a follower, from its own replica
        (ReplicaManager: fetchOnlyLeader is false then). Every replica here is the one log."""
        view = self.__dict__.get("_replica_reader")
        if view is None:
            view = copy.copy(self)
            view.replica_reads = True
            self.__dict__["_replica_reader"] = view
        return view

    # --- who leads ----------------------------------------------------------------------------------

    def _store(self, topic: str, partition: int) -> tuple[PartitionStore | None, int, int]:
        """(store, error, leader epoch) of a partition this node leads; the error otherwise."""
        info = self.catalogue.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None, E.UNKNOWN_TOPIC_OR_PARTITION, NO_EPOCH
        if info.damaged is not None:
            return None, E.KAFKA_STORAGE_ERROR, NO_EPOCH
        if not self.catalogue.leads(info, partition, self.node_id) and not (
                self.replica_reads and self._follows(topic, partition)):
            return None, E.NOT_LEADER_OR_FOLLOWER, NO_EPOCH
        store = self._engine.store(topic, partition)
        if store is None:  # deleted meanwhile
            return None, E.UNKNOWN_TOPIC_OR_PARTITION, NO_EPOCH
        return store, E.NONE, info.leader_epochs.get(partition, 0) if info.leader_epochs else 0

    def _follows(self, topic: str, partition: int) -> bool:
        led = self.catalogue.leadership(topic, partition)
        return led is not None and self.node_id in led.replicas

    def leader_store(self, topic: str, partition: int) -> PartitionStore:
        """The store of a partition this node leads, for a coordinator that holds its records back to
        write them in one batch (its `before_append` hook, its durability rounds); raises KafkaError."""
        store, error, _ = self._store(topic, partition)
        if store is None:
            raise KafkaError(f"{topic}-{partition}: {ErrorCode(error).name}", ErrorCode(error))
        return store

    def bounds(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(error, log start offset, high watermark) of a partition this node leads: where a share
        group's share-partition starts and how far it may deliver."""
        store, error, _ = self._store(topic, partition)
        if store is None:
            return error, -1, -1
        if store.offline is not None:
            return E.KAFKA_STORAGE_ERROR, -1, -1
        return E.NONE, store.log_start_offset, store.high_watermark

    @staticmethod
    def _fenced_epoch(current: int, epoch: int) -> int:
        """Kafka's check of a client's CurrentLeaderEpoch (-1: not checked)."""
        if current == NO_EPOCH or current == epoch:
            return E.NONE
        return E.FENCED_LEADER_EPOCH if current < epoch else E.UNKNOWN_LEADER_EPOCH

    # --- appending ----------------------------------------------------------------------------------

    def for_produce(self, topic: str, partition: int) -> tuple[PartitionStore | None, int]:
        """The store a client's batch goes to, or the error to answer (internal topics are refused)."""
        if is_internal_topic(topic):
            return None, E.INVALID_TOPIC_EXCEPTION
        store, error, _ = self._store(topic, partition)
        return store, error

    @staticmethod
    def check_batch(records: bytes | memoryview, config: LogConfig, now_ms: int, *, allow_zstd: bool,
                    budget: InlineBudget | None) -> CheckedBatch | None:
        """A client's batch against its topic's limits (None: past `budget`, check it on the worker)."""
        return check_produced_batch(records, config, now_ms, allow_zstd=allow_zstd,
                                    max_inflated=rb.inflated_bound(), budget=budget)

    def append_client(self, store: PartitionStore, records: bytes | memoryview, headers: list[rb.BatchHeader],
                      now_ms: int, acks: int) -> AppendResult:
        """Append a checked client batch (raises KafkaError with the code to answer)."""
        topic, partition = store.topic, store.partition
        if (faults := self.faults) and (injected := faults.take("Produce", topic, partition)):
            raise KafkaError("injected by a test control", injected)
        info = self.catalogue.topic(topic)
        if acks == -1 and self.checks_isr and info is not None:
            self.check_min_isr(info, partition, E.NOT_ENOUGH_REPLICAS)
        epoch = info.leader_epochs.get(partition, 0) if info is not None and info.leader_epochs else 0
        result = store.append(records, origin=AppendOrigin.CLIENT, now_ms=now_ms, leader_epoch=epoch, headers=headers)
        if not result.duplicate:
            if self.observations is not None:
                self.observations.bytes_in[topic] += len(records)
            if acks == 0:
                store.request_durability()  # nobody waits, but consumers read only what is durable
        return result

    def check_min_isr(self, info: TopicInfo, partition: int, error: int) -> None:
        """Kafka's acks=all check (Partition.appendRecordsToLeader before the append, NOT_ENOUGH_REPLICAS;
        DelayedProduce after it, NOT_ENOUGH_REPLICAS_AFTER_APPEND): raises KafkaError(error)."""
        isr = self.catalogue.isr_size(info, partition)
        if isr < info.config.min_insync_replicas:
            raise KafkaError(f"The size of the current ISR {isr} is insufficient to satisfy the min.isr "
                             f"requirement of {info.config.min_insync_replicas} for partition "
                             f"{info.name}-{partition}", ErrorCode(error))

    def append(self, topic: str, partition: int, batch: bytes | bytearray, *, now_ms: int,
               headers: list[rb.BatchHeader] | None = None) -> AppendResult:
        """A coordinator's batch (its own records, or a transaction's offsets with its producer id):
        appended at once; await `result.wait_durable()` before answering. Raises KafkaError."""
        if (faults := self.faults) and (injected := faults.take("Append", topic, partition)):
            raise KafkaError("injected by a test control", injected)
        store, error, epoch = self._store(topic, partition)
        if store is None:
            raise KafkaError(f"cannot append to {topic}-{partition}: {ErrorCode(error).name}", ErrorCode(error))
        if (offline := store.offline) is not None:
            raise offline
        return store.append(batch, origin=AppendOrigin.COORDINATOR, now_ms=now_ms, leader_epoch=epoch,
                            headers=headers)

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            partitions: Iterable[tuple[str, int]], coordinator_epoch: int) -> None:
        """Kafka's WriteTxnMarkers, local: one marker per partition (fencing older epochs at once), then
        all awaited durable, then each partition's transaction closed, which moves its last stable
        offset (and wakes the read_committed fetches waiting on it). A partition whose topic is gone is
        skipped; a stale marker is skipped (a newer one supersedes it); a failed append or fsync
        raises, and the caller retries the whole set (markers are idempotent)."""
        now_ms = self.clock.wall_ms()
        appended: list[AppendResult] = []
        for topic, partition in sorted(partitions):
            store, error, epoch = self._store(topic, partition)
            if store is None:
                log.info("txn_marker_skipped", topic=topic, partition=partition, producer_id=producer_id,
                         reason=ErrorCode(error).name)
                continue
            try:
                appended.append(store.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                                    now_ms, epoch))
            except KafkaError as exc:
                if exc.code != E.INVALID_PRODUCER_EPOCH:
                    raise
                log.warning("txn_marker_stale", topic=topic, partition=partition, error=str(exc))
        await asyncio.gather(*(result.wait_durable() for result in appended))
        for result in appended:
            result.store.complete_marker(producer_id, commit, result.last_offset)
            if self.purgatory is not None:  # the last stable offset moved
                self.purgatory.notify(result.store.topic, result.store.partition)

    async def write_marker(self, producer_id: int, producer_epoch: int, commit: bool, topic: str, partition: int,
                           coordinator_epoch: int, transaction_version: int = 0) -> ErrorCode:
        """One marker a client asked for (WriteTxnMarkers: `kafka-transactions abort`, i.e.
        Admin.abortTransaction of a hanging transaction), answered as Kafka's ReplicaManager answers
        it: INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch (with
        `transaction_version` 2: not newer; nothing written), the partition's error, or NONE once the
        marker is durable and the transaction closed here."""
        store, error, epoch = self._store(topic, partition)
        if store is None:
            return ErrorCode(error)
        if store.offline is not None:
            return E.KAFKA_STORAGE_ERROR
        try:
            result = store.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                         self.clock.wall_ms(), epoch, transaction_version)
            await result.wait_durable()
        except KafkaError as exc:
            return exc.code
        store.complete_marker(producer_id, commit, result.last_offset)
        if self.purgatory is not None:  # the last stable offset moved
            self.purgatory.notify(topic, partition)
        return E.NONE

    # --- reading ------------------------------------------------------------------------------------

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *, min_one_batch: bool,
             read_committed: bool, current_leader_epoch: int = NO_EPOCH) -> PartitionRead:
        """One partition of a fetch: whole batches from `offset`, none past the high watermark (or the
        last stable offset), with the offsets the answer reports."""
        store, error, epoch = self._store(topic, partition)
        if store is None:
            return PartitionRead(error, -1, -1)
        if store.offline is not None:
            # Offline after a storage error: its tail may never reach the disk, so serve nothing from
            # it, as Kafka's offline log directory answers.
            return PartitionRead(E.KAFKA_STORAGE_ERROR, -1, -1)
        if current_leader_epoch != NO_EPOCH and (fenced := self._fenced_epoch(current_leader_epoch, epoch)):
            return PartitionRead(fenced, -1, -1)
        if (faults := self.faults) and (injected := faults.take("Fetch", topic, partition)):
            return PartitionRead(injected, -1, -1)
        high_watermark = store.high_watermark
        lso = store.last_stable_offset
        try:
            if offset == store.log_end_offset and offset >= store.log_start_offset:
                records: bytes | memoryview = b""  # caught up: the usual long poll, nothing to read
            else:
                records = store.read(offset, max_bytes, Isolation.TXN_COMMITTED if read_committed
                                     else Isolation.HIGH_WATERMARK, min_one_batch=min_one_batch)
        except KafkaError as e:  # OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE
            return PartitionRead(e.code, -1, -1)
        if records and self.observations is not None:
            self.observations.bytes_out[topic] += len(records)
        aborted = aborted_in(store, offset, records) if read_committed and records else ([] if read_committed else None)
        return PartitionRead(E.NONE, high_watermark, store.log_start_offset, records, lso, aborted)

    async def prepare_reads(self, reads: Iterable[tuple[str, int, int, int]]) -> None:
        """Before a fetch's synchronous reads: the (topic, partition, offset, max bytes) that an engine
        keeps outside memory (PostgreSQL's batches below a partition's tail) are read in, all at once,
        the event loop serving others meanwhile. Nothing to wait for on the segment engine."""
        waits = []
        loaded = self._engine.loaded_store  # a lookup: the checks are the read's, which follows
        for topic, partition, offset, max_bytes in reads:
            store = loaded(topic, partition)
            if store is not None and (wait := store.prepare_read(offset, max_bytes)) is not None:
                waits.append(asyncio.shield(wait))  # shared with other readers: a cancelled fetch leaves it be
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)  # a failure is the read's to report

    def fetchable(self, topic: str, partition: int, offset: int, max_bytes: int, read_committed: bool) -> int:
        """For a parked fetch: the bytes it could read now (0: none yet), or -1 when it has something
        to report (an error, an offset out of range)."""
        store, _, _ = self._store(topic, partition)
        if store is None or store.offline is not None:
            return -1
        if offset > store.log_end_offset or offset < store.log_start_offset:
            return -1
        end = store.last_stable_offset if read_committed else store.high_watermark
        if end <= offset:
            return 0
        if max_bytes <= 1:
            return 1
        try:
            return len(store.read(offset, max_bytes, Isolation.TXN_COMMITTED if read_committed
                                  else Isolation.HIGH_WATERMARK, min_one_batch=True))
        except KafkaError:
            return -1

    def replay_store(self, topic: str, partition: int) -> PartitionStore | None:
        """A coordinator's own partition to replay, if it holds anything (an empty one is not built).
        Raises KAFKA_STORAGE_ERROR for a fenced topic, so its groups stay loading."""
        info = self.catalogue.topic(topic)
        if info is not None and info.damaged is not None:
            raise KafkaError(f"{topic} is fenced: {info.damaged}", E.KAFKA_STORAGE_ERROR)
        return self._engine.loaded_store(topic, partition)

    def size(self, topic: str, partition: int) -> int | None:
        """Bytes the partition holds on this node (None: no such partition), building nothing."""
        return self._engine.partition_size(topic, partition)

    # --- offsets ------------------------------------------------------------------------------------

    async def list_offset(self, topic: str, partition: int, timestamp: int, version: int, read_committed: bool,
                          budget: InlineBudget, current_leader_epoch: int = NO_EPOCH) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error, offset, timestamp, leader epoch)."""
        store, error, epoch = self._store(topic, partition)
        if store is None:
            return error, -1, -1, -1
        if fenced := self._fenced_epoch(current_leader_epoch, epoch):
            return fenced, -1, -1, -1
        try:
            offset, ts = await self._lookup(store, timestamp, version, read_committed, budget)
        except KafkaError as e:  # a timestamp search that reached a damaged batch: CORRUPT_MESSAGE
            return e.code, -1, -1, -1
        if offset < 0:
            return E.NONE, -1, -1, -1
        return E.NONE, offset, ts, store.latest_epoch() if timestamp == LATEST else store.epoch_at(offset)

    async def _lookup(self, store: PartitionStore, timestamp: int, version: int, read_committed: bool,
                      budget: InlineBudget) -> tuple[int, int]:
        """(offset, timestamp). A batch past what is left of the request's `budget` for walking
        records on the loop is walked on the offset-search worker (log/timestamp_search.py)."""
        if timestamp == LATEST:
            return (store.last_stable_offset if read_committed else store.high_watermark), -1
        if timestamp == EARLIEST or (timestamp == EARLIEST_LOCAL and version >= 8):
            return store.log_start_offset, -1
        if (timestamp == LATEST_TIERED and version >= 9) or (timestamp == EARLIEST_PENDING_UPLOAD and version >= 11):
            return -1, -1
        if timestamp == MAX_TIMESTAMP and version >= 7:
            await _prepared(store.prepare_timestamp_search(None, 0))
            best = store.max_timestamp_offset(budget)
            if isinstance(best, BatchToWalk):
                best = await run_in_worker(OFFSET_SEARCH, best.walk) or best.otherwise or (-1, -1)
            return best
        start = 0
        while True:
            await _prepared(store.prepare_timestamp_search(timestamp, start))
            found = store.offset_for_timestamp(timestamp, start, budget)
            if not isinstance(found, BatchToWalk):
                break
            walked = await run_in_worker(OFFSET_SEARCH, found.walk)
            if walked is not None:
                found = walked
                break
            if store.closed:  # deleted while the batch was walked
                raise KafkaError(f"{store.topic}-{store.partition} was deleted", E.UNKNOWN_TOPIC_OR_PARTITION)
            assert found.resume_offset is not None
            start = found.resume_offset  # no record of it qualifies (its header's max timestamp said one would)
        return (-1, -1) if found is None else found

    def offsets_before(self, topic: str, partition: int, timestamp: int, max_num_offsets: int) -> tuple[int, list[int]]:
        """ListOffsets v0: (error, offsets, newest first)."""
        store, error, _ = self._store(topic, partition)
        if store is None:
            return error, []
        return E.NONE, store.offsets_before(timestamp, max_num_offsets, self.clock.wall_ms())

    def epoch_end_offset(self, topic: str, partition: int, current_leader_epoch: int,
                         leader_epoch: int) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch for one partition: (error, epoch, end offset), from its epoch history."""
        store, error, epoch = self._store(topic, partition)
        if store is None:
            return error, NO_EPOCH, -1
        if fenced := self._fenced_epoch(current_leader_epoch, epoch):
            return fenced, NO_EPOCH, -1
        found_epoch, end = store.epoch_end_offset(leader_epoch)
        return E.NONE, found_epoch, end

    async def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords for one partition: (error, low watermark); -1 means the high watermark. Answered
        once the new log start is durable (an engine over a database stores it with its next round)."""
        try:
            internal_topics.check_records_deletion(topic)
        except internal_topics.Refused as refusal:
            return refusal.code, -1
        store, error, _ = self._store(topic, partition)
        if store is None:
            return error, -1
        error, low = self._prune(store, topic, partition, offset)
        try:
            waiter = store.durable_log_start() if error == E.NONE else None
            if waiter is not None:
                await waiter
        except KafkaError as e:
            return e.code, -1
        return error, low

    def prune(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """The log start moved to `offset` (-1: the high watermark), for any topic: DeleteRecords after
        its check, and the coordinators that prune their own internal topic (__share_group_state)."""
        store, error, _ = self._store(topic, partition)
        if store is None:
            return error, -1
        return self._prune(store, topic, partition, offset)

    def _prune(self, store: PartitionStore, topic: str, partition: int, offset: int) -> tuple[int, int]:
        target = store.high_watermark if offset == -1 else offset
        before = store.log_start_offset
        try:
            low = store.delete_records_before(target)
        except KafkaError as e:
            return e.code, -1
        if low != before:
            log.info("records_deleted", topic=topic, partition=partition, log_start_offset=low, previous=before)
        return E.NONE, low

    def producers(self, topic: str, partition: int) -> tuple[int, list]:
        """DescribeProducers: (error, [(producer, first offset of its open transaction or -1)])."""
        store, error, _ = self._store(topic, partition)
        if store is None:
            return error, []
        return E.NONE, list(store.producers())

