"""__consumer_offsets persistence: Kafka's record formats, appends, and replay from a real log."""

from __future__ import annotations

import asyncio
import struct
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.broker.storage.log.manager import LogManager
from kbroker.broker.coordinators.offsets_topic import TOPIC, TOPIC_CONFIGS, OffsetsTopic
from kbroker.broker.partitions.service import PartitionService
from kbroker.protocol.records.codec import decode_record, encode_record
from kbroker.protocol.records.classic_records import (
    GroupMetadataMember,
    GroupMetadataRecord,
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
)

COMMIT = OffsetCommitRecord("my-group", "orders", 3, 1234, 7, "meta", 1_700_000_000_000)
GROUP = GroupMetadataRecord(
    group="my-group", protocol_type="consumer", generation=5, protocol="range", leader="m1",
    current_state_timestamp=1_700_000_000_123,
    members=(GroupMetadataMember("m1", None, "c1", "/127.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01as"),
             GroupMetadataMember("m2", "inst-2", "c2", "/127.0.0.2", 300000, 45000, b"", b"")),
)


@pytest.mark.parametrize("record", [
    COMMIT,
    OffsetCommitRecord("g", "t", 0, 0, -1, "", 5, expire_timestamp=99),
    OffsetCommitTombstone("g", "t", 1),
    GROUP,
    GroupMetadataRecord("empty", "consumer", 2, None, None, 10),
    GroupMetadataTombstone("g"),
])
def test_record_round_trip(record) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record


def test_offset_commit_bytes_follow_kafkas_layout() -> None:
    key, value = encode_record(COMMIT)
    # key: int16 type 1, then OffsetCommitKey v0: group, topic (int16-length strings), partition
    assert key == struct.pack(">hh8sh6si", 1, 8, b"my-group", 6, b"orders", 3)
    # value: int16 version 4 (flexible): offset, leader epoch, compact metadata, commit ts, empty tags
    assert value == struct.pack(">hqi", 4, 1234, 7) + b"\x05meta" + struct.pack(">q", 1_700_000_000_000) + b"\x00"
    _, legacy_value = encode_record(OffsetCommitRecord("g", "t", 0, 1, -1, "", 5, expire_timestamp=99))
    assert legacy_value[:2] == b"\x00\x01"  # explicit expiry keeps the v1 value, as Kafka writes it
    _, group_value = encode_record(GROUP)
    assert group_value[:2] == b"\x00\x03"  # GroupMetadataValue v3


async def test_append_then_replay_from_the_log(tmp_path) -> None:
    logs = LogManager(tmp_path, flush_policy="always")
    topic = OffsetsTopic(PartitionService.offline(logs), 50)
    assert topic.ensure() == 50
    assert logs.topics()[TOPIC].config.compact
    await topic.append_records(12, [GROUP, COMMIT])
    await topic.append_records(12, [OffsetCommitTombstone("my-group", "orders", 3)])
    await topic.append_records(0, [COMMIT])
    logs.close()

    reopened = LogManager(tmp_path, flush_policy="always")
    again = OffsetsTopic(PartitionService.offline(reopened), 50)
    assert again.ensure() == 50
    # the replay gets the last record per key (what compaction keeps): the tombstone replaces the commit
    replay = again.read_partition(12)
    assert replay.records == [GROUP, OffsetCommitTombstone("my-group", "orders", 3)]
    assert replay.read == 3
    assert again.read_partition(0).records == [COMMIT]
    assert again.read_partition(1).records == []
    reopened.close()


