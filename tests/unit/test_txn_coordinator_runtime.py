"""The transaction coordinator on the coordinator runtime, in memory with a manual clock: transits
are answered once their record is durable, a failed write keeps the old metadata, a prepared
transaction asks for its markers, the timeout check is a timer on the injected clock (no real time
passes), a transactional id idle past its expiration is tombstoned, and a replay of the written
records rebuilds the same transactions."""

from __future__ import annotations

import asyncio
import itertools

from kbroker.coordinator.txn.coordinator import TxnConfig
from kbroker.coordinator.txn.metadata import TxnState
from kbroker.coordinator.txn.service import TransactionCoordinatorService
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.records.transaction_log import TransactionLogRecord, decode_value, encode_value
from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers

E = ErrorCode
S = TxnState
CHECK_MS = 1_000


class Log:
    """The writer: records kept as their bytes would be; `fail_next` fails the next append; `gate`
    holds appends until set."""

    def __init__(self) -> None:
        self.records: list[TransactionLogRecord] = []
        self.fail_next: ErrorCode | None = None
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, partition: int, records: list[TransactionLogRecord]) -> None:
        await self.gate.wait()
        if self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            raise KafkaError("append failed", code)
        for r in records:  # through the value's bytes, as the log stores it
            value = None if r.value is None else decode_value(encode_value(r.value))
            self.records.append(TransactionLogRecord(r.transactional_id, value))


async def service_with(log: Log, clock: ManualClock, **config: int):
    due: list[tuple[str, bool]] = []
    ids = itertools.count(100)
    service = TransactionCoordinatorService(
        log, clock=clock, timers=KeyedTimers(clock), allocate_producer_id=lambda: next(ids),
        config=TxnConfig(num_partitions=3, **config), check_interval_ms=CHECK_MS,
        on_markers_due=lambda txn_id, commit: due.append((txn_id, commit)))
    service.start()
    service.load_empty(range(3))
    return service, due


async def test_transits_are_answered_once_durable_and_a_prepared_transaction_asks_for_its_markers() -> None:
    clock, log = ManualClock(1_000_000), Log()
    service, due = await service_with(log, clock)
    try:
        log.gate.clear()
        init = asyncio.ensure_future(service.init_producer_id("tx", 60_000, None))
        await service.runtime.quiesce_until(lambda: bool(service.runtime.busy_keys))
        # not answered, not applied: its record is not durable yet; meanwhile the id is busy
        assert not init.done() and service.transaction("tx").pending_transition
        assert (await service.init_producer_id("tx", 60_000, None)).error is E.CONCURRENT_TRANSACTIONS
        log.gate.set()
        result = await init
        assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 100, 0)
        assert (await service.add_partitions("tx", 100, 0, [("t", 0)])).error is E.NONE
        assert service.verify("tx", 100, 0, [("t", 0), ("t", 1)]) == {("t", 0): E.NONE, ("t", 1): E.TRANSACTION_ABORTABLE}
        assert (await service.end_txn("tx", 100, 0, True)).error is E.NONE
        assert service.transaction("tx").state is S.PREPARE_COMMIT and due == [("tx", True)]
        assert (await service.end_txn("tx", 100, 0, True)).error is E.CONCURRENT_TRANSACTIONS  # markers pending
        assert (await service.complete("tx")).error is E.NONE
        assert service.transaction("tx").state is S.COMPLETE_COMMIT
        assert [r.value.status for r in log.records] == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    finally:
        await service.stop()


async def test_a_failed_write_keeps_the_old_metadata_and_answers_a_retriable_error() -> None:
    clock, log = ManualClock(1_000_000), Log()
    service, _ = await service_with(log, clock)
    try:
        await service.init_producer_id("tx", 60_000, None)
        log.fail_next = E.NOT_LEADER_OR_FOLLOWER
        assert (await service.add_partitions("tx", 100, 0, [("t", 0)])).error is E.NOT_COORDINATOR
        txn = service.transaction("tx")
        assert txn.state is S.EMPTY and not txn.pending_transition and txn.partitions == set()
        assert (await service.add_partitions("tx", 100, 0, [("t", 0)])).error is E.NONE
    finally:
        await service.stop()


