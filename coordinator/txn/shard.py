"""The transaction shard of one `__transaction_state` partition: Kafka's TransactionCoordinator
decisions (coordinator.py) behind the runtime's `Shard` protocol, so the transaction coordinator runs
on the same runtime as the group coordinator.

A decision's transit is written as a TransactionLogRecord; once durable it is applied (the follow-up
`TransitWritten`: `complete_transition`, or `abort_transition` if the write failed) and the answer
leaves. Replay applies records only while loading: at run time a record mirrors the transit its
follow-up applies (as the classic group's GroupMetadata mirrors memory), and the log value does not
carry everything the metadata holds (the last producer epoch).

Commands keep no per-key order (the runtime's UNORDERED): as in Kafka, a request for a transactional
id whose transition is in flight is answered CONCURRENT_TRANSACTIONS by the state machine itself.
"""

from __future__ import annotations

from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.records.transaction_log import TransactionLogRecord
from ..runtime.outcome import Outcome, Reply
from .commands import (
    AbortTimedOut,
    AddPartitions,
    CompleteTxn,
    EndTxn,
    ExpireTransactionalId,
    IdTombstoned,
    InitProducerId,
    MarkersDue,
    ProducerIdInitialised,
    TransactionalIdExpired,
    TransactionCompleted,
    TransactionStateWriteFailed,
    TransactionTimedOut,
    TransitWritten,
    TxnResult,
)
from .coordinator import Decision, TxnCoordinator, log_value
from .metadata import TxnState

E = ErrorCode
S = TxnState
log = structlog.get_logger("kbroker.transactions")


