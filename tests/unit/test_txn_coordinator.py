"""The transaction coordinator's state machine with a manual clock; tests are named after Kafka's
TransactionCoordinator / TransactionMetadata methods they exercise."""

from __future__ import annotations

import itertools

import pytest

from kbroker.coordinator.txn.coordinator import Decision, TxnConfig, TxnCoordinator, log_value
from kbroker.protocol.records.transaction_log import decode_value, encode_value
from kbroker.coordinator.txn.metadata import IllegalTransition, TransactionMetadata, TxnState
from kbroker.protocol.errors import ErrorCode
from kbroker.purgatory.clock import ManualClock

E = ErrorCode
S = TxnState
TP0, TP1 = ("t", 0), ("t", 1)


def make(max_timeout_ms: int = 900000) -> tuple[TxnCoordinator, ManualClock]:
    clock = ManualClock(start_ms=1_000)
    ids = itertools.count(1000)
    return TxnCoordinator(clock, lambda: next(ids), TxnConfig(max_timeout_ms=max_timeout_ms)), clock


def apply(coord: TxnCoordinator, d: Decision) -> Decision:
    """What the service does once the transit's record is durable."""
    if d.transit is not None:
        coord.complete(d)
    return d


def init(coord: TxnCoordinator, txn_id: str = "tx", timeout: int = 60000, expected=None) -> TransactionMetadata:
    d = coord.handle_init_producer_id(txn_id, timeout, expected)
    assert d.error == E.NONE, d
    apply(coord, d)
    return coord.txns[txn_id]


def begin(coord: TxnCoordinator, txn: TransactionMetadata, *tps) -> None:
    d = coord.handle_add_partitions_to_transaction(txn.transactional_id, txn.producer_id, txn.producer_epoch, tps or [TP0])
    assert d.error == E.NONE
    apply(coord, d)


def end(coord: TxnCoordinator, txn: TransactionMetadata, commit: bool) -> None:
    d = apply(coord, coord.handle_end_transaction(txn.transactional_id, txn.producer_id, txn.producer_epoch, commit))
    assert d.error == E.NONE
    apply(coord, coord.prepare_complete(txn.transactional_id))


def test_handle_init_producer_id_new_transactional_id_gets_epoch_zero():
    coord, _ = make()
    txn = init(coord)
    assert (txn.producer_id, txn.producer_epoch, txn.state) == (1000, 0, S.EMPTY)


def test_handle_init_producer_id_bumps_epoch_and_fences_the_old_instance():
    coord, _ = make()
    txn = init(coord)
    old_epoch = txn.producer_epoch
    init(coord)  # a new instance with the same transactional id
    assert txn.producer_epoch == old_epoch + 1
    # the zombie's requests are fenced
    d = coord.handle_add_partitions_to_transaction("tx", txn.producer_id, old_epoch, [TP0])
    assert d.error == E.PRODUCER_FENCED
    d = coord.handle_end_transaction("tx", txn.producer_id, old_epoch, True)
    assert d.error == E.PRODUCER_FENCED


def test_handle_init_producer_id_rejects_bad_timeouts_and_empty_id():
    coord, _ = make(max_timeout_ms=10000)
    assert coord.handle_init_producer_id("tx", 10001, None).error == E.INVALID_TRANSACTION_TIMEOUT
    assert coord.handle_init_producer_id("tx", 0, None).error == E.INVALID_TRANSACTION_TIMEOUT
    assert coord.handle_init_producer_id("", 1000, None).error == E.INVALID_REQUEST


def test_handle_init_producer_id_on_ongoing_transaction_fences_and_aborts():
    coord, _ = make()
    txn = init(coord)
    begin(coord, txn)
    d = coord.handle_init_producer_id("tx", 60000, None)
    assert d.error == E.CONCURRENT_TRANSACTIONS and d.abort_after
    assert d.transit.state == S.PREPARE_ABORT and d.transit.producer_epoch == 1
    apply(coord, d)
    assert txn.state == S.PREPARE_ABORT
    # while the markers are written, a retry keeps getting CONCURRENT_TRANSACTIONS
    assert coord.handle_init_producer_id("tx", 60000, None).error == E.CONCURRENT_TRANSACTIONS
    apply(coord, coord.prepare_complete("tx"))
    assert txn.state == S.COMPLETE_ABORT
    init(coord)
    assert txn.producer_epoch == 2 and txn.state == S.EMPTY


