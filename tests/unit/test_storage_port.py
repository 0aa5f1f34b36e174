"""The storage port over the segment files (broker/storage/log/store.py): checksummed small files,
the leader-epoch history, the producer state owned by the store, and reads that stop at the high
watermark (the durable end under `--flush always`). Real files in a temporary directory."""

from __future__ import annotations

import asyncio
import json

import pytest

from kbroker.broker.storage import checksummed
from kbroker.broker.storage.api import AppendOrigin, Isolation
from kbroker.broker.storage.log import LogConfig, LogManager
from kbroker.broker.storage.log.epochs import LeaderEpochs
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode, KafkaError


# --- checksummed files ---------------------------------------------------------------------------------

def test_a_checksummed_file_reads_back_and_stays_json() -> None:
    raw = checksummed.dumps({"offset": 5, "producers": [[1, 2]]})
    assert json.loads(raw)["crc32c"]  # still one JSON object: offline readers read it as before
    loaded = checksummed.loads(raw)
    assert loaded.body == {"offset": 5, "producers": [[1, 2]]} and not loaded.legacy


def test_a_flipped_bit_anywhere_is_a_mismatch() -> None:
    raw = checksummed.dumps({"offset": 5, "name": "t"}, indent=1)
    for flipped in (raw.replace(b"5", b"7"), raw.replace(b'"t"', b'"u"'), raw.replace(b"offset", b"offsex")):
        with pytest.raises(checksummed.ChecksumMismatch) as caught:
            checksummed.loads(flipped)
        assert "name" in caught.value.body or "offsex" in caught.value.body  # what it said, untrusted


def test_a_file_without_a_checksum_is_an_older_kbrokers_and_is_read() -> None:
    loaded = checksummed.loads(b'{"offset": 3}')
    assert loaded.body == {"offset": 3} and loaded.legacy
    with pytest.raises(ValueError):
        checksummed.loads(b"[1, 2]")


# --- the leader-epoch history --------------------------------------------------------------------------

def test_end_offsets_for_epochs_as_kafka_answers() -> None:
    empty = LeaderEpochs()
    assert empty.end_offset_for(0, 0, 10) == (0, 10)  # one term, epoch 0, from the log start
    assert empty.end_offset_for(3, 0, 10) == (-1, -1)
    assert empty.end_offset_for(-1, 0, 10) == (-1, -1)
    epochs = LeaderEpochs()
    assert epochs.assign(2, 10) and epochs.assign(5, 40)
    assert not epochs.assign(5, 50)  # the same term again: nothing to record
    assert epochs.end_offset_for(5, 0, 90) == (5, 90)  # the latest: the log end
    assert epochs.end_offset_for(2, 0, 90) == (2, 40)
    assert epochs.end_offset_for(3, 0, 90) == (2, 40)  # unknown between two terms: the older one's
    assert epochs.end_offset_for(0, 0, 90) == (0, 10)  # older than any known: the first term's start
    assert epochs.end_offset_for(6, 0, 90) == (-1, -1)
    assert [epochs.epoch_at(o) for o in (0, 9, 10, 39, 40, 80)] == [0, 0, 2, 2, 5, 5]
    assert epochs.truncate_from_end(40) and epochs.entries == [(2, 10)]
    assert LeaderEpochs.from_json(epochs.to_json()).entries == [(2, 10)]
    with pytest.raises(ValueError):
        LeaderEpochs.from_json([[3, 10], [2, 20]])


# --- the store ---------------------------------------------------------------------------------------------

def _batch(seq: int, *, pid: int = 7, count: int = 2) -> bytes:
    return rb.encode_batch([rb.Record(i, 1000 + i, b"k", b"v") for i in range(count)],
                           producer_id=pid, producer_epoch=0, base_sequence=seq)


def _client_append(store, data: bytes, now_ms: int = 5):
    return store.append(data, origin=AppendOrigin.CLIENT, now_ms=now_ms, leader_epoch=0,
                        headers=rb.validate_produced_batches(data))


def test_the_store_checks_appends_and_records_a_producers_batch_in_one_step(tmp_path) -> None:
    logs = LogManager(tmp_path, LogConfig(), "never")
    logs.create_topic("t", 1, {})
    store = logs.store("t", 0)
    first = _client_append(store, _batch(0))
    assert (first.base_offset, first.last_offset, first.duplicate) == (0, 1, False)
    retry = _client_append(store, _batch(0))  # the same batch again: answered, not appended
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (0, 1) and store.log_end_offset == 2
    with pytest.raises(KafkaError) as gap:
        _client_append(store, _batch(5))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and store.log_end_offset == 2
    assert [(p.producer_id, p.last_seq, txn) for p, txn in store.producers()] == [(7, 1, -1)]
    logs.close()


def test_reads_stop_at_the_high_watermark_which_is_the_durable_end(tmp_path) -> None:
    async def scenario() -> None:
        fsyncs: list[int] = []
        logs = LogManager(tmp_path, LogConfig(), "always", fsync=fsyncs.append)
        logs.create_topic("t", 1, {})
        store = logs.store("t", 0)
        moved: list[tuple[str, int]] = []
        logs.high_watermark_listener = lambda topic, partition: moved.append((topic, partition))
        await _client_append(store, rb.encode_batch([rb.Record(0, 1, None, b"a")])).wait_durable()
        assert store.high_watermark == 1 and moved == [("t", 0)]
        second = _client_append(store, rb.encode_batch([rb.Record(0, 1, None, b"b")]))
        assert (store.log_end_offset, store.high_watermark) == (2, 1)  # appended, not durable yet
        below = store.read(0, 1 << 20, Isolation.HIGH_WATERMARK)
        assert [r.value for _, rs in rb.decode_batches(bytes(below)) for r in rs] == [b"a"]
        assert store.read(1, 1 << 20, Isolation.HIGH_WATERMARK) == b""
        assert len(list(rb.decode_batches(bytes(store.read(0, 1 << 20, Isolation.LOG_END))))) == 2  # a coordinator's replay
        await second.wait_durable()
        assert store.high_watermark == 2 and moved == [("t", 0), ("t", 0)] and fsyncs
        logs.close()

    asyncio.run(scenario())


def test_a_new_term_is_persisted_and_answered_after_a_restart(tmp_path) -> None:
    logs = LogManager(tmp_path, LogConfig(), "never")
    logs.create_topic("t", 1, {})
    store = logs.store("t", 0)
    _client_append(store, rb.encode_batch([rb.Record(0, 1, None, b"a")]))
    store.assign_leader_epoch(3)
    store.append(rb.encode_batch([rb.Record(0, 1, None, b"b")]), origin=AppendOrigin.COORDINATOR, now_ms=1,
                 leader_epoch=3)
    assert store.epoch_end_offset(0) == (0, 1) and store.epoch_end_offset(3) == (3, 2)
    logs.close()
    again = LogManager(tmp_path, LogConfig(), "never").store("t", 0)
    assert again.epoch_end_offset(0) == (0, 1) and again.latest_epoch() == 3 and again.epoch_at(1) == 3