class TransactionShard:
    def __init__(self, partition: int, machine: TxnCoordinator) -> None:
        self.partition = partition
        self.machine = machine  # the decisions and the metadata of this partition's transactional ids
        self.loading = False

    # -- the Shard protocol --------------------------------------------------------------------

    def key_of(self, cmd: Any) -> str:
        return cmd.transactional_id

    def error_result(self, cmd: Any, code: ErrorCode) -> TxnResult:
        return TxnResult(code)

    def handle(self, cmd: Any, now_ms: int) -> Outcome:
        out = Outcome()
        machine = self.machine
        match cmd:
            case InitProducerId():
                d = machine.handle_init_producer_id(cmd.transactional_id, cmd.timeout_ms, cmd.expected)
                if d.transit is None:
                    out.reply(cmd.reply_to, TxnResult(d.error))
                elif d.abort_after:  # an Ongoing transaction of a fenced producer: abort it, let the client retry
                    self._write(out, d, "init", TxnResult(E.CONCURRENT_TRANSACTIONS), cmd.reply_to)
                else:
                    self._write(out, d, "init", TxnResult(E.NONE, d.transit.producer_id, d.transit.producer_epoch),
                                cmd.reply_to)
            case AddPartitions():
                d = machine.handle_add_partitions_to_transaction(cmd.transactional_id, cmd.producer_id,
                                                                 cmd.producer_epoch, cmd.partitions, cmd.client_tv)
                if d.transit is None:
                    out.reply(cmd.reply_to, TxnResult(d.error))
                else:
                    self._write(out, d, "add", TxnResult(E.NONE), cmd.reply_to)
            case EndTxn():
                d = machine.handle_end_transaction(cmd.transactional_id, cmd.producer_id, cmd.producer_epoch,
                                                   cmd.commit, cmd.v2)
                if d.transit is not None:  # v2 answers the producer id and epoch the transaction will have
                    self._write(out, d, "prepare", TxnResult(E.NONE, *machine.ended_as(d.transit)), cmd.reply_to)
                elif d.error == E.NONE and d.txn is not None and cmd.v2:  # a retry of an end already done
                    out.reply(cmd.reply_to, TxnResult(E.NONE, d.txn.producer_id, d.txn.producer_epoch))
                else:
                    out.reply(cmd.reply_to, TxnResult(d.error))
            case CompleteTxn():
                txn = machine.txns.get(cmd.transactional_id)
                if txn is None or txn.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or txn.pending_transition:
                    out.reply(cmd.reply_to, TxnResult(E.NONE))  # nothing (more) to complete
                else:
                    self._write(out, machine.prepare_complete(cmd.transactional_id), "complete", TxnResult(E.NONE),
                                cmd.reply_to)
            case AbortTimedOut():
                timed_out = machine.handle_timeout(cmd.transactional_id)
                if timed_out is not None:
                    self._write(out, timed_out, "timeout", None, None)
            case ExpireTransactionalId():
                if machine.handle_expire(cmd.transactional_id) is not None:
                    out.write([TransactionLogRecord(cmd.transactional_id, None)],
                              then=IdTombstoned(cmd.transactional_id))
            case _:
                raise TypeError(f"unknown command {type(cmd).__name__}")
        return out

    def _write(self, out: Outcome, d: Decision, what: str, result: TxnResult | None, reply_to: Any) -> None:
        assert d.txn is not None and d.transit is not None
        version = 1 if self.machine.config.transaction_version >= 1 else 0
        record = TransactionLogRecord(d.txn.transactional_id, log_value(d.transit, version))
        replies = [Reply(reply_to, result)] if reply_to is not None and result is not None else []
        out.write([record], replies, then=TransitWritten(d, what))

    def replay(self, record: Any) -> None:
        if not self.loading:
            return  # a transit's follow-up applies it (the module docstring says why)
        try:
            self.machine.load(record.transactional_id, record.value)
        except ValueError as exc:
            log.warning("transaction_record_unreadable", partition=self.partition, error=str(exc))

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        out = Outcome()
        if isinstance(follow_up, IdTombstoned):
            txn_id = follow_up.transactional_id
            txn = self.machine.txns.get(txn_id)
            if error is not None:
                if txn is not None:
                    txn.pending_state = None
                out.events.append(TransactionStateWriteFailed(txn_id, "Dead", error))
            else:
                self.machine.remove(txn_id)
                out.events.append(TransactionalIdExpired(txn_id))
            return out
        d: Decision = follow_up.decision
        assert d.txn is not None and d.transit is not None
        txn, transit = d.txn, d.transit
        if error is not None:
            # The old metadata stays; the client was answered with a retriable error.
            self.machine.fail(d)
            out.events.append(TransactionStateWriteFailed(txn.transactional_id, transit.state.kafka_name, error))
            return out
        partitions = len(txn.partitions)
        self.machine.complete(d)
        match follow_up.what:
            case "init" if d.abort_after:
                out.events.append(MarkersDue(txn.transactional_id, False))
            case "init":
                out.events.append(ProducerIdInitialised(txn.transactional_id, txn.producer_id, txn.producer_epoch))
            case "prepare":
                out.events.append(MarkersDue(txn.transactional_id, transit.state is S.PREPARE_COMMIT))
            case "timeout":
                out.events.append(TransactionTimedOut(txn.transactional_id, transit.producer_id,
                                                      transit.producer_epoch))
                out.events.append(MarkersDue(txn.transactional_id, False))
            case "complete":
                out.events.append(TransactionCompleted(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch,
                    "commit" if transit.state is S.COMPLETE_COMMIT else "abort", partitions))
        return out

    def begin_load(self) -> None:
        self.loading = True
        self.machine.txns.clear()

    def finish_load(self, now_ms: int) -> Outcome:
        """Transactions found prepared are completed (their markers written again: they are
        idempotent); Ongoing ones are aborted by the timeout check once they expire."""
        self.loading = False
        out = Outcome()
        for txn_id in self.machine.in_prepare():
            out.events.append(MarkersDue(txn_id, self.machine.txns[txn_id].state is S.PREPARE_COMMIT))
        return out

    def unload(self, now_ms: int) -> Outcome:
        self.machine.txns.clear()
        return Outcome()
