"""Compaction with transactions: aborted records go and never replace a committed value; nothing from
the first unstable offset on is cleaned or counts as newest."""

from __future__ import annotations

from pathlib import Path

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.log.compaction import compact
from kbroker.broker.storage.log.txn_cleaning import TxnCleaning
from kbroker.broker.storage.producer_state import load_partition_state
from kbroker.protocol.control_records import encode_marker
from kbroker.protocol.record_batch import Record, encode_batch, read_header
from kbroker.tests.unit.test_log_cleanup import records


def test_is_aborted_ranges_per_producer():
    txn = TxnCleaning(first_unstable=50, aborted=[(5, 10, 12), (5, 20, 30), (6, 0, 3)])
    assert txn.is_aborted(5, 11) and txn.is_aborted(5, 20) and txn.is_aborted(6, 3)
    assert not txn.is_aborted(5, 13) and not txn.is_aborted(5, 31) and not txn.is_aborted(7, 11)
    assert txn.counts(1, 49) and not txn.counts(1, 50) and not txn.counts(5, 25)


def test_compaction_drops_aborted_and_keeps_committed_value_behind_an_open_transaction(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=400, cleanup_policy="compact"),
                        flush_policy="never")
    state = load_partition_state(plog)
    plog.txn_state = state
    seq = {5: 0, 6: 0}

    def put(key: bytes, value: bytes, pid: int = -1) -> int:
        if pid < 0:
            batch = encode_batch([Record(0, 1_000, key, value)])
        else:
            batch = encode_batch([Record(0, 1_000, key, value)], producer_id=pid, producer_epoch=0,
                                 base_sequence=seq[pid], is_transactional=True)
            seq[pid] += 1
        info = plog.append(batch, leader_epoch=0, now_ms=0)
        if pid >= 0:
            state.update(read_header(batch), info.base_offset, info.last_offset, 0)
        return info.base_offset

    def end(pid: int, commit: bool) -> None:
        info = plog.append(encode_marker(pid, 0, commit, 0, 1_000), leader_epoch=0, now_ms=0, control=True)
        state.complete_txn(pid, commit, info.last_offset)

    committed = put(b"A", b"committed")
    aborted = put(b"A", b"aborted", pid=5)
    put(b"B", b"aborted-b", pid=5)
    end(5, commit=False)
    for i in range(12):
        put(b"filler", b"f%d" % i)
    open_first = put(b"A", b"open", pid=6)
    for i in range(12):
        put(b"filler", b"g%d" % i)
    assert len(plog.segments) > 4
    stats = compact(plog, 10_000)
    assert stats.segments_rewritten > 0
    survivors = {(r.offset, r.key, r.value) for r in records(plog)}
    assert (committed, b"A", b"committed") in survivors  # the aborted and the open value did not replace it
    assert not any(v in (b"aborted", b"aborted-b") for _, _, v in survivors)
    assert (open_first, b"A", b"open") in survivors
    # every record from the first unstable offset on is still there
    assert {r.value for r in records(plog) if r.offset >= open_first} >= {b"g%d" % i for i in range(12)}
    assert aborted < open_first
    plog.close()


def test_markers_without_records_are_removed_after_delete_retention(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0,
                        LogConfig(segment_bytes=400, cleanup_policy="compact", delete_retention_ms=1_000),
                        flush_policy="never")
    state = load_partition_state(plog)
    plog.txn_state = state
    seqs = {}

    def txn(pid: int, key: bytes, value: bytes, commit: bool) -> int:
        seq = seqs.get(pid, 0)
        seqs[pid] = seq + 1
        batch = encode_batch([Record(0, 1_000, key, value)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                             is_transactional=True)
        info = plog.append(batch, leader_epoch=0, now_ms=0)
        state.update(read_header(batch), info.base_offset, info.last_offset, 0)
        marker = plog.append(encode_marker(pid, 0, commit, 0, 1_000), leader_epoch=0, now_ms=0, control=True)
        state.complete_txn(pid, commit, marker.last_offset)
        return marker.last_offset

    superseded = txn(1, b"K", b"v1", commit=True)  # its record is replaced by the next transaction's
    aborted = txn(2, b"K", b"bad", commit=False)  # its record goes with the abort
    kept = txn(1, b"K", b"v2", commit=True)  # its record survives: the marker must stay
    for i in range(20):
        plog.append(encode_batch([Record(0, 1_000, b"filler", b"f%d" % i)]), leader_epoch=0, now_ms=0)
    assert state.aborted and state.aborted[0][2] == aborted

    def control_offsets() -> set[int]:
        from kbroker.protocol.record_batch import decode_batches

        out = set()
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            batches = list(decode_batches(plog.read(offset, 1_000_000).records))
            out |= {h.base_offset for h, _ in batches if h.is_control}
            offset = batches[-1][0].next_offset
        return out

    compact(plog, 1_500)  # within delete.retention.ms of the markers (timestamp 1,000): kept
    assert {superseded, aborted, kept} <= control_offsets()
    compact(plog, 10_000)
    left = control_offsets()
    assert kept in left and superseded not in left and aborted not in left
    assert state.aborted == []  # the removed abort marker's index entry is gone too
    assert [r.value for r in records(plog) if r.key == b"K"] == [b"v2"]
    plog.close()