def test_replay_applies_transactional_offsets_at_their_commit_marker(tmp_path) -> None:
    from kbroker.protocol.control_records import encode_marker
    from kbroker.protocol.record_batch import Record as LogRecord
    from kbroker.protocol.record_batch import encode_batch

    logs = LogManager(tmp_path, flush_policy="never")
    topic = OffsetsTopic(PartitionService.offline(logs), 50)
    topic.ensure()
    plog = logs.get_log(TOPIC, 7)

    def txn(pid: int, offset: int) -> None:
        key, value = encode_record(OffsetCommitRecord("g", "t", pid, offset, -1, "", 5))
        plog.append(encode_batch([LogRecord(0, 5, key, value)], producer_id=pid, producer_epoch=0, base_sequence=0,
                                 is_transactional=True), leader_epoch=0, now_ms=0)

    def end(pid: int, commit: bool) -> None:
        plog.append(encode_marker(pid, 0, commit, 0, 5), leader_epoch=0, now_ms=0, control=True)

    txn(1, 10)  # committed
    txn(2, 20)  # aborted
    txn(3, 30)  # still open at the "crash"
    plain_key, plain_value = encode_record(OffsetCommitRecord("g", "t", 1, 5, -1, "", 4))
    plog.append(encode_batch([LogRecord(0, 4, plain_key, plain_value)]), leader_epoch=0, now_ms=0)
    end(2, commit=False)
    other_key, other_value = encode_record(OffsetCommitRecord("g", "t", 0, 7, -1, "", 4))
    plog.append(encode_batch([LogRecord(0, 4, other_key, other_value)]), leader_epoch=0, now_ms=0)
    end(1, commit=True)
    later_key, later_value = encode_record(OffsetCommitRecord("g", "t", 9, 8, -1, "", 6))
    plog.append(encode_batch([LogRecord(0, 6, later_key, later_value)]), leader_epoch=0, now_ms=0)
    replay = topic.read_partition(7)
    # the committed transaction's offset lands at its marker, so it supersedes the plain commit written
    # before it and is replayed after the commit written before the marker; the aborted and the open
    # transactions' offsets are not replayed
    assert [(r.partition, r.offset) for r in replay.records] == [(0, 7), (1, 10), (9, 8)]
    assert replay.read == 6
    assert [(r.partition, r.offset) for r in topic.open_txn_offsets[7][3]] == [(3, 30)]
    assert 2 not in topic.open_txn_offsets[7]
    logs.close()


_GROUPS = ["g1", "g2"]  # both on one partition of a 1-partition topic
_member = GroupMetadataMember("m1", None, "c1", "/127.0.0.1", 300000, 45000, b"s", b"a")
_classic_records = st.one_of(
    st.builds(OffsetCommitRecord, st.sampled_from(_GROUPS), st.sampled_from(["t", "u"]), st.integers(0, 2),
              st.integers(0, 10**6), st.integers(-1, 5), st.sampled_from(["", "m"]), st.integers(0, 10**12),
              st.one_of(st.none(), st.integers(0, 10**12))),
    st.builds(OffsetCommitTombstone, st.sampled_from(_GROUPS), st.sampled_from(["t", "u"]), st.integers(0, 2)),
    st.builds(GroupMetadataRecord, st.sampled_from(_GROUPS), st.sampled_from(["consumer", ""]), st.integers(0, 9),
              st.sampled_from(["range", None]), st.sampled_from(["m1", None]), st.integers(-1, 10**12),
              st.sampled_from([(), (_member,)])),
    st.builds(GroupMetadataTombstone, st.sampled_from(_GROUPS)),
)


def _state(machine) -> dict:
    """What a client can see of the loaded groups: which exist, their protocol, generation, members, offsets."""
    return {gid: (g.protocol_type, g.generation_id, sorted(g.members),
                  {tp: (o.offset, o.leader_epoch, o.metadata, o.commit_timestamp, o.expire_timestamp)
                   for tp, o in machine.offsets.of(gid).items()})
            for gid, g in machine.groups.items()}


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(_classic_records, min_size=1, max_size=6), min_size=1, max_size=8))
def test_replaying_the_last_record_per_key_loads_what_replaying_every_record_loads(batches) -> None:
    from kbroker.coordinator.groups.shard import GroupCoordinatorShard

    with tempfile.TemporaryDirectory() as tmp:
        logs = LogManager(tmp, flush_policy="never")
        topic = OffsetsTopic(PartitionService.offline(logs), 1)
        topic.ensure()

        async def write() -> None:
            for batch in batches:
                await topic.append_records(0, batch)

        asyncio.run(write())
        replay = topic.read_partition(0)
        logs.close()
    every = [decode_record(*encode_record(r)) for batch in batches for r in batch]  # as stored
    assert replay.read == len(every)
    full, latest = GroupCoordinatorShard(0), GroupCoordinatorShard(0)
    full.load_partition(every, 0)
    latest.load_partition(replay.records, 0)
    assert _state(latest) == _state(full)


