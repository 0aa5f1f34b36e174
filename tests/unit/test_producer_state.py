"""Producer state: Kafka's sequence and epoch rules, duplicates, snapshots, and rebuilding from the log."""

from __future__ import annotations

import json

import pytest

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.producer_state import (
    INT32_MAX,
    SNAPSHOT_FILE,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    PartitionProducerState,
    ProducerIdAllocator,
    last_sequence,
    load_partition_state,
)
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_batch import Record, encode_batch, read_header

PID = 7


def batch(seq: int, count: int = 3, epoch: int = 0, pid: int = PID) -> bytes:
    return encode_batch([Record(i, 1000 + i, b"k", b"v%d" % (seq + i)) for i in range(count)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


class Harness:
    """A state plus a fake log end offset, appending through check() + update() like Produce does."""

    def __init__(self) -> None:
        self.state = PartitionProducerState("t", 0)
        self.end = 0

    def produce(self, data: bytes) -> int:
        header = read_header(data)
        duplicate = self.state.check(header)
        if duplicate is not None:
            return duplicate.first_offset
        first = self.end
        self.end += header.records_count
        self.state.update(header, first, self.end - 1, now_ms=0)
        return first


def test_in_sequence_batches_append():
    h = Harness()
    assert h.produce(batch(0)) == 0
    assert h.produce(batch(3)) == 3
    assert h.produce(batch(6, count=1)) == 6


def test_retry_of_any_of_the_last_five_batches_returns_its_offsets():
    h = Harness()
    offsets = [h.produce(batch(3 * i)) for i in range(6)]
    assert offsets == [0, 3, 6, 9, 12, 15]
    for i in range(1, 6):
        assert h.produce(batch(3 * i)) == offsets[i]
    assert h.end == 18  # nothing appended again
    # the oldest one fell out of the window: it is now just out of order
    with pytest.raises(OutOfOrderSequenceError):
        h.produce(batch(0))


def test_gap_is_out_of_order():
    h = Harness()
    h.produce(batch(0))
    with pytest.raises(OutOfOrderSequenceError) as e:
        h.produce(batch(4))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_partial_overlap_is_not_a_duplicate():
    h = Harness()
    h.produce(batch(0, count=3))
    with pytest.raises(OutOfOrderSequenceError):
        h.produce(batch(1, count=2))


def test_old_epoch_is_fenced_and_new_epoch_must_start_at_zero():
    h = Harness()
    h.produce(batch(0, epoch=2))
    with pytest.raises(InvalidProducerEpochError) as e:
        h.produce(batch(3, epoch=1))
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(OutOfOrderSequenceError):
        h.produce(batch(3, epoch=3))
    assert h.produce(batch(0, epoch=3)) == 3
    # the epoch bump cleared the old batches: a retry from epoch 2 is now fenced, not a duplicate
    with pytest.raises(InvalidProducerEpochError):
        h.produce(batch(0, epoch=2))


def test_unknown_producer_is_accepted_at_any_sequence():
    """KIP-360: no UNKNOWN_PRODUCER_ID; a producer the partition has no state for may start anywhere."""
    h = Harness()
    assert h.produce(batch(41, epoch=5)) == 0
    assert h.produce(batch(44, epoch=5)) == 3
    with pytest.raises(OutOfOrderSequenceError):
        h.produce(batch(50, epoch=5))


def test_sequence_wraps_at_int32_max():
    assert last_sequence(INT32_MAX - 1, 2) == 0
    assert last_sequence(INT32_MAX, 0) == INT32_MAX
    h = Harness()
    h.produce(batch(INT32_MAX - 2, count=3))
    assert h.produce(batch(0, count=2)) == 3


def test_producers_are_independent():
    h = Harness()
    h.produce(batch(0, pid=1))
    h.produce(batch(10, pid=2))
    assert h.produce(batch(3, pid=1)) == 6
    assert h.produce(batch(13, pid=2)) == 9


def test_expiry_forgets_idle_producers():
    h = Harness()
    h.produce(batch(0))
    assert h.state.expire(now_ms=10, expiration_ms=100) == 0
    assert h.state.expire(now_ms=100, expiration_ms=100) == 1
    assert h.produce(batch(77)) == 3  # forgotten: accepted at any sequence again


# --- persistence ----------------------------------------------------------------------------------------


def append(plog: PartitionLog, state: PartitionProducerState, data: bytes) -> int:
    header = read_header(data)
    duplicate = state.check(header)
    if duplicate is not None:
        return duplicate.first_offset
    info = plog.append(data, leader_epoch=0, now_ms=0, single_batch=True)
    state.update(header, info.base_offset, info.last_offset, 0)
    return info.base_offset


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=600), flush_policy="never")
    yield log
    log.close()


def reopen(tmp_path, plog: PartitionLog) -> PartitionLog:
    plog.close()
    return PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=600), flush_policy="never")


