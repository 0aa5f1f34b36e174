"""The transaction coordinator in the broker: `__transaction_state` written and read, markers, offsets.

The coordinator itself is coordinator/txn/: one TransactionShard per `__transaction_state` partition
on the coordinator runtime, as the group coordinator's partitions are (coordinator/txn/service.py).
This adapter is what it needs of the broker, in Kafka's order: the writer it appends transits
through (`append_records`: a transit's record is durable before it is applied and answered); the
replay of every partition at start-up (before the server listens), a damaged batch skipped and
named and what the log lost contained (txn_recovery.py); and, once a transaction is prepared
(PrepareCommit/PrepareAbort durable, EndTxn answered), in the background, its offsets materialised in
their groups (commit) or dropped (abort), its markers appended to every partition and made durable,
and only then CompleteCommit/CompleteAbort written. Until then the transactional id answers
CONCURRENT_TRANSACTIONS.

Transactional offsets (TxnOffsetCommit) are appended at once to the group's `__consumer_offsets`
partition as a transactional batch of OffsetCommit records (Kafka's format, the producer's id and
epoch) and held here as pending. When the transaction commits, the markers are written first (the
`__consumer_offsets` partition is one of the transaction's), then the offsets are applied to the
group's memory through its commit path, which writes nothing for them (Durability.IN_LOG): as in
Kafka, the transactional batch and its marker are the only records of them; on abort they are dropped. After a crash the replay of
`__consumer_offsets` applies committed ones at their marker and hands back those with no marker yet
(`OffsetsTopic.open_txn_offsets`), which the completion of a prepared transaction adopts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Iterator

import structlog

from ..partitions.catalogue import INTERNAL_TOPIC_CONFIGS
from ...coordinator.groups import commands as c
from ...protocol.records.codec import encode_record
from ...protocol.records.classic_records import OffsetCommitRecord, OffsetCommitTombstone
from ...coordinator.txn.coordinator import COORDINATOR_EPOCH, TxnConfig
from ...coordinator.txn.metadata import TRANSACTION_VERSION_BUILT
from ...coordinator.txn.service import TransactionCoordinatorService
from ...protocol.records.transaction_log import (TransactionLogRecord, TxnLogFormatError, decode_key, decode_value,
                                                 encode_key, encode_value)
from ...coordinator.txn.metadata import TopicPartition, TransactionMetadata, TxnState
from ...protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ...protocol.record_batch import Record as LogRecord
from ...protocol.record_batch import encode_batch
from ..partitions.replay_read import keyed_records
from .txn_recovery import DamagedBatch, contain_losses

log = structlog.get_logger("kbroker.transactions")

E = ErrorCode
S = TxnState
TOPIC = "__transaction_state"
# Kafka's transaction.state.log.* defaults: compacted, 100 MiB segments.
TOPIC_CONFIGS = INTERNAL_TOPIC_CONFIGS
_RETRY_BACKOFF_S = 0.5
_MATERIALISE_BYTES = 512 * 1024  # one commit of a transaction's offsets at its end: within max.message.bytes
# A request arriving while the previous transaction's markers are being written waits this long for
# them before it is decided (it would otherwise be CONCURRENT_TRANSACTIONS and the client would back
# off for 20-100 ms); past it the request gets CONCURRENT_TRANSACTIONS as in Kafka.
SETTLE_WAIT_S = 0.1
# How long a transit waits for `__transaction_state` being created before it is answered
# NOT_COORDINATOR (retriable); the creation goes on retrying (create_topic).
TOPIC_WAIT_S = 5.0
# Kafka's add.partitions.to.txn.retry.backoff.ms (20) and .max.ms (100): a partition added by Produce
# v12+ while the previous transaction's markers are written is retried this often, this long.
ADD_RETRY_BACKOFF_S = 0.02
ADD_RETRIES = 5


@dataclass(slots=True, frozen=True)
class PendingOffset:
    offset: int
    leader_epoch: int
    metadata: str


class TransactionService:
    def __init__(self, broker: Any, config: Any) -> None:
        self.broker = broker
        self.topic_ready = asyncio.Event()  # set once __transaction_state exists
        self.txn_config = TxnConfig(
            max_timeout_ms=config.transaction_max_timeout_ms,
            num_partitions=config.transaction_state_log_num_partitions,
            id_expiration_ms=config.transactional_id_expiration_ms,
            transaction_version=min(broker.kafka_release.finalized_features.get("transaction.version", 0),
                                    TRANSACTION_VERSION_BUILT))
        self.adopt_existing_topic()
        # The coordinator (coordinator/txn/service.py): routing, shards, the timeout check, on the
        # broker's clock and timers; it writes through append_records below.
        self.coordinator = TransactionCoordinatorService(
            self.append_records, clock=broker.clock, timers=broker.timers,
            allocate_producer_id=broker.catalogue.allocate_producer_id, config=self.txn_config,
            check_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            on_markers_due=self._on_markers_due)
        # transactional id -> group -> partition -> offset: TxnOffsetCommit's offsets until the end
        self.pending_offsets: dict[str, dict[str, dict[TopicPartition, PendingOffset]]] = {}
        # A test control (POST /v1/test/transactions/hold-markers): markers wait this long after a
        # Prepare* is durable, so a test can stop the broker between the prepare and the markers.
        self.marker_hold_ms = 0
        self.damaged: list[DamagedBatch] = []  # what the start-up replay had to skip (txn_recovery.py)
        self.loading: asyncio.Task[None] | None = None  # the replay of an existing topic (load)
        self._tasks: set[asyncio.Task] = set()
        self._completing: dict[str, asyncio.Event] = {}  # transactional id -> set when its markers are done
        self._running = False
        broker.offsets_topic.tombstone_listener = self.offsets_tombstoned

    @property
    def num_partitions(self) -> int:
        return self.txn_config.num_partitions

    # --- life cycle ----------------------------------------------------------------------------------

    def adopt_existing_topic(self) -> None:
        """An existing topic's partition count wins over the setting (as in Kafka). A first start has
        none: create_topic() makes it while the broker already serves."""
        info = self.broker.catalogue.topic(TOPIC)
        if info is not None:
            self.txn_config.num_partitions = info.num_partitions
            self.topic_ready.set()

    async def create_topic(self) -> None:
        """Create the topic on a first start, its files made in a worker thread while the broker serves;
        a transit to write meanwhile waits for it (_append)."""
        delay = 1.0
        while self.broker.catalogue.topic(TOPIC) is None:
            try:
                await self.broker.catalogue.create_internal_topic_async(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
                log.info("transaction_state_topic_created", partitions=self.num_partitions)
            except Exception as exc:  # noqa: BLE001 - a full disk, --max-partitions: transits fail meanwhile
                log.error("transaction_state_topic_create_failed", error=repr(exc), retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        self.topic_ready.set()

    def start(self) -> None:
        """Serve: requests are decided from here on (a partition still loading answers
        COORDINATOR_LOAD_IN_PROGRESS); the timeout check runs on the broker's timers."""
        self._running = True
        self.coordinator.start()

    def load_nothing(self) -> None:
        """No `__transaction_state` yet (the first use): every partition is loaded empty."""
        self.coordinator.load_empty(range(self.num_partitions))

    def load(self) -> asyncio.Task[None]:
        """Replay every `__transaction_state` partition (the task of `load_all`); until each is
        replayed its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS."""
        self.coordinator.mark_loading(range(self.num_partitions))
        return asyncio.get_running_loop().create_task(self.load_all(), name="txn-load")

    async def load_all(self) -> None:
        """Replay every `__transaction_state` partition into its shard (at start-up, before the server
        listens, as Kafka loads it), each on its own: a damaged batch is skipped and named. Then what
        the log lost is said and contained (txn_recovery.contain_losses)."""
        started = time.monotonic()
        self.coordinator.mark_loading(range(self.num_partitions))
        count = 0
        for partition in range(self.num_partitions):
            records = list(self._read_partition(partition))
            count += len(records)
            await self.coordinator.load(partition, records)
        txns = list(self.coordinator.transactions())
        log.info("transactions_loaded", records=count, transactions=len(txns),
                 prepared=sum(t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) for t in txns),
                 load_ms=round(1000 * (time.monotonic() - started), 1))
        await contain_losses(self)

    async def move_partition(self, partition: int, led: bool) -> None:
        """A `__transaction_state` partition's leader moved (several nodes, broker/cluster.py): the
        transaction coordinator's failover, as Kafka's TransactionStateManager resigns and loads a
        partition. Unloaded (its transactional ids answer NOT_COORDINATOR, its timers stop), then, when
        some node leads it, replayed from its log (COORDINATOR_LOAD_IN_PROGRESS meanwhile): the new
        shard holds every transaction's state and sends the markers of those left in a prepare state."""
        if self.loading is not None and not self.loading.done():
            await asyncio.gather(self.loading, return_exceptions=True)
        await self.coordinator.unload(partition)
        if led:
            self.coordinator.mark_loading([partition])
            await self.coordinator.load(partition, list(self._read_partition(partition)))

    async def stop(self) -> None:
        self._running = False
        tasks = list(self._tasks) + ([self.loading] if self.loading is not None else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.coordinator.stop()

    def _spawn(self, coro, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _read_partition(self, partition: int) -> Iterator[TransactionLogRecord]:
        store = self.broker.partitions.replay_store(TOPIC, partition)  # one with records is never dormant
        if store is None:
            return

        def skipped(offset: int, end: int, exc: CorruptRecordError) -> int:
            # One damaged batch costs what it held, not the partition (nor the broker's start).
            damaged = DamagedBatch.of(partition, offset, end, exc)
            self.damaged.append(damaged)
            damaged.report()
            return damaged.resume_offset

        for at, key, value in keyed_records(store, skipped):
            try:
                yield TransactionLogRecord(decode_key(key), decode_value(value))
            except (TxnLogFormatError, UnicodeDecodeError) as exc:
                log.warning("transaction_record_unreadable", partition=partition, offset=at, error=str(exc))

    # --- the coordinator's writer ----------------------------------------------------------------------

    async def append_records(self, partition: int, records: list[TransactionLogRecord]) -> None:
        """The PartitionWriter of the transaction shards: each record made durable in its partition;
        a failure is a KafkaError (NOT_COORDINATOR unless the log says otherwise), which the runtime
        answers the client with, keeping the old metadata."""
        for record in records:
            value = None if record.value is None else encode_value(record.value)
            try:
                await self._append(record.transactional_id, value)
            except KafkaError:
                raise
            except Exception as exc:  # noqa: BLE001 - storage errors become a retriable answer
                raise KafkaError(f"{TOPIC}-{partition}: {exc!r}", ErrorCode.NOT_COORDINATOR) from exc

    async def _append(self, txn_id: str, value: bytes | None) -> None:
        partition = self.coordinator.partition_for(txn_id)
        if not self.topic_ready.is_set():  # the topic, still being created (create_topic)
            try:
                await asyncio.wait_for(self.topic_ready.wait(), TOPIC_WAIT_S)
            except asyncio.TimeoutError:
                raise RuntimeError(f"{TOPIC} is not created yet") from None  # answered NOT_COORDINATOR
        now = self.broker.clock.wall_ms()
        batch = encode_batch([LogRecord(offset=0, timestamp=now, key=encode_key(txn_id), value=value)])
        await self.broker.partitions.append(TOPIC, partition, batch, now_ms=now).wait_durable()

    # --- the client APIs -----------------------------------------------------------------------------

    async def init_producer_id(self, txn_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        await self._settle(txn_id)
        result = await self.coordinator.init_producer_id(txn_id, timeout_ms, expected)
        return result.error, result.producer_id, result.producer_epoch

    async def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                             partitions: list[TopicPartition], client_tv: int = 0) -> ErrorCode:
        await self._settle(txn_id)
        return (await self.coordinator.add_partitions(txn_id, producer_id, epoch, partitions, client_tv)).error

    async def add_implicitly(self, txn_id: str, producer_id: int, epoch: int,
                             partitions: list[TopicPartition]) -> ErrorCode:
        """Transactions v2 (Produce v12+, TxnOffsetCommit v5+): the broker adds the partitions to the
        producer's transaction itself (Kafka's AddPartitionsToTxnManager, ADD_PARTITION), retrying
        CONCURRENT_TRANSACTIONS (the previous transaction's markers) every
        add.partitions.to.txn.retry.backoff.ms for up to add.partitions.to.txn.retry.backoff.max.ms, as
        Kafka's ReplicaManager does. A stale epoch is INVALID_PRODUCER_EPOCH, as Kafka tells producers."""
        if self.verify(txn_id, producer_id, epoch, partitions) == dict.fromkeys(partitions, E.NONE):
            return E.NONE  # already in the ongoing transaction: nothing to write
        for attempt in range(ADD_RETRIES + 1):
            if attempt:
                await asyncio.sleep(ADD_RETRY_BACKOFF_S)
            error = await self.add_partitions(txn_id, producer_id, epoch, partitions, TRANSACTION_VERSION_BUILT)
            if error != E.CONCURRENT_TRANSACTIONS:
                break
        return E.INVALID_PRODUCER_EPOCH if error == E.PRODUCER_FENCED else error

    def verify(self, txn_id: str, producer_id: int, epoch: int,
               partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        return self.coordinator.verify(txn_id, producer_id, epoch, partitions)

    def verify_produce(self, txn_id: str, producer_id: int, epoch: int, tp: TopicPartition) -> ErrorCode:
        """KIP-890's server-side defence: a transactional batch is appended only to a partition of the
        producer's ongoing transaction. Produce reports a stale epoch as INVALID_PRODUCER_EPOCH."""
        error = self.verify(txn_id, producer_id, epoch, [tp])[tp]
        if error == E.PRODUCER_FENCED:
            return E.INVALID_PRODUCER_EPOCH
        return error

    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                      v2: bool = False) -> tuple[ErrorCode, int, int]:
        """The answer, and with `v2` (EndTxn v5) the producer id and epoch the producer goes on with."""
        if v2:
            await self._settle(txn_id)  # a retry of the end may find its markers still being written
        result = await self.coordinator.end_txn(txn_id, producer_id, epoch, commit, v2)
        return result.error, result.producer_id, result.producer_epoch

    def transaction(self, txn_id: str) -> TransactionMetadata | None:
        return self.coordinator.transaction(txn_id)

    def transactions(self) -> Iterator[TransactionMetadata]:
        return self.coordinator.transactions()

    async def txn_offset_commit(self, txn_id: str, producer_id: int, epoch: int, group_id: str,
                                offsets: dict[TopicPartition, PendingOffset], generation_id: int = -1,
                                member_id: str = "", group_instance_id: str | None = None,
                                add_partition: bool = False) -> ErrorCode:
        """Hold a transaction's offsets until it ends, durably: a transactional batch in the group's
        `__consumer_offsets` partition, which must be in the transaction (AddOffsetsToTxn), or, with
        `add_partition` (TxnOffsetCommit v5+, transactions v2), is added to it here."""
        from .offsets_topic import TOPIC as OFFSETS_TOPIC

        coordinator = getattr(self.broker, "coordinator", None)
        if coordinator is None:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = coordinator.partition_for(group_id)
        tp = (OFFSETS_TOPIC, partition)
        if add_partition:
            error = await self.add_implicitly(txn_id, producer_id, epoch, [tp])
        else:
            error = self.verify(txn_id, producer_id, epoch, [tp])[tp]
        if error == E.PRODUCER_FENCED:
            return E.INVALID_PRODUCER_EPOCH
        if error != E.NONE:
            return error
        if generation_id >= 0 or member_id or group_instance_id is not None:
            # KIP-447: a consumer that lost its partitions in a rebalance must not commit for them
            check = c.OffsetCommit(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                   topics=tuple(c.OffsetCommitTopic(t, (c.OffsetCommitPartition(p, 0),))
                                                for t, p in offsets),
                                   group_instance_id=group_instance_id, validate_only=True)
            result = await coordinator.commit_offsets(check)
            errors = {p.error for t in result.topics for p in t.partitions} - {E.NONE}
            if errors:
                return min(errors)
        if not self.broker.catalogue.has_partition(OFFSETS_TOPIC, partition):
            return E.COORDINATOR_NOT_AVAILABLE
        now = self.broker.clock.wall_ms()
        records = [OffsetCommitRecord(group_id, topic, p, o.offset, o.leader_epoch, o.metadata, now)
                   for (topic, p), o in sorted(offsets.items())]
        batch = encode_batch([LogRecord(offset=i, timestamp=now, key=key, value=value)
                              for i, (key, value) in enumerate(encode_record(r) for r in records)],
                             producer_id=producer_id, producer_epoch=epoch, base_sequence=0, is_transactional=True)
        try:
            # a transactional batch: the store records it in the producer state, opening the transaction there
            await self.broker.partitions.append(OFFSETS_TOPIC, partition, batch, now_ms=now).wait_durable()
        except Exception as exc:  # noqa: BLE001 - a storage failure is a retriable answer
            log.error("txn_offset_commit_failed", transactional_id=txn_id, group=group_id, error=repr(exc))
            return E.NOT_COORDINATOR
        self.pending_offsets.setdefault(txn_id, {}).setdefault(group_id, {}).update(offsets)
        return E.NONE

    def offsets_tombstoned(self, partition: int, records: list[Any]) -> None:
        """Records the group coordinator appends to `__consumer_offsets-<partition>`: an offset tombstone
        (OffsetDelete, DeleteGroups, retention, a deleted topic) ends the pending transactional offsets
        of its key, as Kafka's replay of it does (OffsetMetadataManager.replay clears the key's open
        transactions), and as this broker's replay of the log does (offsets_topic.py `_fold_chunk`):
        the transaction's COMMIT marker then brings none of them back."""
        replayed = self.broker.offsets_topic.open_txn_offsets.get(partition)
        if not self.pending_offsets and not replayed:
            return
        for r in records:
            if r.__class__ is not OffsetCommitTombstone:
                continue
            key = (r.topic, r.partition)
            for groups in self.pending_offsets.values():
                offsets = groups.get(r.group)
                if offsets:
                    offsets.pop(key, None)
            for producer_id, held in (replayed or {}).items():
                replayed[producer_id] = [h for h in held if not (h.__class__ is OffsetCommitRecord and h.group == r.group
                                                                   and (h.topic, h.partition) == key)]

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of `group_id` with an offset an open transaction has committed (OffsetFetch
        with require_stable answers them UNSTABLE_OFFSET_COMMIT). One pass over the open
        transactions, once per request: asked per partition it was quadratic (100,000 partitions
        against 1,000 open transactions held every client 27 s)."""
        pending: set[tuple[str, int]] = set()
        for groups in self.pending_offsets.values():
            pending.update(groups.get(group_id, ()))
        offsets_topic = getattr(self.broker, "offsets_topic", None)  # replayed, not yet resolved
        coordinator = getattr(self.broker, "coordinator", None)
        if offsets_topic is not None and coordinator is not None:
            loaded = offsets_topic.open_txn_offsets.get(coordinator.partition_for(group_id), {})
            pending.update((r.topic, r.partition) for records in loaded.values() for r in records
                           if r.group == group_id)
        return pending

    async def write_offsets_marker(self, producer_id: int, epoch: int, commit: bool, partition: int,
                                   coordinator_epoch: int, transaction_version: int = 0) -> ErrorCode:
        """WriteTxnMarkers on a `__consumer_offsets` partition (Kafka's groupCoordinator
        .completeTransaction): the marker, then the producer's transactional offsets held for that
        partition's groups applied (commit) or dropped (abort). Offsets a restart's replay handed back
        with no transaction to adopt them are dropped on abort; on commit they wait for their
        transaction's own completion."""
        from .offsets_topic import TOPIC as OFFSETS_TOPIC

        error = await self.broker.partitions.write_marker(producer_id, epoch, commit, OFFSETS_TOPIC, partition,
                                                          coordinator_epoch, transaction_version)
        if error != E.NONE:
            return error
        coordinator = getattr(self.broker, "coordinator", None)
        mine = [t.transactional_id for t in self.coordinator.transactions() if t.producer_id == producer_id]
        try:
            for txn_id in mine:
                if coordinator is not None:  # only the groups of this partition
                    groups = self.pending_offsets.get(txn_id, {})
                    held = {g: groups.pop(g) for g in list(groups) if coordinator.partition_for(g) == partition}
                    if commit and held:
                        await self._materialise_groups(txn_id, held)
            offsets_topic = getattr(self.broker, "offsets_topic", None)
            if not commit and offsets_topic is not None:
                offsets_topic.open_txn_offsets.get(partition, {}).pop(producer_id, None)
        except Exception as exc:  # noqa: BLE001 - the marker is written; the group could not take the offsets
            log.error("txn_marker_offsets_failed", producer_id=producer_id, partition=partition, error=repr(exc))
            return E.UNKNOWN_SERVER_ERROR
        return E.NONE

    # --- ending transactions -------------------------------------------------------------------------

    def _on_markers_due(self, txn_id: str, commit: bool) -> None:
        """A transaction is prepared (its shard says so once Prepare* is durable, or at load)."""
        done = self._completing[txn_id] = asyncio.Event()
        self._spawn(self._complete(txn_id, done), f"txn-complete-{txn_id}")

    async def _settle(self, txn_id: str) -> None:
        """Wait (bounded) for a transaction whose markers are being written to complete."""
        done = self._completing.get(txn_id)
        if done is not None and not done.is_set():
            try:
                await asyncio.wait_for(done.wait(), SETTLE_WAIT_S)
            except asyncio.TimeoutError:
                pass

    async def _complete(self, txn_id: str, done: asyncio.Event) -> None:
        try:
            await self._complete_markers(txn_id)
        finally:
            done.set()
            if self._completing.get(txn_id) is done:
                del self._completing[txn_id]

    async def _complete_markers(self, txn_id: str) -> None:
        """Offsets, markers, then Complete*: retried until it succeeds (markers are idempotent)."""
        if self.marker_hold_ms:
            await asyncio.sleep(self.marker_hold_ms / 1000)
        while True:
            txn = self.coordinator.transaction(txn_id)
            if txn is None or txn.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            commit = txn.state == S.PREPARE_COMMIT
            try:
                await self._adopt_replayed_offsets(txn_id, txn.producer_id, txn.partitions)
                await self.broker.partitions.write_markers(txn.producer_id, txn.producer_epoch, commit,
                                                           txn.partitions, COORDINATOR_EPOCH)
                if commit:
                    await self._materialise_offsets(txn_id)
                self.pending_offsets.pop(txn_id, None)
                if (await self.coordinator.complete(txn_id)).error == E.NONE:
                    return  # its shard logged transaction_completed
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep trying: the transaction must end
                log.error("transaction_completion_failed", transactional_id=txn_id, error=repr(exc))
            await asyncio.sleep(_RETRY_BACKOFF_S)  # a storage failure's backoff, not a clock

    async def _adopt_replayed_offsets(self, txn_id: str, producer_id: int, partitions) -> None:
        """After a restart: the transaction's offsets come back from the `__consumer_offsets` replay,
        which must have finished for the partitions concerned."""
        from .offsets_topic import TOPIC as OFFSETS_TOPIC

        offsets_topic = getattr(self.broker, "offsets_topic", None)
        coordinator = getattr(self.broker, "coordinator", None)
        mine = [p for t, p in partitions if t == OFFSETS_TOPIC]
        if not mine or offsets_topic is None or coordinator is None:
            return
        await coordinator.until_loaded()
        for partition in mine:
            for r in offsets_topic.open_txn_offsets.get(partition, {}).pop(producer_id, []):
                if isinstance(r, OffsetCommitRecord):
                    self.pending_offsets.setdefault(txn_id, {}).setdefault(r.group, {})[(r.topic, r.partition)] = \
                        PendingOffset(r.offset, r.leader_epoch, r.metadata)

    async def _materialise_offsets(self, txn_id: str) -> None:
        await self._materialise_groups(txn_id, self.pending_offsets.get(txn_id))

    async def _materialise_groups(self, txn_id: str, groups: dict[str, dict[TopicPartition, PendingOffset]] | None
                                  ) -> None:
        """Apply a committed transaction's offsets to their groups, each applied one removed."""
        coordinator = getattr(self.broker, "coordinator", None)
        if not groups or coordinator is None:
            return
        for group_id, offsets in list(groups.items()):
            # In commits of at most _MATERIALISE_BYTES each: the transaction's TxnOffsetCommits were
            # each within max.message.bytes, but all of them in one batch need not be (3 MB of them
            # wedged the transaction, retried twice a second, until a restart).
            ordered = sorted(offsets.items())
            while ordered:
                chunk: list[tuple[tuple[str, int], PendingOffset]] = []
                size = 0
                for key, o in ordered:
                    size += len(key[0]) + len(o.metadata or "") + len(group_id) + 64
                    if chunk and size > _MATERIALISE_BYTES:
                        break
                    chunk.append((key, o))
                del ordered[:len(chunk)]
                by_topic: dict[str, list[c.OffsetCommitPartition]] = {}
                for (topic, partition), o in chunk:
                    by_topic.setdefault(topic, []).append(c.OffsetCommitPartition(
                        partition=partition, offset=o.offset, leader_epoch=o.leader_epoch, metadata=o.metadata))
                cmd = c.OffsetCommit(group_id=group_id, generation_id=-1, member_id="",
                                     topics=tuple(c.OffsetCommitTopic(t, tuple(ps)) for t, ps in by_topic.items()),
                                     transactional=True)
                result = await coordinator.commit_offsets(cmd)
                errors = {p.error for t in result.topics for p in t.partitions} - {E.NONE}
                if errors:
                    raise RuntimeError(f"materialising offsets of {txn_id} in group {group_id}: {sorted(errors)}")
                for key, _ in chunk:
                    del offsets[key]
            del groups[group_id]