def test_handle_init_producer_id_kip360_epoch_bump_with_expected_epoch():
    coord, _ = make()
    txn = init(coord)
    init(coord, expected=(txn.producer_id, 0))
    assert (txn.producer_epoch, txn.last_producer_epoch) == (1, 0)
    # a retry of that bump (its answer was lost) is answered with the same epoch
    d = coord.handle_init_producer_id("tx", 60000, (txn.producer_id, 0))
    assert d.error == E.NONE and d.transit.producer_epoch == 1
    apply(coord, d)
    # a stale expected epoch is fenced; so is an unknown producer id
    assert coord.handle_init_producer_id("tx", 60000, (txn.producer_id, 7)).error == E.PRODUCER_FENCED
    assert coord.handle_init_producer_id("tx", 60000, (999, 1)).error == E.PRODUCER_FENCED


def test_handle_init_producer_id_rotates_producer_id_when_epoch_exhausted():
    coord, _ = make()
    txn = init(coord)
    txn.producer_epoch = 32766
    old_pid = txn.producer_id
    init(coord)
    assert txn.producer_id != old_pid and txn.producer_epoch == 0 and txn.last_producer_id == old_pid


def test_handle_add_partitions_to_transaction_starts_ongoing_and_is_idempotent():
    coord, clock = make()
    txn = init(coord)
    begin(coord, txn, TP0)
    assert txn.state == S.ONGOING and txn.partitions == {TP0} and txn.start_ms == clock.wall_ms()
    started = txn.start_ms
    clock.advance(5)
    d = coord.handle_add_partitions_to_transaction("tx", txn.producer_id, txn.producer_epoch, [TP0])
    assert d.error == E.NONE and d.transit is None  # already in: nothing to write
    begin(coord, txn, TP1)
    assert txn.partitions == {TP0, TP1} and txn.start_ms == started


def test_handle_add_partitions_to_transaction_errors():
    coord, _ = make()
    assert coord.handle_add_partitions_to_transaction("nope", 1, 0, [TP0]).error == E.INVALID_PRODUCER_ID_MAPPING
    txn = init(coord)
    assert coord.handle_add_partitions_to_transaction("tx", txn.producer_id + 1, 0, [TP0]).error == E.INVALID_PRODUCER_ID_MAPPING
    begin(coord, txn)
    apply(coord, coord.handle_end_transaction("tx", txn.producer_id, 0, True))
    # PrepareCommit: markers are being written
    assert coord.handle_add_partitions_to_transaction("tx", txn.producer_id, 0, [TP1]).error == E.CONCURRENT_TRANSACTIONS


def test_pending_transition_answers_concurrent_transactions():
    coord, _ = make()
    txn = init(coord)
    d = coord.handle_add_partitions_to_transaction("tx", txn.producer_id, 0, [TP0])
    assert txn.pending_state == S.ONGOING  # its record is not durable yet
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, True).error == E.CONCURRENT_TRANSACTIONS
    coord.fail(d)  # the write failed: the old metadata stays
    assert txn.state == S.EMPTY and txn.pending_state is None


def test_handle_verify_partitions_in_transaction():
    coord, _ = make()
    txn = init(coord)
    assert coord.handle_verify_partitions_in_transaction("tx", txn.producer_id, 0, [TP0]) == {
        TP0: E.TRANSACTION_ABORTABLE}
    begin(coord, txn, TP0)
    assert coord.handle_verify_partitions_in_transaction("tx", txn.producer_id, 0, [TP0, TP1]) == {
        TP0: E.NONE, TP1: E.TRANSACTION_ABORTABLE}
    assert coord.handle_verify_partitions_in_transaction("tx", txn.producer_id, 1, [TP0]) == {TP0: E.PRODUCER_FENCED}