def test_rebuild_from_the_log_alone(tmp_path, plog):
    state = load_partition_state(plog)
    for i in range(20):  # several segments (segment.bytes 600)
        append(plog, state, batch(3 * i, pid=1))
    append(plog, state, batch(0, pid=2, epoch=4))
    append(plog, state, encode_batch([Record(0, 5, b"k", b"no producer")]))
    assert len(plog.segments) > 2
    plog = reopen(tmp_path, plog)
    rebuilt = load_partition_state(plog)
    assert rebuilt.producers.keys() == {1, 2}
    assert rebuilt.producers[1].last_seq == 59
    assert rebuilt.producers[2].epoch == 4
    # the rebuilt state detects a retry of the last batch and demands the next sequence
    assert append(plog, rebuilt, batch(57, pid=1)) == 57
    with pytest.raises(OutOfOrderSequenceError):
        rebuilt.check(read_header(batch(61, pid=1)))
    assert append(plog, rebuilt, batch(60, pid=1)) == plog.log_end_offset - 3
    plog.close()


def test_snapshot_then_replay_of_the_tail(tmp_path, plog):
    state = load_partition_state(plog)
    append(plog, state, batch(0))
    state.write_snapshot(plog.log_end_offset)
    snap = json.loads((tmp_path / "t-0" / SNAPSHOT_FILE).read_text())
    assert snap["offset"] == 3
    append(plog, state, batch(3))  # after the snapshot: must come back through replay
    plog = reopen(tmp_path, plog)
    rebuilt = load_partition_state(plog)
    assert rebuilt.producers[PID].last_seq == 5
    assert [b.first_offset for b in rebuilt.producers[PID].batches] == [0, 3]
    plog.close()


def test_snapshot_past_the_log_end_is_discarded(tmp_path, plog):
    """A crash lost the tail the snapshot had seen: the snapshot goes, the log is replayed in full."""
    state = load_partition_state(plog)
    append(plog, state, batch(0))
    snapshot = state.to_json(plog.log_end_offset)
    append(plog, state, batch(3))
    state.write_snapshot(plog.log_end_offset)  # offset 6
    plog.truncate_to(3)  # the second batch is lost
    rebuilt = load_partition_state(plog)
    assert not (tmp_path / "t-0" / SNAPSHOT_FILE).exists()
    assert rebuilt.producers[PID].last_seq == 2  # only what the log holds
    assert json.loads(snapshot)["offset"] == 3


def test_producer_ids_are_never_reused_across_restarts(tmp_path):
    first = ProducerIdAllocator(tmp_path, block=10)
    ids = [first.allocate() for _ in range(3)]
    assert ids == [0, 1, 2]
    second = ProducerIdAllocator(tmp_path, block=10)  # restart (clean or not)
    later = [second.allocate() for _ in range(12)]
    assert min(later) >= 10 and len(set(later)) == 12
    third = ProducerIdAllocator(tmp_path, block=10)
    assert third.allocate() >= max(later) + 1


# --- transactions: open transactions, the LSO and the aborted index -------------------------------------


