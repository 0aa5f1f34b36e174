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


def make(max_timeout_ms: int = 900000, tv: int = 0) -> tuple[TxnCoordinator, ManualClock]:
    """A coordinator whose finalized transaction.version is `tv` (0: as Kafka 3.x; 2: as Kafka 4.x)."""
    clock = ManualClock(start_ms=1_000)
    ids = itertools.count(1000)
    return TxnCoordinator(clock, lambda: next(ids), TxnConfig(max_timeout_ms=max_timeout_ms,
                                                              transaction_version=tv)), clock


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


# --- transactions v2 (KIP-890 part 2): EndTxn v5, Kafka's endTransaction -------------------------


def begin_v2(coord: TxnCoordinator, txn: TransactionMetadata, *tps) -> None:
    """Partitions added on a v2 client's behalf (Produce v12+, TxnOffsetCommit v5+)."""
    d = coord.handle_add_partitions_to_transaction(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                   tps or [TP0], client_tv=2)
    assert d.error == E.NONE
    apply(coord, d)


def test_end_transaction_v2_bumps_the_epoch_and_answers_it():
    coord, _ = make(tv=2)
    txn = init(coord)
    pid = txn.producer_id
    begin_v2(coord, txn, TP0, TP1)
    assert txn.client_tv == 2
    d = coord.handle_end_transaction("tx", pid, 0, True, v2=True)
    assert (d.transit.state, d.transit.producer_epoch, d.transit.last_producer_epoch) == (S.PREPARE_COMMIT, 1, 0)
    assert coord.ended_as(d.transit) == (pid, 1)
    apply(coord, d)
    assert txn.producer_epoch == 1  # the markers are written with the new epoch
    # the client's retry (its epoch is still 0) while the markers are written
    assert coord.handle_end_transaction("tx", pid, 0, True, v2=True).error == E.CONCURRENT_TRANSACTIONS
    assert coord.handle_end_transaction("tx", pid, 0, False, v2=True).error == E.INVALID_TXN_STATE
    apply(coord, coord.prepare_complete("tx"))
    assert (txn.state, txn.producer_id, txn.producer_epoch) == (S.COMPLETE_COMMIT, pid, 1)
    # a retry after completion: NONE with the transaction's id and epoch; the opposite result is invalid
    retry = coord.handle_end_transaction("tx", pid, 0, True, v2=True)
    assert (retry.error, retry.transit, retry.txn) == (E.NONE, None, txn)
    assert coord.handle_end_transaction("tx", pid, 0, False, v2=True).error == E.INVALID_TXN_STATE
    # the old epoch is fenced: a zombie's partition is not added (Produce answers INVALID_PRODUCER_EPOCH)
    assert coord.handle_add_partitions_to_transaction("tx", pid, 0, [TP0], client_tv=2).error == E.PRODUCER_FENCED
    assert coord.handle_end_transaction("tx", pid, 2, True, v2=True).error == E.PRODUCER_FENCED
    # the same epoch in CompleteCommit is the next transaction's: a commit of nothing is invalid,
    # an abort of nothing is allowed (and bumps again)
    assert coord.handle_end_transaction("tx", pid, 1, True, v2=True).error == E.INVALID_TXN_STATE
    d = coord.handle_end_transaction("tx", pid, 1, False, v2=True)
    assert (d.transit.state, d.transit.producer_epoch, d.transit.partitions) == (S.PREPARE_ABORT, 2, frozenset())
    apply(coord, d)
    apply(coord, coord.prepare_complete("tx"))
    assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, 2)


def test_end_transaction_v2_from_empty_aborts_and_refuses_a_commit():
    coord, _ = make(tv=2)
    txn = init(coord)
    assert coord.handle_end_transaction("tx", txn.producer_id, 0, True, v2=True).error == E.INVALID_TXN_STATE
    d = coord.handle_end_transaction("tx", txn.producer_id, 0, False, v2=True)
    assert (d.transit.state, d.transit.producer_epoch) == (S.PREPARE_ABORT, 1)


def test_end_transaction_v2_rotates_the_producer_id_when_the_epoch_is_exhausted():
    coord, _ = make(tv=2)
    txn = init(coord)
    old = txn.producer_id
    txn.producer_epoch = 32766  # Short.MaxValue - 1: the last epoch a client may use
    begin_v2(coord, txn)
    d = coord.handle_end_transaction("tx", old, 32766, True, v2=True)
    new = d.transit.next_producer_id
    assert new not in (-1, old) and d.transit.producer_epoch == 32767  # the markers' epoch
    assert coord.ended_as(d.transit) == (new, 0)  # what the client is answered
    apply(coord, d)
    apply(coord, coord.prepare_complete("tx"))
    assert (txn.producer_id, txn.last_producer_id, txn.producer_epoch) == (new, old, 0)
    # the client retries with its old id and epoch: answered NONE, the new id at epoch 0
    retry = coord.handle_end_transaction("tx", old, 32766, True, v2=True)
    assert retry.error == E.NONE and (retry.txn.producer_id, retry.txn.producer_epoch) == (new, 0)


def test_end_transaction_v1_keeps_the_epoch_on_a_v2_server():
    coord, _ = make(tv=2)
    txn = init(coord)
    begin(coord, txn)  # AddPartitionsToTxn v0-v3: a v1 client
    assert txn.client_tv == 0
    d = coord.handle_end_transaction("tx", txn.producer_id, 0, True)
    assert d.transit.producer_epoch == 0 and coord.ended_as(d.transit) == (txn.producer_id, 0)


def test_abort_timed_out_transactions_on_a_v2_server_bumps_once_and_records_v2():
    coord, clock = make(tv=2)
    txn = init(coord, timeout=1_000)
    begin(coord, txn)
    clock.advance(2_000)
    [d] = coord.abort_timed_out_transactions()
    assert (d.transit.state, d.transit.producer_epoch, d.transit.client_tv) == (S.PREPARE_ABORT, 1, 2)
    apply(coord, d)
    apply(coord, coord.prepare_complete("tx"))
    assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, 1)
    assert coord.handle_add_partitions_to_transaction("tx", txn.producer_id, 0, [TP0]).error == E.PRODUCER_FENCED


def test_transaction_log_value_v1_keeps_what_a_v2_replay_needs():
    coord, _ = make(tv=2)
    txn = init(coord)
    txn.producer_epoch = 32766
    begin_v2(coord, txn, TP0, TP1)
    d = coord.handle_end_transaction("tx", txn.producer_id, 32766, False, v2=True)
    raw = encode_value(log_value(d.transit, version=1))
    assert raw[:2] == b"\x00\x01"
    fresh, _ = make(tv=2)
    fresh.load("tx", decode_value(raw))
    loaded = fresh.txns["tx"]
    assert (loaded.state, loaded.partitions, loaded.producer_epoch) == (S.PREPARE_ABORT, {TP0, TP1}, 32767)
    assert (loaded.client_tv, loaded.next_producer_id) == (2, d.transit.next_producer_id)
    # completed after the restart, it moves to the next producer id as it would have
    apply(fresh, fresh.prepare_complete("tx"))
    assert (loaded.producer_id, loaded.producer_epoch) == (d.transit.next_producer_id, 0)
