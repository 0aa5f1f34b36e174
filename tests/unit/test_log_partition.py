"""PartitionLog on real files: appends, reads across segment rolls, index lookups, offsets API."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.log.index import OffsetIndex
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.purgatory.clock import ManualClock
from kbroker.protocol.record_batch import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    decode_batches,
    encode_batch,
    iter_batches,
    set_log_append_time,
)

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256)


def batch(n: int = 3, ts: int = 1_000, key: bytes = b"k", value_size: int = 40) -> bytes:
    return encode_batch([Record(i, ts + i, key + str(i).encode(), b"v" * value_size) for i in range(n)])


def open_log(path: Path, config: LogConfig = SMALL, **kwargs: object) -> PartitionLog:
    return PartitionLog(path / "topic-0", "topic", 0, config, flush_policy="never", **kwargs)


def all_records(plog: PartitionLog, start: int = 0) -> list[Record]:
    out: list[Record] = []
    offset = start
    while offset < plog.log_end_offset:
        chunk = plog.read(offset, 10_000).records
        batches = list(decode_batches(chunk))
        assert batches, f"no batch returned at offset {offset}"
        for _, records in batches:
            out.extend(r for r in records if r.offset >= offset)
        offset = batches[-1][0].next_offset
    return out


def test_append_assigns_consecutive_offsets_and_epoch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    first = plog.append(batch(3), leader_epoch=4, now_ms=0)
    second = plog.append(batch(2), leader_epoch=5, now_ms=0)
    assert (first.base_offset, first.last_offset, first.log_append_time_ms) == (0, 2, -1)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert plog.log_end_offset == plog.high_watermark == 5
    headers = [h for _, h in iter_batches(plog.read(0, 10_000).records)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 5)]


def test_round_trip_across_segment_rolls(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(200):
        plog.append(batch(3, ts=10_000 + i * 10, key=b"b%d-" % i), leader_epoch=0, now_ms=0)
    assert len(plog.segments) > 5
    assert all(s.size <= SMALL.segment_bytes for s in plog.segments)
    names = sorted(p.name for p in (tmp_path / "topic-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert names == [f"{s.base_offset:020d}.log" for s in plog.segments]
    records = all_records(plog)
    assert [r.offset for r in records] == list(range(600))
    assert records[301].key == b"b100-1"


def test_read_starts_at_batch_holding_offset_for_every_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(120):
        plog.append(batch(1 + i % 4), leader_epoch=0, now_ms=0)
    for offset in range(plog.log_end_offset):
        chunk = plog.read(offset, 1).records  # max_bytes 1: exactly one whole batch
        [(pos, header)] = list(iter_batches(chunk))
        assert header.base_offset <= offset <= header.last_offset
        assert len(chunk) == header.size


def test_read_respects_max_bytes_with_whole_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=100))
    sizes = [plog.append(batch(2), leader_epoch=0, now_ms=0) for _ in range(50)]
    one = len(batch(2))
    chunk = plog.read(0, one * 7 + one // 2).records
    assert len(chunk) == one * 7
    assert [h.base_offset for _, h in iter_batches(chunk)] == [0, 2, 4, 6, 8, 10, 12]
    assert len(sizes) == 50


def test_min_one_batch_returns_oversized_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    big = batch(5, value_size=500)
    plog.append(big, leader_epoch=0, now_ms=0)
    assert len(plog.read(0, 100).records) == len(big)
    assert plog.read(0, 100, min_one_batch=False).records == b""


def test_offset_out_of_range(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(batch(3), leader_epoch=0, now_ms=0)
    assert plog.read(3, 1000).records == b""  # the log end offset itself is a valid, empty read
    for bad in (4, -1, 100):
        with pytest.raises(KafkaError) as exc_info:
            plog.read(bad, 1000)
        assert exc_info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_offset_index_is_sparse_and_lookups_land_at_or_before_target(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=300))
    for _ in range(60):
        plog.append(batch(2), leader_epoch=0, now_ms=0)
    segment = plog.active
    index = segment.offset_index
    assert 0 < len(index) < 60
    index.write_pending()  # entries reach the file in runs (index.py's _WRITE_RUN)
    reopened = OffsetIndex.load(index.path, 0, segment.size)
    assert reopened is not None and list(reopened.keys) == list(index.keys)
    positions = {h.base_offset: pos for pos, h in iter_batches(segment.read_at(0, segment.size))}
    for offset in range(plog.log_end_offset):
        position = index.lookup(offset)
        holder = max(p for b, p in positions.items() if b <= offset)
        assert position <= holder
        assert position in positions.values()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(100):  # timestamps 1000, 1001, 1002 | 1010, 1011, 1012 | ...
        plog.append(batch(3, ts=1_000 + 10 * i), leader_epoch=0, now_ms=0)
    assert len(plog.segments) > 2
    assert plog.offset_for_timestamp(0) == (0, 1_000)
    assert plog.offset_for_timestamp(1_001) == (1, 1_001)
    assert plog.offset_for_timestamp(1_003) == (3, 1_010)
    assert plog.offset_for_timestamp(1_505) == (153, 1_510)
    assert plog.offset_for_timestamp(1_992) == (299, 1_992)
    assert plog.offset_for_timestamp(1_993) is None


def test_a_search_with_a_budget_hands_back_a_batch_past_it_to_walk_elsewhere(tmp_path: Path) -> None:
    """A batch of more records than a request may still walk on the loop comes back as a BatchToWalk:
    its walk finds what the search without a budget finds, and a search resumed past it goes on in
    later batches. The budget is the request's: what one search walks, the next may not."""
    from kbroker.broker.storage.log.timestamp_search import BatchToWalk
    from kbroker.broker.storage.log.validation import InlineBudget

    plog = open_log(tmp_path, LogConfig())
    big = 70_000
    plog.append(encode_batch([Record(i, 1_000 + i // 1000, None, b"") for i in range(big)]), leader_epoch=0, now_ms=0)
    plog.append(batch(3, ts=5_000), leader_epoch=0, now_ms=0)
    found = plog.offset_for_timestamp(1_030, budget=InlineBudget())
    assert isinstance(found, BatchToWalk) and found.resume_offset == big
    assert found.walk() == plog.offset_for_timestamp(1_030) == (30_000, 1_030)
    assert plog.offset_for_timestamp(1_030, big, InlineBudget()) == (big, 5_000)  # resumed past it
    assert plog.offset_for_timestamp(4_000, budget=InlineBudget()) == (big, 5_000)  # its max is earlier: skipped
    assert plog.max_timestamp_offset(InlineBudget()) == (big + 2, 5_002)  # the small batch holds the max

    shared = InlineBudget(records=100)
    small = open_log(tmp_path / "small", LogConfig())
    for i in range(2):
        small.append(encode_batch([Record(j, 2_000 * (i + 1) + j, None, b"") for j in range(60)]), leader_epoch=0,
                     now_ms=0)
    assert small.offset_for_timestamp(2_010, budget=shared) == (10, 2_010)  # walked: 60 of the 100 spent
    handed = small.offset_for_timestamp(4_010, budget=shared)  # 60 more would pass it
    assert isinstance(handed, BatchToWalk) and handed.walk() == (70, 4_010)
    biggest = small.max_timestamp_offset(shared)
    assert isinstance(biggest, BatchToWalk) and biggest.walk() == (119, 4_059)


def test_max_timestamp_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert plog.max_timestamp_offset() == (-1, -1)
    plog.append(batch(3, ts=5_000), leader_epoch=0, now_ms=0)
    plog.append(encode_batch([Record(0, 9_000, b"a", b"1"), Record(1, 7_000, b"b", b"2")]), leader_epoch=0, now_ms=0)
    plog.append(batch(3, ts=6_000), leader_epoch=0, now_ms=0)
    assert plog.max_timestamp_offset() == (3, 9_000)


def test_message_too_large_and_record_list_too_large(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(max_message_bytes=300, segment_bytes=1_000))
    with pytest.raises(KafkaError) as exc_info:
        plog.append(batch(10), leader_epoch=0, now_ms=0)
    assert exc_info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    plog2 = PartitionLog(tmp_path / "t-1", "t", 1, LogConfig(segment_bytes=200), flush_policy="never")
    with pytest.raises(KafkaError) as exc_info:
        plog2.append(batch(10), leader_epoch=0, now_ms=0)
    assert exc_info.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert plog.log_end_offset == 0


def test_invalid_batch_is_not_written(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(KafkaError) as exc_info:
        plog.append(bytes(bad), leader_epoch=0, now_ms=0)
    assert exc_info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert plog.log_end_offset == 0 and plog.size_bytes == 0


def test_log_append_time_topic_rewrites_timestamps(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    info = plog.append(batch(2, ts=5), leader_epoch=0, now_ms=777_000)
    assert info.log_append_time_ms == 777_000
    [(header, records)] = list(decode_batches(plog.read(0, 1000).records))
    assert header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [777_000, 777_000]


def test_log_append_time_batches_per_kafkas_validate_timestamp(tmp_path: Path) -> None:
    """A producer's batch marked LogAppendTime: refused on a LogAppendTime topic (the broker sets that
    time), stored as CreateTime with the records' own timestamps on a CreateTime topic."""
    buf = bytearray(batch(2, ts=5_000))
    set_log_append_time(buf, 0, 9_999)
    plog = open_log(tmp_path)
    plog.append(bytes(buf), leader_epoch=0, now_ms=6_000)
    [(header, records)] = list(decode_batches(plog.read(0, 1000).records))
    assert header.timestamp_type == TIMESTAMP_CREATE_TIME and [r.timestamp for r in records] == [5_000, 5_001]
    appended = open_log(tmp_path / "lat", LogConfig(message_timestamp_type="LogAppendTime"))
    with pytest.raises(KafkaError) as exc_info:
        appended.append(bytes(buf), leader_epoch=0, now_ms=6_000)
    assert exc_info.value.code == ErrorCode.INVALID_TIMESTAMP


def test_compacted_topic_requires_keys(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(cleanup_policy="compact"))
    with pytest.raises(KafkaError) as exc_info:
        plog.append(encode_batch([Record(0, 1, None, b"v")]), leader_epoch=0, now_ms=0)
    assert exc_info.value.code == ErrorCode.INVALID_RECORD


def test_time_based_roll_uses_record_timestamps(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(segment_ms=1_000))
    plog.append(batch(1, ts=10_000), leader_epoch=0, now_ms=0)
    plog.append(batch(1, ts=10_900), leader_epoch=0, now_ms=0)
    assert len(plog.segments) == 1
    plog.append(batch(1, ts=11_001), leader_epoch=0, now_ms=0)
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_segment_times_come_from_the_log_clock(tmp_path: Path) -> None:
    """Without record timestamps a segment rolls by its creation time, which is the injected clock's."""
    clock = ManualClock(start_ms=0, wall_offset_ms=1_700_000_000_000)
    plog = open_log(tmp_path, LogConfig(segment_ms=1_000), clock=clock)
    assert plog.active.created_ms == clock.wall_ms()
    untimed = encode_batch([Record(0, -1, b"k", b"v")])  # timestamp -1: no record time
    plog.append(untimed, leader_epoch=0, now_ms=clock.wall_ms())
    clock.advance(999)
    plog.append(untimed, leader_epoch=0, now_ms=clock.wall_ms())
    assert len(plog.segments) == 1  # 999 ms of the clock's time: not yet
    clock.advance(2)
    plog.append(untimed, leader_epoch=0, now_ms=clock.wall_ms())
    assert len(plog.segments) == 2
    assert plog.active.created_ms == clock.wall_ms()


def test_reopen_after_close_gives_same_offsets(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(80):
        plog.append(batch(2, ts=i), leader_epoch=1, now_ms=0)
    before = (plog.log_end_offset, plog.log_start_offset, len(plog.segments), plog.max_timestamp_offset())
    records = all_records(plog)
    plog.close()
    for clean in (True, False):
        reopened = open_log(tmp_path, clean_shutdown=clean)
        assert (
            reopened.log_end_offset,
            reopened.log_start_offset,
            len(reopened.segments),
            reopened.max_timestamp_offset(),
        ) == before
        assert all_records(reopened) == records
        reopened.append(batch(1), leader_epoch=1, now_ms=0)
        assert reopened.log_end_offset == before[0] + 1
        reopened.truncate_to(before[0])
        reopened.close()


def test_truncate_to_removes_whole_batches_and_later_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for _ in range(100):
        plog.append(batch(3), leader_epoch=0, now_ms=0)
    segments_before = len(plog.segments)
    plog.truncate_to(31)  # inside the batch [30, 32]: that whole batch goes
    assert plog.log_end_offset == 30
    assert len(plog.segments) < segments_before
    assert [r.offset for r in all_records(plog)] == list(range(30))
    assert plog.append(batch(1), leader_epoch=0, now_ms=0).base_offset == 30
    plog.truncate_to(0)
    assert plog.log_end_offset == 0 and plog.size_bytes == 0


def test_delete_records_before_advances_log_start_and_survives_reopen(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for _ in range(100):
        plog.append(batch(3), leader_epoch=0, now_ms=0)
    segments_before = len(plog.segments)
    assert plog.delete_records_before(150) == 150
    assert plog.log_start_offset == 150
    assert len(plog.segments) < segments_before
    assert plog.segments[0].base_offset <= 150
    with pytest.raises(KafkaError):
        plog.read(149, 100)
    assert plog.read(150, 100).log_start_offset == 150
    with pytest.raises(KafkaError) as exc_info:
        plog.delete_records_before(1_000)
    assert exc_info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    plog.close()
    assert open_log(tmp_path).log_start_offset == 150


async def test_a_prune_within_a_segment_writes_its_checkpoint_off_the_loop_shared(tmp_path: Path) -> None:
    """A log start moved inside the first segment (the share coordinator's prune after each state
    write) is not written on the loop: durable_log_start writes it on a worker, one write for the prunes
    asked meanwhile; what a crash then finds is the moved start. A write made at once meanwhile (a new
    epoch) is never replaced by the older content."""
    from kbroker.broker.storage.log.checkpoint import read_checkpoint

    plog = open_log(tmp_path, LogConfig(segment_bytes=1 << 20))
    for _ in range(10):
        plog.append(batch(3), leader_epoch=0, now_ms=0)
    directory = str(plog.directory)
    before = read_checkpoint(directory, "t", 0).log_start_offset
    assert plog.delete_records_before(6) == 6 and len(plog.segments) == 1
    assert read_checkpoint(directory, "t", 0).log_start_offset == before  # nothing written on the loop
    first = plog.durable_log_start()
    assert first is not None and plog.durable_log_start() is None  # asked once per move
    assert plog.delete_records_before(9) == 9
    second = plog.durable_log_start()
    assert second is not None
    plog.assign_leader_epoch(4)  # written at once, while the worker's writes wait
    await first
    await second
    found = read_checkpoint(directory, "t", 0)
    assert found.log_start_offset == 9 and found.epochs.latest_epoch() == 4
    plog.close()
    assert open_log(tmp_path, LogConfig(segment_bytes=1 << 20)).log_start_offset == 9


def test_index_entries_reach_the_file_in_runs_and_all_of_them_at_close(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=1))  # an entry for every batch but the first
    index = plog.active.offset_index
    for _ in range(5):
        plog.append(batch(1), leader_epoch=0, now_ms=0)
    assert len(index) == 4 and index.path.stat().st_size == 0  # held back: one pwrite per run
    for _ in range(600):  # past a run of 4096 bytes (512 entries of 8 bytes)
        plog.append(batch(1), leader_epoch=0, now_ms=0)
    assert len(index) == 604 and index.path.stat().st_size == 512 * 8
    path, keys = index.path, list(index.keys)
    plog.close()
    reopened = OffsetIndex.load(path, 0, 1 << 30)
    assert reopened is not None and list(reopened.keys) == keys


def test_index_entries_not_yet_written_survive_a_truncation(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=1))
    for _ in range(10):
        plog.append(batch(1), leader_epoch=0, now_ms=0)
    plog.truncate_to(6)
    index = plog.active.offset_index
    assert list(index.keys) == list(range(1, 6))
    assert index.path.stat().st_size == 5 * 8  # recovery after the cut writes its rebuilt index
    plog.append(batch(1), leader_epoch=0, now_ms=0)
    path, keys = index.path, list(index.keys)
    plog.close()
    reopened = OffsetIndex.load(path, 0, 1 << 30)
    assert reopened is not None and list(reopened.keys) == keys == list(range(1, 7))
