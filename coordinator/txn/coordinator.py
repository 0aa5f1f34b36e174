"""The transaction coordinator's decisions (Kafka's TransactionCoordinator), as plain functions of the
transactions' metadata, the request and an injected clock.

Each `handle_*` method answers with a `Decision`: an error to reply with, or a transit whose record
must become durable in `__transaction_state` before it is applied (`complete`) and the reply sent.
The service (broker/coordinators/transactions.py) does the writing, the commit/abort markers and the timers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..partitioning import partition_for
from ...purgatory.clock import Clock
from ...protocol.records.transaction_log import TxnLogValue
from .metadata import (
    INT16_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    TxnTransit,
)
from ...protocol.errors import ErrorCode

E = ErrorCode
S = TxnState
_STATUSES = frozenset(TxnState)  # the statuses a record may carry
COORDINATOR_EPOCH = 0  # one node, never re-elected: the coordinator epoch every marker carries


@dataclass(slots=True)
class Decision:
    error: ErrorCode = E.NONE
    transit: TxnTransit | None = None
    txn: TransactionMetadata | None = None
    # InitProducerId on an Ongoing transaction: abort it (epoch fenced) and answer CONCURRENT_TRANSACTIONS.
    abort_after: bool = False

    @classmethod
    def fail(cls, error: ErrorCode) -> Decision:
        return cls(error)


@dataclass(slots=True)
class TxnConfig:
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    num_partitions: int = 50  # transaction.state.log.num.partitions
    id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    # The finalized transaction.version (the release's, capped to what kbroker builds): the level the
    # coordinator's own aborts (a fenced producer's, a timed-out transaction's) are decided at, and
    # whether `__transaction_state` records are written as TransactionLogValue v1 (level 1 and up).
    transaction_version: int = 2


@dataclass(slots=True)
class TxnCoordinator:
    clock: Clock  # wall_ms() stamps the records
    allocate_producer_id: Callable[[], int]
    config: TxnConfig = field(default_factory=TxnConfig)
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def _now(self) -> int:
        return self.clock.wall_ms()

    # --- InitProducerId ---------------------------------------------------------------------------

    def handle_init_producer_id(self, transactional_id: str, timeout_ms: int,
                                expected: tuple[int, int] | None) -> Decision:
        """`expected` is the (producer id, epoch) a KIP-360 client sends to bump its epoch after an error."""
        if not transactional_id:
            return Decision.fail(E.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Decision.fail(E.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(transactional_id)
        if txn is None:
            txn = self.txns[transactional_id] = TransactionMetadata(
                transactional_id, self.allocate_producer_id(), timeout_ms=timeout_ms, last_update_ms=self._now())
        if txn.pending_transition:
            return Decision.fail(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._valid_expected(txn, expected):
            return Decision.fail(E.PRODUCER_FENCED)
        now = self._now()
        if txn.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return Decision.fail(E.CONCURRENT_TRANSACTIONS)
        if txn.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if txn.state_lost or (txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch)):
                transit = txn.prepare_producer_id_rotation(self.allocate_producer_id(), timeout_ms, now,
                                                           expected is not None)
            else:
                bumped = txn.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
                if bumped is None:
                    return Decision.fail(E.PRODUCER_FENCED)
                transit = bumped
            return Decision(transit=transit, txn=txn)
        if txn.state == S.ONGOING:
            # Fence the current producer and abort its transaction; the client retries on
            # CONCURRENT_TRANSACTIONS and then gets the epoch bumped once more.
            return Decision(E.CONCURRENT_TRANSACTIONS, self._fence_and_prepare_abort(txn, now), txn, abort_after=True)
        return Decision.fail(E.UNKNOWN_SERVER_ERROR)  # Dead / PrepareEpochFence are never current states

    @staticmethod
    def _valid_expected(txn: TransactionMetadata, expected: tuple[int, int]) -> bool:
        pid, epoch = expected
        return (txn.producer_epoch == NO_PRODUCER_EPOCH or pid == txn.producer_id
                or (pid == txn.last_producer_id and epoch >= 32766))

    def _fence_and_prepare_abort(self, txn: TransactionMetadata, now: int) -> TxnTransit:
        """Kafka's prepareFenceProducerEpoch followed by the coordinator's own EndTxn(abort) at the
        server's transaction version: the fence itself is never written, only the PrepareAbort that
        carries its epoch (one above the producer's either way: v1 sets the fenced epoch, v2's abort
        bumps it, and an exhausted epoch rotates the producer id when the abort completes)."""
        if self.config.transaction_version >= 2:
            txn.prepare_fence_producer_epoch(now)  # checks the transition; v2 does not apply its epoch
            txn.pending_state = None
            return txn.prepare_abort_or_commit(S.PREPARE_ABORT, now, client_tv=self.config.transaction_version,
                                               next_producer_id=self._next_producer_id(txn))
        fence = txn.prepare_fence_producer_epoch(now)
        txn.pending_state = None
        txn.producer_epoch = fence.producer_epoch
        txn.last_producer_epoch = NO_PRODUCER_EPOCH
        txn.has_failed_epoch_fence = True  # until the PrepareAbort is durable: a retry must not bump again
        return txn.prepare_abort_or_commit(S.PREPARE_ABORT, now, client_tv=self.config.transaction_version)

    def _next_producer_id(self, txn: TransactionMetadata) -> int:
        """v2 bumps the epoch at every end: an exhausted one moves to a new producer id."""
        return self.allocate_producer_id() if txn.epoch_exhausted else NO_PRODUCER_ID

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return E.INVALID_REQUEST, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != epoch:
            return E.PRODUCER_FENCED, None
        return E.NONE, txn

    def _not_in_transition(self, transactional_id: str) -> tuple[TransactionMetadata | None, Decision]:
        """The transaction, or why not: an empty id, an unknown one, or one whose transition is pending
        (answered first, as in Kafka: with v2 it may be moving to a new producer id)."""
        if not transactional_id:
            return None, Decision.fail(E.INVALID_REQUEST)
        txn = self.txns.get(transactional_id)
        if txn is None:
            return None, Decision.fail(E.INVALID_PRODUCER_ID_MAPPING)
        if txn.pending_transition:
            return None, Decision.fail(E.CONCURRENT_TRANSACTIONS)
        return txn, Decision()

    def handle_add_partitions_to_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                                             partitions: Iterable[TopicPartition], client_tv: int = 0) -> Decision:
        """`client_tv` 2 when the partitions come from a v2 client (added by Produce v12+ or
        TxnOffsetCommit v5+ on its behalf, or AddPartitionsToTxn v4+), 0 from AddPartitionsToTxn v0-v3.
        A pending transition is answered first (`_not_in_transition`)."""
        txn, refused = self._not_in_transition(transactional_id)
        if txn is None:
            return refused
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return Decision.fail(error)
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return Decision.fail(E.CONCURRENT_TRANSACTIONS)
        wanted = set(partitions)
        if txn.state == S.ONGOING and wanted <= txn.partitions:
            return Decision(txn=txn)  # nothing new: answer at once
        return Decision(transit=txn.prepare_add_partitions(wanted, self._now(), client_tv), txn=txn)

    def handle_verify_partitions_in_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                                                partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with verifyOnly (KIP-890): is each partition in the ongoing transaction?
        One that is not is TRANSACTION_ABORTABLE, as Kafka's coordinator answers; the APIs tell clients
        too old for it INVALID_TXN_STATE (Produce up to v10, TxnOffsetCommit up to v3)."""
        wanted = list(partitions)
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return {tp: error for tp in wanted}
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return {tp: E.CONCURRENT_TRANSACTIONS for tp in wanted}
        if txn.state != S.ONGOING:  # Kafka's partitions of a transaction not ongoing are none
            return {tp: E.TRANSACTION_ABORTABLE for tp in wanted}
        return {tp: E.NONE if tp in txn.partitions else E.TRANSACTION_ABORTABLE for tp in wanted}

    # --- EndTxn ------------------------------------------------------------------------------------

    def handle_end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                               v2: bool = False) -> Decision:
        """EndTxn; `v2` for EndTxn v5 (transactions v2), Kafka's endTransaction, else its
        endTransactionWithTV1. A decision without a transit and without an error is an end already
        done (a retry): answered with the transaction's current producer id and epoch."""
        if v2:
            return self._end_transaction_v2(transactional_id, producer_id, epoch, commit)
        if not transactional_id:
            return Decision.fail(E.INVALID_REQUEST)
        txn = self.txns.get(transactional_id)
        if txn is None:
            return Decision.fail(E.INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_id != producer_id:
            return Decision.fail(E.INVALID_PRODUCER_ID_MAPPING)
        if epoch != txn.producer_epoch:  # clients never bump the epoch themselves: strict equality
            return Decision.fail(E.PRODUCER_FENCED)
        if txn.pending_transition:
            return Decision.fail(E.CONCURRENT_TRANSACTIONS)
        state = txn.state
        if state == S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            return Decision(transit=txn.prepare_abort_or_commit(target, self._now()), txn=txn)
        if state == S.COMPLETE_COMMIT:
            return Decision(txn=txn) if commit else Decision.fail(E.INVALID_TXN_STATE)
        if state == S.COMPLETE_ABORT:
            return Decision(txn=txn) if not commit else Decision.fail(E.INVALID_TXN_STATE)
        if state == S.PREPARE_COMMIT:
            return Decision.fail(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state == S.PREPARE_ABORT:
            return Decision.fail(E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE)
        return Decision.fail(E.INVALID_TXN_STATE)  # Empty: nothing to end

    def _end_transaction_v2(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> Decision:
        """Kafka's endTransaction with transactions v2: every end bumps the epoch, so the same epoch
        in Complete* is the next transaction's end (an abort of nothing is allowed), and epoch + 1 is
        a retry of the end just done (answered NONE for the same result)."""
        txn, refused = self._not_in_transition(transactional_id)
        if txn is None:
            return refused
        retry_on_overflow = (txn.last_producer_id == producer_id and epoch == INT16_MAX - 1
                             and txn.producer_epoch == 0)
        retry_on_bump = txn.producer_epoch == epoch + 1
        if txn.producer_id != producer_id and not retry_on_overflow:
            return Decision.fail(E.INVALID_PRODUCER_ID_MAPPING)
        state = txn.state
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = retry_on_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or epoch == txn.producer_epoch
        else:
            valid = epoch == txn.producer_epoch
        if not valid:
            return Decision.fail(E.PRODUCER_FENCED)
        is_retry = retry_on_bump or retry_on_overflow
        now = self._now()

        def end(target: TxnState, nothing_added: bool) -> Decision:
            transit = txn.prepare_abort_or_commit(target, now, client_tv=2,
                                                  next_producer_id=self._next_producer_id(txn),
                                                  no_partition_added=nothing_added)
            return Decision(transit=transit, txn=txn)

        if state == S.ONGOING:
            return end(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
        if state == S.COMPLETE_COMMIT:
            if commit:
                return Decision(txn=txn) if is_retry else Decision.fail(E.INVALID_TXN_STATE)
            return Decision.fail(E.INVALID_TXN_STATE) if is_retry else end(S.PREPARE_ABORT, True)
        if state == S.COMPLETE_ABORT:
            if commit:
                return Decision.fail(E.INVALID_TXN_STATE)
            return Decision(txn=txn) if is_retry else end(S.PREPARE_ABORT, True)
        if state == S.PREPARE_COMMIT:
            return Decision.fail(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state == S.PREPARE_ABORT:
            return Decision.fail(E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE)
        if state == S.EMPTY and not commit:
            return end(S.PREPARE_ABORT, True)
        return Decision.fail(E.INVALID_TXN_STATE)

    @staticmethod
    def ended_as(transit: TxnTransit) -> tuple[int, int]:
        """The producer id and epoch EndTxn v5 answers for a prepared end: those the transaction will
        have once complete (Kafka answers with its prepareComplete), so a rotated id at epoch 0."""
        if transit.client_tv >= 2 and transit.next_producer_id != NO_PRODUCER_ID:
            return transit.next_producer_id, 0
        return transit.producer_id, transit.producer_epoch

    def prepare_complete(self, transactional_id: str) -> Decision:
        """After the markers are durable: PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort."""
        txn = self.txns[transactional_id]
        return Decision(transit=txn.prepare_complete(self._now()), txn=txn)

    def complete(self, decision: Decision) -> None:
        assert decision.txn is not None and decision.transit is not None
        decision.txn.complete_transition(decision.transit)

    def fail(self, decision: Decision) -> None:
        if decision.txn is not None:
            decision.txn.abort_transition()

    # --- timeouts ------------------------------------------------------------------------------------

    def timed_out_transactions(self) -> list[str]:
        now = self._now()
        return [t.transactional_id for t in self.txns.values()
                if t.state == S.ONGOING and not t.pending_transition and t.start_ms + t.timeout_ms < now]

    def abort_timed_out_transactions(self) -> list[Decision]:
        """Kafka's abortTimedOutTransactions: each expired Ongoing transaction is fenced (epoch bumped)
        and moved to PrepareAbort; the service writes each transit, then the abort markers."""
        out = []
        for txn_id in self.timed_out_transactions():
            decision = self.handle_timeout(txn_id)
            if decision is not None:
                out.append(decision)
        return out

    def handle_timeout(self, transactional_id: str) -> Decision | None:
        """Fence and prepare to abort one transaction if it is (still) past its timeout, else None."""
        txn = self.txns.get(transactional_id)
        now = self._now()
        if (txn is None or txn.state != S.ONGOING or txn.pending_transition
                or txn.start_ms + txn.timeout_ms >= now):
            return None
        try:
            return Decision(transit=self._fence_and_prepare_abort(txn, now), txn=txn)
        except IllegalTransition:
            return None

    def handle_expire(self, transactional_id: str) -> TransactionMetadata | None:
        """Mark one idle transactional id as going (its tombstone to be written), if it (still) is."""
        txn = self.txns.get(transactional_id)
        if (txn is None or txn.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) or txn.pending_transition
                or txn.last_update_ms + self.config.id_expiration_ms > self._now()):
            return None
        txn.pending_state = S.DEAD
        return txn

    def expired_transactional_ids(self) -> list[str]:
        """Completed or empty transactional ids idle for transactional.id.expiration.ms."""
        now = self._now()
        return [t.transactional_id for t in self.txns.values()
                if t.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and not t.pending_transition
                and t.last_update_ms + self.config.id_expiration_ms <= now]

    def remove(self, transactional_id: str) -> None:
        self.txns.pop(transactional_id, None)

    # --- replay --------------------------------------------------------------------------------------

    def load(self, transactional_id: str, value: TxnLogValue | None) -> None:
        """Apply one `__transaction_state` record (in log order; None is a tombstone)."""
        if value is None or value.status == S.DEAD:
            self.txns.pop(transactional_id, None)
            return
        if value.status not in _STATUSES or value.status == S.PREPARE_EPOCH_FENCE:
            # never written by a coordinator; keep what we had rather than invent a state
            raise ValueError(f"transaction {transactional_id!r} has unknown or transient status {value.status}")
        partitions = {(t, p) for t, ps in (value.partitions or {}).items() for p in ps}
        self.txns[transactional_id] = TransactionMetadata(
            transactional_id, value.producer_id, last_producer_id=value.previous_producer_id,
            producer_epoch=value.producer_epoch, timeout_ms=value.timeout_ms, state=TxnState(value.status),
            partitions=partitions, start_ms=value.start_ms, last_update_ms=value.last_update_ms,
            client_tv=value.client_transaction_version, next_producer_id=value.next_producer_id,
        )

    def in_prepare(self) -> list[str]:
        return [t.transactional_id for t in self.txns.values() if t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]


def log_value(transit: TxnTransit, version: int = 0) -> TxnLogValue:
    """TransactionLogValue for a transit; an Empty transaction writes a null partition list, as Kafka
    does. `version` 1 (transaction.version 1 and up) carries the v2 fields a replay needs."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in transit.partitions:
        by_topic.setdefault(topic, []).append(partition)
    return TxnLogValue(
        producer_id=transit.producer_id, producer_epoch=transit.producer_epoch, timeout_ms=transit.timeout_ms,
        status=int(transit.state), partitions=None if transit.state == S.EMPTY else by_topic,
        last_update_ms=transit.last_update_ms, start_ms=transit.start_ms,
        previous_producer_id=transit.last_producer_id, next_producer_id=transit.next_producer_id,
        client_transaction_version=transit.client_tv, version=version,
    )