_text = st.text(max_size=140)  # metadata past 126 characters takes the generic path


@settings(max_examples=300, deadline=None)
@given(record=st.one_of(
    st.builds(OffsetCommitRecord, _text, _text, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
              st.integers(-(2**31), 2**31 - 1), _text, st.integers(-(2**63), 2**63 - 1),
              st.one_of(st.none(), st.integers(0, 2**62))),
    st.builds(OffsetCommitTombstone, _text, _text, st.integers(-(2**31), 2**31 - 1)),
))
def test_the_offset_commit_fast_path_decodes_what_the_generic_codec_decodes(record) -> None:
    from unittest import mock

    from kbroker.protocol.records import codec as record_codec

    key, value = encode_record(record)
    with mock.patch.object(record_codec, "_decode_offset_commit", lambda *_: None):
        generic = decode_record(key, value)
    assert decode_record(key, value) == generic
    if getattr(record, "expire_timestamp", None) is None:  # (value v1, with an expiry, has no leader epoch)
        assert generic == record


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=40), value=st.one_of(st.none(), st.binary(max_size=40)))
def test_the_offset_commit_fast_path_fails_or_falls_back_on_garbage(key: bytes, value: bytes | None) -> None:
    from unittest import mock

    from kbroker.protocol.records import codec as record_codec

    key = b"\x00\x01" + key
    with mock.patch.object(record_codec, "_decode_offset_commit", lambda *_: None):
        try:
            generic = decode_record(key, value)
        except Exception:
            generic = None
    try:
        fast = decode_record(key, value)
    except Exception:
        fast = None
    assert fast == generic


# --- the write path: records taken in one turn of the loop become one batch ---------------------------

def _batches(logs: LogManager, partition: int) -> list[list[OffsetCommitRecord]]:
    from kbroker.protocol.record_batch import decode_batches

    plog = logs.get_log(TOPIC, partition)
    data = plog.read(plog.log_start_offset, 1 << 20).records
    return [[decode_record(r.key, r.value) for r in records] for _, records in decode_batches(bytes(data))]


def _commit(offset: int) -> OffsetCommitRecord:
    return OffsetCommitRecord("g", "t", 0, offset, -1, "", 1_700_000_000_000)


async def test_appends_in_one_turn_of_the_loop_share_one_batch_and_one_wait(tmp_path) -> None:
    import asyncio

    fsyncs: list[int] = []
    logs = LogManager(tmp_path, flush_policy="always", fsync=fsyncs.append)
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    topic.ensure()
    plog = logs.get_log(TOPIC, 1)
    waits = [topic.append_records_nowait(1, [_commit(i)]) for i in range(5)]
    assert plog.log_end_offset == 0  # held until the end of this turn of the loop
    await asyncio.gather(*waits)
    assert plog.log_end_offset == 5 and plog.flusher.durable_offset == 5
    assert _batches(logs, 1) == [[_commit(i) for i in range(5)]]
    await topic.append_records(1, [_commit(5)])  # a later turn: a batch of its own
    assert _batches(logs, 1)[1:] == [[_commit(5)]]
    logs.close()


async def test_another_append_to_the_log_writes_the_held_records_first(tmp_path) -> None:
    """A transactional offset commit or a marker appended meanwhile lands after what was taken before it."""
    from kbroker.protocol.record_batch import Record as LogRecord, encode_batch

    logs = LogManager(tmp_path, flush_policy="always")
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    topic.ensure()
    plog = logs.get_log(TOPIC, 2)
    held = topic.append_records_nowait(2, [_commit(1)])
    key, value = encode_record(_commit(2))
    plog.append(encode_batch([LogRecord(offset=0, timestamp=1, key=key, value=value)]), leader_epoch=0, now_ms=1)
    await held
    assert _batches(logs, 2) == [[_commit(1)], [_commit(2)]]
    logs.close()


