"""Transaction metadata and Kafka's transition table (TransactionMetadata / TransactionState).

Transactions v2 (KIP-890 part 2, `transaction.version` 2): a transaction started by a client that
speaks it (Produce v12+, TxnOffsetCommit v5+, EndTxn v5, the broker's AddPartitionsToTxn v4+) records
`client_tv` 2, and its end bumps the producer epoch (`prepare_abort_or_commit`): the markers carry the
new epoch, which fences every write of the old one; an exhausted epoch rotates to `next_producer_id`
when the transaction completes. A v1 client's transactions keep the epoch (`client_tv` 0).

A change of state is two steps, as in Kafka: `prepare_transition` computes the next metadata (a
`TxnTransit`) and marks the transaction as having a pending transition; once the transit's record is
durable in `__transaction_state`, `complete_transition` applies it. While a transition is pending,
every request for the transactional id answers CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# The highest transaction.version whose behaviour is built: 2, transactions v2 (KIP-890 part 2). Here, in
# the light module, because ApiVersions advertises it and must not import the coordinator (built on first use).
TRANSACTION_VERSION_BUILT = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 32767

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with its ids (the status byte of TransactionLogValue)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
# Kafka's TransactionState.validPreviousStates.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # v2 also aborts a transaction with no partition (from Empty or a completed one)
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata a transaction will have once its record is durable (Kafka's TxnTransitMetadata)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    client_tv: int = 0  # the transaction version of the client that started or ended it
    next_producer_id: int = NO_PRODUCER_ID  # v2: the producer id an exhausted epoch rotates to


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False
    client_tv: int = 0  # Kafka's clientTransactionVersion: 2 when the client runs transactions v2
    next_producer_id: int = NO_PRODUCER_ID
    # The transaction log lost this id's newer records (its partitions show its producer at a newer
    # epoch than the log): its next InitProducerId gets a new producer id, as on epoch exhaustion, so
    # its producer does not reuse epochs its partitions have seen (broker/coordinators/txn_recovery.py).
    state_lost: bool = False

    @property
    def pending_transition(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= INT16_MAX - 1

    def transit(self, state: TxnState, *, producer_id: int | None = None, epoch: int | None = None,
                last_epoch: int | None = None, timeout_ms: int | None = None,
                partitions: frozenset[TopicPartition] | None = None, start_ms: int | None = None,
                now_ms: int, last_producer_id: int | None = None, client_tv: int | None = None,
                next_producer_id: int = NO_PRODUCER_ID) -> TxnTransit:
        """Kafka's prepareTransitionTo: check the transition, mark it pending, return the transit."""
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: transition to {state.kafka_name} while "
                                    f"{self.pending_state.kafka_name} is pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        transit = TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.last_producer_id if last_producer_id is None else last_producer_id,
            producer_epoch=self.producer_epoch if epoch is None else epoch,
            last_producer_epoch=self.last_producer_epoch if last_epoch is None else last_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            last_update_ms=now_ms,
            client_tv=self.client_tv if client_tv is None else client_tv,
            next_producer_id=next_producer_id,
        )
        self.pending_state = state
        return transit

    def complete_transition(self, transit: TxnTransit) -> None:
        """Kafka's completeTransitionTo: apply a transit whose record is durable."""
        if self.pending_state != transit.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {transit.state.kafka_name} "
                                    f"but pending is {self.pending_state}")
        if transit.producer_id != self.producer_id:
            self.state_lost = False  # a new producer id: nothing its partitions have seen
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.client_tv = transit.client_tv
        self.next_producer_id = transit.next_producer_id
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def abort_transition(self) -> None:
        """The transit's record could not be written: keep the old metadata (Kafka's pendingState = None)."""
        if self.pending_state == TxnState.PREPARE_EPOCH_FENCE:
            self.has_failed_epoch_fence = True
        self.pending_state = None

    # --- Kafka's prepare* helpers ------------------------------------------------------------------

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit | None:
        """To Empty with the epoch bumped; None means PRODUCER_FENCED (an expected epoch that is stale)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:
            epochs = (self.producer_epoch, self.last_producer_epoch)  # a retry of a bump whose answer was lost
        else:
            return None
        return self.transit(TxnState.EMPTY, epoch=epochs[0], last_epoch=epochs[1], timeout_ms=timeout_ms,
                            partitions=frozenset(), start_ms=-1, now_ms=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        return self.transit(TxnState.EMPTY, producer_id=new_producer_id, last_producer_id=self.producer_id,
                            epoch=0, last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, now_ms=now_ms)

    def prepare_fence_producer_epoch(self, now_ms: int) -> TxnTransit:
        """Ongoing -> PrepareEpochFence with the epoch bumped once (not again after a failed fence)."""
        if self.producer_epoch == INT16_MAX:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {self.producer_epoch}")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self.transit(TxnState.PREPARE_EPOCH_FENCE, epoch=bumped, last_epoch=NO_PRODUCER_EPOCH,
                            now_ms=now_ms)

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int, client_tv: int = 0) -> TxnTransit:
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self.transit(TxnState.ONGOING, partitions=frozenset(self.partitions | added),
                            start_ms=now_ms if starting else self.start_ms, now_ms=now_ms, client_tv=client_tv)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int, client_tv: int = 0,
                                next_producer_id: int = NO_PRODUCER_ID, no_partition_added: bool = False) -> TxnTransit:
        """Kafka's prepareAbortOrCommit: with transactions v2 the epoch is bumped (the markers carry
        the new one), except an abort at the very last epoch, which lets a broken producer recover."""
        if client_tv < 2:
            return self.transit(state, now_ms=now_ms, client_tv=client_tv)
        bumped = self.producer_epoch
        if not (self.producer_epoch == INT16_MAX and state == TxnState.PREPARE_ABORT):
            bumped = self.producer_epoch + 1
        return self.transit(state, epoch=bumped, last_epoch=self.producer_epoch, now_ms=now_ms, client_tv=client_tv,
                            start_ms=now_ms if no_partition_added else self.start_ms,
                            next_producer_id=next_producer_id)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Kafka's prepareComplete: a v2 transaction whose epoch was exhausted moves to its next
        producer id at epoch 0 (the last epoch stays the one the client last saw)."""
        state = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        if self.client_tv >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            return self.transit(state, producer_id=self.next_producer_id, last_producer_id=self.producer_id, epoch=0,
                                partitions=frozenset(), now_ms=now_ms)
        return self.transit(state, partitions=frozenset(), now_ms=now_ms)