def test_handle_end_transaction_commit_and_abort_cycle():
    coord, _ = make()
    txn = init(coord)
    begin(coord, txn, TP0, TP1)
    d = coord.handle_end_transaction("tx", txn.producer_id, 0, True)
    assert d.transit.state == S.PREPARE_COMMIT and d.transit.partitions == {TP0, TP1}
    apply(coord, d)
    # a retry while the markers are written
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, True).error == E.CONCURRENT_TRANSACTIONS
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, False).error == E.INVALID_TXN_STATE
    apply(coord, coord.prepare_complete("tx"))
    assert txn.state == S.COMPLETE_COMMIT and txn.partitions == set()
    # a retry after completion succeeds; the opposite result is invalid
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, True).error == E.NONE
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, False).error == E.INVALID_TXN_STATE
    begin(coord, txn, TP1)
    end(coord, txn, commit=False)
    assert txn.state == S.COMPLETE_ABORT


def test_handle_end_transaction_from_empty_is_invalid_txn_state():
    coord, _ = make()
    txn = init(coord)
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, True).error == E.INVALID_TXN_STATE
    assert coord.handle_end_transaction("other", txn.producer_id, 0, True).error == E.INVALID_PRODUCER_ID_MAPPING


def test_abort_timed_out_transactions_bumps_epoch_and_prepares_abort():
    coord, clock = make()
    txn = init(coord, timeout=10_000)
    begin(coord, txn)
    clock.advance(10_000)
    assert coord.abort_timed_out_transactions() == []  # not yet: start + timeout < now is required
    clock.advance(1)
    [d] = coord.abort_timed_out_transactions()
    assert d.transit.state == S.PREPARE_ABORT and d.transit.producer_epoch == 1
    apply(coord, d)
    apply(coord, coord.prepare_complete("tx"))
    assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, 1)
    # the old producer is fenced everywhere
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, False).error == E.PRODUCER_FENCED
    assert coord.handle_init_producer_id("tx", 10_000, (txn.producer_id, 0)).error == E.PRODUCER_FENCED


def test_abort_timed_out_transactions_does_not_bump_twice_after_a_failed_write():
    coord, clock = make()
    txn = init(coord, timeout=1_000)
    begin(coord, txn)
    clock.advance(2_000)
    [d] = coord.abort_timed_out_transactions()
    coord.fail(d)
    [d] = coord.abort_timed_out_transactions()
    assert d.transit.producer_epoch == 1
    apply(coord, d)
    assert not txn.has_failed_epoch_fence


def test_transaction_metadata_transition_table():
    txn = TransactionMetadata("tx", 1, producer_epoch=0, state=S.EMPTY)
    with pytest.raises(IllegalTransition):
        txn.transit(S.PREPARE_COMMIT, now_ms=0)
    txn.transit(S.ONGOING, now_ms=0)
    with pytest.raises(IllegalTransition):  # one pending transition at a time
        txn.transit(S.ONGOING, now_ms=0)


def test_load_replays_records_and_finds_prepared_transactions():
    coord, _ = make()
    txn = init(coord)
    begin(coord, txn, TP0, TP1)
    d = coord.handle_end_transaction("tx", txn.producer_id, 0, True)
    record = encode_value(log_value(d.transit))
    fresh, _ = make()
    fresh.load("tx", decode_value(record))
    assert fresh.in_prepare() == ["tx"]
    loaded = fresh.txns["tx"]
    assert (loaded.state, loaded.partitions, loaded.producer_id) == (S.PREPARE_COMMIT, {TP0, TP1}, txn.producer_id)
    fresh.load("tx", None)
    assert fresh.txns == {}


def test_expired_transactional_ids():
    coord, clock = make()
    coord.config.id_expiration_ms = 1000
    init(coord)
    assert coord.expired_transactional_ids() == []
    clock.advance(1000)
    assert coord.expired_transactional_ids() == ["tx"]


def test_load_skips_dead_and_refuses_unknown_status():
    from kbroker.protocol.records.transaction_log import TxnLogValue

    coord, _ = make()
    coord.load("a", TxnLogValue(1, 0, 1000, int(S.EMPTY), None, 5, -1))
    coord.load("a", TxnLogValue(1, 0, 1000, int(S.DEAD), None, 6, -1))
    assert "a" not in coord.txns
    with pytest.raises(ValueError):
        coord.load("b", TxnLogValue(1, 0, 1000, 42, None, 5, -1))
    with pytest.raises(ValueError):
        coord.load("b", TxnLogValue(1, 0, 1000, int(S.PREPARE_EPOCH_FENCE), None, 5, -1))