async def test_the_timeout_check_is_a_timer_on_the_injected_clock() -> None:
    clock, log = ManualClock(1_000_000), Log()
    service, due = await service_with(log, clock)
    try:
        await service.init_producer_id("tx", 5_000, None)
        await service.add_partitions("tx", 100, 0, [("t", 0)])
        clock.advance(CHECK_MS)
        await service.runtime.advance_timers()
        assert service.transaction("tx").state is S.ONGOING  # within its timeout: left alone
        clock.advance(5_000)
        await service.runtime.advance_timers()
        await service.runtime.quiesce()
        txn = service.transaction("tx")
        # fenced (epoch bumped) and prepared to abort; its markers are asked for
        assert (txn.state, txn.producer_epoch) == (S.PREPARE_ABORT, 1) and due == [("tx", False)]
        assert (await service.end_txn("tx", 100, 0, True)).error is E.PRODUCER_FENCED
    finally:
        await service.stop()


async def test_an_idle_transactional_id_expires_with_a_tombstone() -> None:
    clock, log = ManualClock(1_000_000), Log()
    service, _ = await service_with(log, clock, id_expiration_ms=10_000)
    try:
        await service.init_producer_id("idle", 60_000, None)
        clock.advance(10_000)
        await service.runtime.advance_timers()
        await service.runtime.quiesce()
        assert service.transaction("idle") is None
        assert log.records[-1] == TransactionLogRecord("idle", None)
    finally:
        await service.stop()


async def test_a_replay_rebuilds_the_transactions_and_prepared_ones_ask_for_their_markers() -> None:
    clock, log = ManualClock(1_000_000), Log()
    service, _ = await service_with(log, clock)
    try:
        for txn_id in ("a", "b"):
            await service.init_producer_id(txn_id, 60_000, None)
        pid_b = service.transaction("b").producer_id
        await service.add_partitions("b", pid_b, 0, [("t", 1)])
        await service.end_txn("b", pid_b, 0, False)
    finally:
        await service.stop()
    again, due = await service_with(Log(), clock)
    try:
        for partition in range(3):
            await again.load(partition, [r for r in log.records if again.partition_for(r.transactional_id) == partition])
        assert again.transaction("a").state is S.EMPTY
        assert (again.transaction("b").state, again.transaction("b").partitions) == (S.PREPARE_ABORT, {("t", 1)})
        assert due == [("b", False)]
    finally:
        await again.stop()


async def test_the_log_value_version_follows_the_finalized_transaction_version() -> None:
    """TransactionLogValue v1 from transaction.version 1 (Kafka 4.x), v0 below (`--kafka-version 3.x`);
    a v2 end's bumped epoch and client version come back from a replay of v1 records."""
    clock = ManualClock(1_000_000)
    for level, version in ((0, 0), (2, 1)):
        log = Log()
        service, _ = await service_with(log, clock, transaction_version=level)
        try:
            pid = (await service.init_producer_id("v", 60_000, None)).producer_id
            await service.add_partitions("v", pid, 0, [("t", 0)], client_tv=level)
            result = await service.end_txn("v", pid, 0, True, v2=level >= 2)
            assert (result.error, result.producer_epoch) == (E.NONE, 1 if level >= 2 else 0)  # the epoch to go on with
        finally:
            await service.stop()
        assert {r.value.version for r in log.records} == {version}
        again, _ = await service_with(Log(), clock, transaction_version=level)
        try:
            await again.load(again.partition_for("v"), log.records)
            txn = again.transaction("v")
            assert (txn.state, txn.producer_epoch, txn.client_tv) == (S.PREPARE_COMMIT, 1 if level else 0, level)
        finally:
            await again.stop()
