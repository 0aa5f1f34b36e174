"""The transaction coordinator's front: transactional ids -> `__transaction_state` partitions, each a
TransactionShard (shard.py) on the coordinator runtime (runtime/runtime.py), as the group
coordinator's partitions are.

    TransactionCoordinatorService  (this module)        routing, prechecks, the timeout check
      -> CoordinatorRuntime        (runtime/runtime.py)  loaded partitions, life cycle
        -> PartitionRuntime        (runtime/partition.py) write-then-respond, timers
          -> TransactionShard      (shard.py)           decisions, transits, follow-ups

Time is the injected clock and the broker's keyed timers: the timeout check
(transaction.abort.timed.out.transaction.cleanup.interval.ms) is a timer that fans out one command
per transaction found past its timeout, and per transactional id idle past its expiration, each
decided again in its own turn. Writing markers is the broker's (broker/coordinators/transactions.py):
`on_markers_due(transactional_id, commit)` tells it a transaction is prepared; it then sends
CompleteTxn.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.records.transaction_log import TransactionLogRecord
from ...purgatory.clock import Clock
from ...purgatory.timers import KeyedTimers, TimerFired
from ..partitioning import partition_for
from ..runtime.execute import AppendRecords
from ..runtime.partition import UNORDERED
from ..runtime.runtime import CoordinatorRuntime
from .commands import (
    AbortTimedOut,
    AddPartitions,
    CompleteTxn,
    EndTxn,
    ExpireTransactionalId,
    InitProducerId,
    MarkersDue,
    TxnResult,
)
from .coordinator import TxnConfig, TxnCoordinator
from .metadata import TopicPartition, TransactionMetadata
from .shard import TransactionShard

E = ErrorCode
log = structlog.get_logger("kbroker.transactions")

TIMEOUT_CHECK_KEY = "txn-timeout-check"


class TransactionCoordinatorService:
    def __init__(
        self,
        append_records: AppendRecords,
        *,
        clock: Clock,
        timers: KeyedTimers | None,
        allocate_producer_id: Callable[[], int],
        config: TxnConfig,
        check_interval_ms: int,
        on_markers_due: Callable[[str, bool], None],
    ) -> None:
        self.config = config
        self.check_interval_ms = check_interval_ms
        self._allocate = allocate_producer_id
        self._on_markers_due = on_markers_due
        self.runtime = CoordinatorRuntime(
            self._new_shard, append=append_records, partition_of=self.partition_for,
            refusal=lambda cmd, code: TxnResult(code), on_event=self._on_event, clock=clock, timers=timers,
            name="transactions",
        )
        self.clock = self.runtime.clock
        self.timers = self.runtime.timers

    @property
    def num_partitions(self) -> int:
        return self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def _new_shard(self, partition: int) -> TransactionShard:
        return TransactionShard(partition, TxnCoordinator(self.clock, self._allocate, self.config))

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.runtime.start_now()
        self._schedule_check()

    async def stop(self) -> None:
        self.timers.cancel(TIMEOUT_CHECK_KEY)
        await self.runtime.stop()

    def mark_loading(self, partitions: Iterable[int]) -> None:
        self.runtime.mark_loading(partitions)

    async def load(self, partition: int, records: Iterable[TransactionLogRecord]) -> None:
        """Replay a partition's records (in log order, tombstones included) into a new shard."""
        await self.runtime.load(partition, records)

    def load_empty(self, partitions: Iterable[int]) -> None:
        self.runtime.load_empty(partitions)

    async def unload(self, partition: int) -> None:
        """Resign a partition (its leader moved away): its transactional ids answer NOT_COORDINATOR."""
        await self.runtime.unload(partition)

    @property
    def is_loading(self) -> bool:
        return self.runtime.is_loading

    # -- requests ------------------------------------------------------------------------------

    def submit(self, cmd: Any) -> asyncio.Future[Any]:
        """Hand a command to its partition's shard now; the future of its TxnResult."""
        future = self.runtime.new_future()
        partition = self.partition_for(cmd.transactional_id)
        error = self.runtime.precheck(partition)
        if error is not None:
            future.set_result(TxnResult(error))
        else:
            self.runtime.dispatch(cmd, UNORDERED, future, partition)
        return future

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> TxnResult:
        return await self.submit(InitProducerId(transactional_id, timeout_ms, expected))

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition], client_tv: int = 0) -> TxnResult:
        return await self.submit(AddPartitions(transactional_id, producer_id, epoch, tuple(partitions), client_tv))

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                      v2: bool = False) -> TxnResult:
        return await self.submit(EndTxn(transactional_id, producer_id, epoch, commit, v2))

    async def complete(self, transactional_id: str) -> TxnResult:
        """The markers of a prepared transaction are durable: write CompleteCommit/CompleteAbort."""
        return await self.submit(CompleteTxn(transactional_id))

    def verify(self, transactional_id: str, producer_id: int, epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with verifyOnly (KIP-890), and Produce's check: read between two
        commands (everything runs on one loop)."""
        wanted = list(partitions)
        partition = self.partition_for(transactional_id)
        error = self.runtime.precheck(partition)
        if error is not None:
            return {tp: error for tp in wanted}
        shard: TransactionShard = self.runtime.shard(partition)
        return shard.machine.handle_verify_partitions_in_transaction(transactional_id, producer_id, epoch, wanted)

    # -- seeing into it ------------------------------------------------------------------------

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        shard = self.runtime.shard(self.partition_for(transactional_id))
        return shard.machine.txns.get(transactional_id) if shard is not None else None

    def transactions(self) -> Iterator[TransactionMetadata]:
        """Every transactional id of the loaded partitions."""
        for shard in self.runtime.shards():
            yield from shard.machine.txns.values()

    # -- the timeout check ---------------------------------------------------------------------

    def _schedule_check(self) -> None:
        self.timers.schedule(TIMEOUT_CHECK_KEY, self.check_interval_ms, self._on_check)

    def _on_check(self, fired: TimerFired) -> None:
        if not self.timers.claim(fired.key, fired.token) or not self.runtime.running:
            return
        self.run_checks()
        self._schedule_check()

    def run_checks(self) -> int:
        """Kafka's abortTimedOutTransactions and transactional-id expiration: one command per
        transaction past its timeout and per idle transactional id, each decided again in its turn.
        Returns how many were found."""
        found = 0
        for shard in self.runtime.shards():
            machine = shard.machine
            for txn_id in machine.timed_out_transactions():
                self.runtime.dispatch_internal(shard.partition, AbortTimedOut(txn_id), UNORDERED)
                found += 1
            for txn_id in machine.expired_transactional_ids():
                self.runtime.dispatch_internal(shard.partition, ExpireTransactionalId(txn_id), UNORDERED)
                found += 1
        return found

    # -- events --------------------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        if isinstance(event, MarkersDue):
            self._on_markers_due(event.transactional_id, event.commit)
            return
        fields = {k: v.name if isinstance(v, ErrorCode) else v for k, v in dataclasses.asdict(event).items()}
        getattr(log, getattr(event, "log_level", "info"))(event.log_event, **fields)