async def test_a_failed_held_write_fails_its_waits_with_a_storage_error(tmp_path) -> None:
    from kbroker.protocol.errors import ErrorCode, KafkaError

    logs = LogManager(tmp_path, flush_policy="always")
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    topic.ensure()
    plog = logs.get_log(TOPIC, 3)

    def full_disk(*_args) -> None:
        raise OSError(28, "No space left on device")

    plog.active.append = full_disk
    waits = [topic.append_records_nowait(3, [_commit(i)]) for i in range(3)]
    for wait in waits:
        with pytest.raises(KafkaError) as failed:
            await wait
        assert failed.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError) as refused:  # the log is fenced: refused at once from now on
        topic.append_records_nowait(3, [_commit(4)])
    assert refused.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    logs.close()


async def test_records_larger_than_a_held_batch_are_written_at_once(tmp_path) -> None:
    logs = LogManager(tmp_path, flush_policy="never")
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    topic.ensure()
    plog = logs.get_log(TOPIC, 0)
    small = topic.append_records_nowait(0, [_commit(0)])
    big = [OffsetCommitRecord("g", "t", p, 1, -1, "m" * 4000, 1) for p in range(100)]  # ~400 KB
    wait = topic.append_records_nowait(0, big)
    assert plog.log_end_offset == 101  # the held record first, then the large set, both written now
    await small
    await wait
    assert [len(b) for b in _batches(logs, 0)] == [1, 100]
    logs.close()


async def test_a_held_batch_stays_within_a_lowered_max_message_bytes(tmp_path) -> None:
    """Three commits of ~800 bytes in one turn, max.message.bytes 2,000: held together they would make
    one 2.4 kB batch, which the log refuses, failing all three (and unloading the partition)."""
    logs = LogManager(tmp_path, flush_policy="never")
    logs.create_topic(TOPIC, 4, {**TOPIC_CONFIGS, "max.message.bytes": "2000"})
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    plog = logs.get_log(TOPIC, 0)
    commits = [OffsetCommitRecord("g", "t", p, 1, -1, "m" * 700, 1) for p in range(3)]
    waits = [topic.append_records_nowait(0, [c]) for c in commits]
    for wait in waits:
        await wait
    assert [r for batch in _batches(logs, 0) for r in batch] == commits
    data = bytes(plog.read(plog.log_start_offset, 1 << 20).records)
    from kbroker.protocol.record_batch import iter_batches

    assert [header.size <= 2000 for _, header in iter_batches(data)] == [True, True]
    logs.close()


async def test_records_taken_during_an_fsync_are_written_after_it_in_one_batch(tmp_path) -> None:
    import asyncio
    import threading

    release = threading.Event()
    started = threading.Event()

    def slow_fsync(fd: int) -> None:
        started.set()
        release.wait(10)

    logs = LogManager(tmp_path, flush_policy="always", fsync=slow_fsync)
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    topic.ensure()
    plog = logs.get_log(TOPIC, 1)
    first = asyncio.ensure_future(topic.append_records(1, [_commit(0)]))
    while not started.is_set():  # the first batch is written and its fsync is running
        await asyncio.sleep(0.001)
    later = [topic.append_records_nowait(1, [_commit(i)]) for i in (1, 2)]
    await asyncio.sleep(0.01)
    assert plog.log_end_offset == 1  # held while the fsync runs
    release.set()
    await first
    await asyncio.gather(*later)
    assert plog.flusher.durable_offset == 3
    assert _batches(logs, 1) == [[_commit(0)], [_commit(1), _commit(2)]]
    logs.close()


async def test_records_held_at_close_go_out_with_the_final_flush(tmp_path) -> None:
    logs = LogManager(tmp_path, flush_policy="always")
    topic = OffsetsTopic(PartitionService.offline(logs), 4)
    topic.ensure()
    wait = topic.append_records_nowait(2, [_commit(7)])
    logs.close()  # before the end of this turn of the loop: the final flush covers the held record
    await wait
    reopened = LogManager(tmp_path, flush_policy="always")
    again = OffsetsTopic(PartitionService.offline(reopened), 4)
    again.ensure()
    assert again.read_partition(2).records == [_commit(7)]
    reopened.close()