def txn_batch(seq: int, count: int = 2, epoch: int = 0, pid: int = PID) -> bytes:
    return encode_batch([Record(i, 1000 + i, b"k", b"t%d" % (seq + i)) for i in range(count)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def marker(plog: PartitionLog, state: PartitionProducerState, pid: int, epoch: int, commit: bool) -> int:
    from kbroker.protocol.control_records import encode_marker

    info = plog.append(encode_marker(pid, epoch, commit, 0, 2000), leader_epoch=0, now_ms=0, single_batch=True,
                       control=True)
    state.update_marker_epoch(pid, epoch, 0)
    state.complete_txn(pid, commit, info.last_offset)
    return info.last_offset


def test_open_transaction_pins_the_last_stable_offset(tmp_path, plog):
    state = load_partition_state(plog)
    append(plog, state, batch(0, pid=1))  # offsets 0-2, not transactional
    first = append(plog, state, txn_batch(0, pid=2))  # 3-4
    append(plog, state, batch(3, pid=1))  # 5-7
    assert state.first_unstable_offset() == first == 3
    assert state.last_stable_offset(plog.high_watermark) == 3
    marker(plog, state, 2, 0, commit=True)
    assert state.first_unstable_offset() is None
    assert state.last_stable_offset(plog.high_watermark) == plog.high_watermark
    assert state.aborted == []


def test_abort_goes_to_the_aborted_index_and_survives_restart(tmp_path, plog):
    state = load_partition_state(plog)
    append(plog, state, txn_batch(0, pid=2))  # 0-1
    append(plog, state, txn_batch(0, pid=3))  # 2-3
    end_2 = marker(plog, state, 2, 0, commit=False)  # 4
    append(plog, state, txn_batch(2, pid=3))  # 5-6, still pid 3's transaction
    assert state.aborted == [(2, 0, end_2)]
    assert state.first_unstable_offset() == 2
    assert state.aborted_between(0, 2) == [(2, 0)]
    assert state.aborted_between(5, 7) == []
    # rebuilt from the log alone (the replay reads the markers' types) and from a snapshot
    plog = reopen(tmp_path, plog)
    rebuilt = load_partition_state(plog)
    assert rebuilt.aborted == [(2, 0, end_2)] and rebuilt.ongoing == {3: 2}
    rebuilt.write_snapshot(plog.log_end_offset)
    plog = reopen(tmp_path, plog)
    again = load_partition_state(plog)
    assert again.aborted == [(2, 0, end_2)] and again.ongoing == {3: 2}
    plog.close()


def test_marker_fences_older_epochs():
    h = Harness()
    h.produce(txn_batch(0, epoch=0))
    h.state.update_marker_epoch(PID, 1, 0)  # the coordinator aborted with a bumped epoch
    h.state.complete_txn(PID, False, 2)
    with pytest.raises(InvalidProducerEpochError):
        h.state.check(read_header(txn_batch(2, epoch=0)))
    with pytest.raises(InvalidProducerEpochError):
        h.state.check_marker(PID, 0)
    assert h.produce(txn_batch(0, epoch=1)) == 2  # the new epoch starts at sequence 0


def test_a_transactions_v2_marker_must_be_newer_than_the_producers_epoch():
    """Kafka's checkProducerEpoch for TV2 markers: not newer is refused while the transaction is open;
    the same marker again after it ended is a retry (KAFKA-19999) and passes; TV0 takes the same epoch."""
    h = Harness()
    h.produce(txn_batch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        h.state.check_marker(PID, 3, transaction_version=2)
    h.state.check_marker(PID, 3)  # a v1 transaction's marker keeps the epoch
    h.state.check_marker(PID, 4, transaction_version=2)
    h.state.update_marker_epoch(PID, 4, 0)
    h.state.complete_txn(PID, True, 1)
    h.state.check_marker(PID, 4, transaction_version=2)  # the retry of a marker already written
    with pytest.raises(InvalidProducerEpochError):
        h.state.check_marker(PID, 3, transaction_version=2)


def test_version_1_snapshot_is_still_read():
    state = PartitionProducerState("t", 0)
    raw = json.dumps({"version": 1, "offset": 5, "producers": [
        {"id": 3, "epoch": 1, "last_timestamp_ms": 10, "batches": [[0, 4, 0, 4, 9]]}]}).encode()
    assert state.load_json(raw) == 5
    assert state.producers[3].last_seq == 4 and state.ongoing == {} and state.aborted == []


def test_snapshot_never_claims_past_an_unapplied_marker(tmp_path, plog):
    """A snapshot taken between a marker's append and its fsync must be replayed from the marker."""
    from kbroker.protocol.control_records import encode_marker

    state = load_partition_state(plog)
    append(plog, state, txn_batch(0, pid=2))
    info = plog.append(encode_marker(2, 0, True, 0, 2000), leader_epoch=0, now_ms=0, single_batch=True, control=True)
    state.marker_appended(2, info.last_offset)
    assert state.snapshot_offset(plog.log_end_offset) == info.last_offset
    state.write_snapshot(state.snapshot_offset(plog.log_end_offset))  # still shows the open transaction
    state.complete_txn(2, True, info.last_offset)
    assert state.snapshot_offset(plog.log_end_offset) == plog.log_end_offset
    plog = reopen(tmp_path, plog)
    rebuilt = load_partition_state(plog)  # the replay from the marker closes the transaction
    assert rebuilt.ongoing == {} and rebuilt.first_unstable_offset() is None
    plog.close()


def test_coordinator_epoch_is_the_last_markers(tmp_path, plog):
    """describe-producers' LatestCoordinatorEpoch: -1 until a transaction marker is written for the
    producer, then the marker's coordinator epoch, also after a replay of the log and from a snapshot
    (Kafka's ProducerStateEntry.coordinatorEpoch)."""
    from kbroker.protocol.control_records import encode_marker

    state = load_partition_state(plog)
    append(plog, state, batch(0, pid=1))  # idempotent, never in a transaction
    append(plog, state, txn_batch(0, pid=2))
    assert state.producers[1].coordinator_epoch == state.producers[2].coordinator_epoch == -1
    info = plog.append(encode_marker(2, 0, True, 4, 2000), leader_epoch=0, now_ms=0, single_batch=True, control=True)
    state.update_marker_epoch(2, 0, 0, coordinator_epoch=4)
    state.complete_txn(2, True, info.last_offset)
    assert state.producers[2].coordinator_epoch == 4 and state.producers[1].coordinator_epoch == -1
    plog = reopen(tmp_path, plog)
    rebuilt = load_partition_state(plog)  # from the log: the marker's value holds the epoch
    assert rebuilt.producers[2].coordinator_epoch == 4 and rebuilt.producers[1].coordinator_epoch == -1
    rebuilt.write_snapshot(plog.log_end_offset)
    plog = reopen(tmp_path, plog)
    again = load_partition_state(plog)
    assert again.producers[2].coordinator_epoch == 4 and again.producers[1].coordinator_epoch == -1
    plog.close()
