"""What goes into the transaction shard and what comes out: requests, the coordinator's own work
(completing a transaction once its markers are written, aborting one that timed out, expiring an
idle transactional id), answers, follow-ups and events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...protocol.errors import ErrorCode
from .coordinator import Decision
from .metadata import TopicPartition

# -- requests (answered) --------------------------------------------------------------------------


@dataclass(slots=True)
class InitProducerId:
    transactional_id: str
    timeout_ms: int
    expected: tuple[int, int] | None  # the (producer id, epoch) a KIP-360 client sends to bump its epoch
    reply_to: Any = None


@dataclass(slots=True)
class AddPartitions:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    client_tv: int = 0  # 2: added on behalf of a transactions v2 client (Produce v12+, TxnOffsetCommit v5+)
    reply_to: Any = None


@dataclass(slots=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    v2: bool = False  # EndTxn v5: transactions v2, the epoch bumped
    reply_to: Any = None


@dataclass(slots=True)
class CompleteTxn:
    """The transaction's markers are durable: write CompleteCommit/CompleteAbort (answered once it is)."""

    transactional_id: str
    reply_to: Any = None


# -- the coordinator's periodic work (no answer) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class AbortTimedOut:
    """Kafka's abortTimedOutTransactions, for one transaction found past its timeout."""

    transactional_id: str


@dataclass(frozen=True, slots=True)
class ExpireTransactionalId:
    """A completed or empty transactional id idle for transactional.id.expiration.ms: tombstone it."""

    transactional_id: str


@dataclass(frozen=True, slots=True)
class TxnResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1

    def failed(self, code: ErrorCode) -> TxnResult:
        return TxnResult(code)


# -- follow-ups -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransitWritten:
    """A transit's record is done being written: apply it (or keep the old metadata), then go on."""

    decision: Decision
    what: str  # "init", "add", "prepare", "complete", "timeout"


@dataclass(frozen=True, slots=True)
class IdTombstoned:
    transactional_id: str


# -- events (logged by the service; MarkersDue also starts the markers) ---------------------------


@dataclass(frozen=True, slots=True)
class MarkersDue:
    """A transaction is prepared (PrepareCommit/PrepareAbort durable): its markers are to be written,
    then CompleteTxn. Not logged (transaction_completed says how it ended)."""

    log_event: ClassVar[str] = "transaction_markers_due"
    log_level: ClassVar[str] = "debug"

    transactional_id: str
    commit: bool


@dataclass(frozen=True, slots=True)
class ProducerIdInitialised:
    log_event: ClassVar[str] = "producer_id_initialised"

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionCompleted:
    log_event: ClassVar[str] = "transaction_completed"

    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: str
    partitions: int


@dataclass(frozen=True, slots=True)
class TransactionTimedOut:
    log_event: ClassVar[str] = "transaction_timed_out"

    transactional_id: str
    producer_id: int
    bumped_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionalIdExpired:
    log_event: ClassVar[str] = "transactional_id_expired"

    transactional_id: str


@dataclass(frozen=True, slots=True)
class TransactionStateWriteFailed:
    log_event: ClassVar[str] = "transaction_state_write_failed"
    log_level: ClassVar[str] = "error"

    transactional_id: str
    state: str
    error: ErrorCode
