"""The transaction coordinator service: persistence in `__transaction_state`, markers, timeouts.

The decisions are `coordinator/txn/coordinator.py`'s; this module carries them out, in Kafka's order:
a transit's record is appended to the transactional id's `__transaction_state` partition and made
durable before it is applied and answered. EndTxn answers once PrepareCommit/PrepareAbort is
durable; then, in the background, the transaction's offsets are materialised in their groups (commit)
or dropped (abort), the markers are appended to every partition and made durable, and only then is
CompleteCommit/CompleteAbort written. Until then the transactional id answers CONCURRENT_TRANSACTIONS.

At start-up every partition is replayed (before the server listens); transactions found prepared are
completed in the background, Ongoing ones are aborted by the timeout pass once they expire.

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
import os
import time
from dataclasses import dataclass
from typing import Any

import structlog

from ..partitions.txn_markers import write_markers
from ..storage.log.config import INTERNAL_TOPIC_CONFIGS
from ...coordinator.groups import commands as c
from ...protocol.records.codec import encode_record
from ...protocol.records.classic_records import OffsetCommitRecord
from ...coordinator.txn.coordinator import COORDINATOR_EPOCH, Decision, TxnConfig, TxnCoordinator, log_value
from ...protocol.records.transaction_log import TxnLogFormatError, decode_key, decode_value, encode_key, encode_value
from ...coordinator.txn.metadata import TopicPartition, TxnState
from ...protocol.errors import ErrorCode
from ...protocol.record_batch import Record as LogRecord
from ...protocol.record_batch import decode_batches, encode_batch, read_header
from ...purgatory.clock import SystemClock

log = structlog.get_logger("kbroker.transactions")

E = ErrorCode
S = TxnState
TOPIC = "__transaction_state"
# Kafka's transaction.state.log.* defaults: compacted, 100 MiB segments.
TOPIC_CONFIGS = INTERNAL_TOPIC_CONFIGS
_READ_CHUNK = 5 * 1024 * 1024
_RETRY_BACKOFF_S = 0.5
_MATERIALISE_BYTES = 512 * 1024  # one commit of a transaction's offsets at its end: within max.message.bytes
# A request arriving while the previous transaction's markers are being written waits this long for
# them before it is decided (it would otherwise be CONCURRENT_TRANSACTIONS and the client would back
# off for 20-100 ms); past it the request gets CONCURRENT_TRANSACTIONS as in Kafka.
SETTLE_WAIT_S = 0.1
# How long a transit waits for `__transaction_state` being created before it is answered
# NOT_COORDINATOR (retriable); the creation goes on retrying (create_topic).
TOPIC_WAIT_S = 5.0
# Fault injection for tests only: hold the markers back this long after Prepare* is durable, so a test
# can kill the broker between the prepare and the markers.
MARKER_DELAY_ENV = "KBROKER_TEST_TXN_MARKER_DELAY_MS"


@dataclass(slots=True, frozen=True)
class PendingOffset:
    offset: int
    leader_epoch: int
    metadata: str


class TransactionService:
    def __init__(self, broker: Any, config: Any) -> None:
        self.broker = broker
        self.num_partitions = config.transaction_state_log_num_partitions
        self.cleanup_interval_s = config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        self.machine = TxnCoordinator(SystemClock(), broker.producer_states.ids.allocate, TxnConfig(
            max_timeout_ms=config.transaction_max_timeout_ms, num_partitions=self.num_partitions,
            id_expiration_ms=config.transactional_id_expiration_ms))
        # transactional id -> group -> partition -> offset: TxnOffsetCommit's offsets until the end
        self.pending_offsets: dict[str, dict[str, dict[TopicPartition, PendingOffset]]] = {}
        self.marker_delay_s = int(os.environ.get(MARKER_DELAY_ENV, "0") or 0) / 1000
        self._tasks: set[asyncio.Task] = set()
        self._completing: dict[str, asyncio.Event] = {}  # transactional id -> set when its markers are done
        self._running = False
        self.topic_ready = asyncio.Event()  # set once __transaction_state exists

    # --- life cycle ----------------------------------------------------------------------------------

    def adopt_existing_topic(self) -> None:
        """An existing topic's partition count wins over the setting (as in Kafka). A first start has
        none: create_topic() makes it while the broker already serves."""
        info = self.broker.logs.topics().get(TOPIC)
        if info is not None:
            self.num_partitions = self.machine.config.num_partitions = info.num_partitions
            self.topic_ready.set()

    async def create_topic(self) -> None:
        """Create the topic on a first start, its files made in a worker thread while the broker serves;
        a transit to write meanwhile waits for it (_append)."""
        delay = 1.0
        while self.broker.logs.topics().get(TOPIC) is None:
            try:
                await self.broker.logs.create_topic_async(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
                log.info("transaction_state_topic_created", partitions=self.num_partitions)
            except Exception as exc:  # noqa: BLE001 - a full disk, --max-partitions: transits fail meanwhile
                log.error("transaction_state_topic_create_failed", error=repr(exc), retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        self.topic_ready.set()

    def load(self) -> None:
        """Replay every `__transaction_state` partition (synchronously: it is small and compacted)."""
        started = time.monotonic()
        count = 0
        for partition in range(self.num_partitions):
            for txn_id, value in self._read_partition(partition):
                try:
                    self.machine.load(txn_id, value)
                except ValueError as exc:
                    log.warning("transaction_record_unreadable", partition=partition, error=str(exc))
                    continue
                count += 1
        log.info("transactions_loaded", records=count, transactions=len(self.machine.txns),
                 prepared=len(self.machine.in_prepare()), load_ms=round(1000 * (time.monotonic() - started), 1))

    def start(self) -> None:
        self._running = True
        for txn_id in self.machine.in_prepare():
            self._spawn(self._complete(txn_id), f"txn-complete-{txn_id}")
        self._spawn(self._timeout_loop(), "txn-timeouts")

    async def stop(self) -> None:
        self._running = False
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _read_partition(self, partition: int):
        plog = self.broker.logs.loaded_log(TOPIC, partition)  # one with records is never dormant
        if plog is None:
            return
        offset, end = plog.log_start_offset, plog.log_end_offset
        while offset < end:
            chunk = plog.read(offset, _READ_CHUNK, min_one_batch=True).records
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
                        yield decode_key(r.key), decode_value(r.value)
                    except (TxnLogFormatError, UnicodeDecodeError) as exc:
                        log.warning("transaction_record_unreadable", partition=partition, offset=r.offset,
                                    error=str(exc))
            if next_offset <= offset:
                break
            offset = next_offset

    # --- writing transits ----------------------------------------------------------------------------

    async def _append(self, txn_id: str, value: bytes | None) -> None:
        partition = self.machine.partition_for(txn_id)
        if not self.topic_ready.is_set():  # the topic, still being created (create_topic)
            try:
                await asyncio.wait_for(self.topic_ready.wait(), TOPIC_WAIT_S)
            except asyncio.TimeoutError:
                raise RuntimeError(f"{TOPIC} is not created yet") from None  # _write: NOT_COORDINATOR
        plog = self.broker.logs.get_log(TOPIC, partition)
        if plog is None:
            raise RuntimeError(f"{TOPIC}-{partition} does not exist")
        now = self.broker.clock.wall_ms()
        batch = encode_batch([LogRecord(offset=0, timestamp=now, key=encode_key(txn_id), value=value)])
        info = plog.append(batch, leader_epoch=0, now_ms=now)
        await plog.wait_durable(info.last_offset)

    async def _write(self, decision: Decision) -> ErrorCode:
        """Make the transit durable and apply it; a failed write leaves the old metadata (Kafka answers
        the client with a retriable error and keeps the transaction as it was)."""
        assert decision.txn is not None and decision.transit is not None
        try:
            await self._append(decision.txn.transactional_id, encode_value(log_value(decision.transit)))
        except Exception as exc:  # noqa: BLE001 - storage errors become a retriable answer
            self.machine.fail(decision)
            log.error("transaction_state_write_failed", transactional_id=decision.txn.transactional_id,
                      state=decision.transit.state.kafka_name, error=repr(exc))
            return E.NOT_COORDINATOR
        self.machine.complete(decision)
        return E.NONE

    # --- the client APIs -----------------------------------------------------------------------------

    async def init_producer_id(self, txn_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        await self._settle(txn_id)
        d = self.machine.handle_init_producer_id(txn_id, timeout_ms, expected)
        if d.transit is None:
            return d.error, -1, -1
        written = await self._write(d)
        if written != E.NONE:
            return written, -1, -1
        if d.abort_after:  # the Ongoing transaction of a fenced producer: abort it, let the client retry
            self._after_prepare(txn_id, commit=False)
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        txn = d.txn
        assert txn is not None  # a decision without an error names its transaction
        log.info("producer_id_initialised", transactional_id=txn_id, producer_id=txn.producer_id,
                 producer_epoch=txn.producer_epoch)
        return E.NONE, txn.producer_id, txn.producer_epoch

    async def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                             partitions: list[TopicPartition]) -> ErrorCode:
        await self._settle(txn_id)
        d = self.machine.handle_add_partitions_to_transaction(txn_id, producer_id, epoch, partitions)
        if d.transit is None:
            return d.error
        return await self._write(d)

    def verify(self, txn_id: str, producer_id: int, epoch: int,
               partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        return self.machine.handle_verify_partitions_in_transaction(txn_id, producer_id, epoch, partitions)

    def verify_produce(self, txn_id: str, producer_id: int, epoch: int, tp: TopicPartition) -> ErrorCode:
        """KIP-890's server-side defence: a transactional batch is appended only to a partition of the
        producer's ongoing transaction. Produce reports a stale epoch as INVALID_PRODUCER_EPOCH."""
        error = self.verify(txn_id, producer_id, epoch, [tp])[tp]
        if error == E.PRODUCER_FENCED:
            return E.INVALID_PRODUCER_EPOCH
        return error

    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        d = self.machine.handle_end_transaction(txn_id, producer_id, epoch, commit)
        if d.transit is None:
            return d.error
        written = await self._write(d)
        if written == E.NONE:
            self._after_prepare(txn_id, commit)
        return written

    async def txn_offset_commit(self, txn_id: str, producer_id: int, epoch: int, group_id: str,
                                offsets: dict[TopicPartition, PendingOffset], generation_id: int = -1,
                                member_id: str = "", group_instance_id: str | None = None) -> ErrorCode:
        """Hold a transaction's offsets until it ends, durably: a transactional batch in the group's
        `__consumer_offsets` partition, which must be in the transaction (AddOffsetsToTxn)."""
        from .offsets_topic import TOPIC as OFFSETS_TOPIC

        coordinator = getattr(self.broker, "coordinator", None)
        if coordinator is None:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = coordinator.partition_for(group_id)
        tp = (OFFSETS_TOPIC, partition)
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
        plog = self.broker.logs.get_log(OFFSETS_TOPIC, partition)
        if plog is None:
            return E.COORDINATOR_NOT_AVAILABLE
        now = self.broker.clock.wall_ms()
        records = [OffsetCommitRecord(group_id, topic, p, o.offset, o.leader_epoch, o.metadata, now)
                   for (topic, p), o in sorted(offsets.items())]
        batch = encode_batch([LogRecord(offset=i, timestamp=now, key=key, value=value)
                              for i, (key, value) in enumerate(encode_record(r) for r in records)],
                             producer_id=producer_id, producer_epoch=epoch, base_sequence=0, is_transactional=True)
        try:
            info = plog.append(batch, leader_epoch=0, now_ms=now)
            self.broker.producer_states.for_log(plog).update(read_header(batch), info.base_offset,
                                                             info.last_offset, now)
            await plog.wait_durable(info.last_offset)
        except Exception as exc:  # noqa: BLE001 - a storage failure is a retriable answer
            log.error("txn_offset_commit_failed", transactional_id=txn_id, group=group_id, error=repr(exc))
            return E.NOT_COORDINATOR
        self.pending_offsets.setdefault(txn_id, {}).setdefault(group_id, {}).update(offsets)
        return E.NONE

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

    # --- ending transactions -------------------------------------------------------------------------

    def _after_prepare(self, txn_id: str, commit: bool) -> None:
        self._spawn(self._complete(txn_id), f"txn-complete-{txn_id}")

    async def _settle(self, txn_id: str) -> None:
        """Wait (bounded) for a transaction whose markers are being written to complete."""
        done = self._completing.get(txn_id)
        if done is not None and not done.is_set():
            try:
                await asyncio.wait_for(done.wait(), SETTLE_WAIT_S)
            except asyncio.TimeoutError:
                pass

    async def _complete(self, txn_id: str) -> None:
        done = self._completing[txn_id] = asyncio.Event()
        try:
            await self._complete_markers(txn_id)
        finally:
            done.set()
            if self._completing.get(txn_id) is done:
                del self._completing[txn_id]

    async def _complete_markers(self, txn_id: str) -> None:
        """Offsets, markers, then Complete*: retried until it succeeds (markers are idempotent)."""
        if self.marker_delay_s:
            await asyncio.sleep(self.marker_delay_s)
        while True:
            txn = self.machine.txns.get(txn_id)
            if txn is None or txn.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            commit = txn.state == S.PREPARE_COMMIT
            try:
                await self._adopt_replayed_offsets(txn_id, txn.producer_id, txn.partitions)
                await write_markers(self.broker, txn.producer_id, txn.producer_epoch, commit, txn.partitions,
                                    COORDINATOR_EPOCH)
                if commit:
                    await self._materialise_offsets(txn_id)
                self.pending_offsets.pop(txn_id, None)
                partitions = len(txn.partitions)
                d = self.machine.prepare_complete(txn_id)
                if await self._write(d) == E.NONE:
                    log.info("transaction_completed", transactional_id=txn_id, producer_id=txn.producer_id,
                             producer_epoch=txn.producer_epoch, result="commit" if commit else "abort",
                             partitions=partitions)
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep trying: the transaction must end
                log.error("transaction_completion_failed", transactional_id=txn_id, error=repr(exc))
            await asyncio.sleep(_RETRY_BACKOFF_S)

    async def _adopt_replayed_offsets(self, txn_id: str, producer_id: int, partitions) -> None:
        """After a restart: the transaction's offsets come back from the `__consumer_offsets` replay,
        which must have finished for the partitions concerned."""
        from .offsets_topic import TOPIC as OFFSETS_TOPIC

        offsets_topic = getattr(self.broker, "offsets_topic", None)
        coordinator = getattr(self.broker, "coordinator", None)
        mine = [p for t, p in partitions if t == OFFSETS_TOPIC]
        if not mine or offsets_topic is None or coordinator is None:
            return
        while coordinator.is_loading:
            await asyncio.sleep(0.05)
        for partition in mine:
            for r in offsets_topic.open_txn_offsets.get(partition, {}).pop(producer_id, []):
                if isinstance(r, OffsetCommitRecord):
                    self.pending_offsets.setdefault(txn_id, {}).setdefault(r.group, {})[(r.topic, r.partition)] = \
                        PendingOffset(r.offset, r.leader_epoch, r.metadata)

    async def _materialise_offsets(self, txn_id: str) -> None:
        groups = self.pending_offsets.get(txn_id)
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

    # --- timeouts and expiry -------------------------------------------------------------------------

    async def _timeout_loop(self) -> None:
        while self._running:
            await asyncio.sleep(self.cleanup_interval_s)
            try:
                await self.abort_timed_out_transactions()
                await self.expire_transactional_ids()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("transaction_timeout_pass_failed")

    async def abort_timed_out_transactions(self) -> int:
        aborted = 0
        for d in self.machine.abort_timed_out_transactions():
            txn, transit = d.txn, d.transit
            assert txn is not None and transit is not None  # a timed-out abort names both
            txn_id = txn.transactional_id
            if await self._write(d) == E.NONE:
                log.info("transaction_timed_out", transactional_id=txn_id, producer_id=transit.producer_id,
                         bumped_epoch=transit.producer_epoch)
                self._after_prepare(txn_id, commit=False)
                aborted += 1
        return aborted

    async def expire_transactional_ids(self) -> int:
        expired = 0
        for txn_id in self.machine.expired_transactional_ids():
            txn = self.machine.txns[txn_id]
            txn.pending_state = S.DEAD
            try:
                await self._append(txn_id, None)
            except Exception as exc:  # noqa: BLE001
                txn.pending_state = None
                log.error("transactional_id_expiry_failed", transactional_id=txn_id, error=repr(exc))
                continue
            self.machine.remove(txn_id)
            expired += 1
            log.info("transactional_id_expired", transactional_id=txn_id)
        return expired
