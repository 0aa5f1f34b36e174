"""Damage written while the broker is stopped after a CLEAN shutdown (the case recovery used to skip):
cut segments, damaged length fields and magic bytes, rotten CRCs below the recovery point, a tail cut
on a batch boundary. Each test builds a log, closes it cleanly, damages the files, reopens it as the
manager would after a clean start, and checks what is served, what is appended and what is logged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from kbroker.broker.storage.log import LogConfig, LogManager, PartitionLog
from kbroker.broker.storage.log.files import FILES, FileHandleCache
from kbroker.protocol.errors import CorruptRecordError
from kbroker.protocol.record_batch import Record, decode_batches, encode_batch, iter_batches

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=200)


def batch(i: int) -> bytes:
    return encode_batch([Record(j, 1_000 + i, b"key-%d-%d" % (i, j), b"value-%d" % i) for j in range(2)])


def build(path: Path, batches: int = 60) -> tuple[PartitionLog, list[int]]:
    plog = PartitionLog(path / "t-0", "t", 0, CONFIG, flush_policy="never")
    for i in range(batches):
        plog.append(batch(i), leader_epoch=0, now_ms=0)
    bases = [s.base_offset for s in plog.segments]
    plog.close()
    return plog, bases


def reopen_clean(path: Path) -> PartitionLog:
    return PartitionLog(path / "t-0", "t", 0, CONFIG, flush_policy="never", clean_shutdown=True)


def segment_file(path: Path, base: int) -> Path:
    return path / "t-0" / f"{base:020d}.log"


def readable_offsets(plog: PartitionLog) -> list[int]:
    """Every offset a consumer gets, skipping damaged batches the way an operator's seek would."""
    out: list[int] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        try:
            chunk = plog.read(offset, 100_000).records
        except CorruptRecordError as e:
            offset = e.resume_offset
            continue
        decoded = list(decode_batches(chunk))
        if not decoded:
            break
        out.extend(r.offset for _, records in decoded for r in records if r.offset >= offset)
        offset = decoded[-1][0].next_offset
    return out


def test_cut_mid_batch_after_clean_shutdown_is_recovered_not_reindexed(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    file = segment_file(tmp_path, bases[-1])
    positions = [p for p, _ in iter_batches(file.read_bytes())]
    os.truncate(file, positions[-3] + 30)  # mid-batch; the index still points past the new end
    with capture_logs() as logs:
        log = reopen_clean(tmp_path)
    [cut] = [e for e in logs if e["event"] == "log_truncated_on_recovery"]
    assert cut["position"] == positions[-3] and cut["log_level"] == "warning"
    assert file.stat().st_size == positions[-3]
    assert [e for e in logs if e["event"] == "log_end_behind_checkpoint"]
    # new appends never land behind the partial batch, and their offsets are not ones handed out before
    info = log.append(batch(100), leader_epoch=0, now_ms=0)
    assert info.base_offset == end
    assert readable_offsets(log) == list(range(end - 6)) + [end, end + 1]
    log.close()
    again = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, flush_policy="never")  # and after a crash too
    assert readable_offsets(again) == list(range(end - 6)) + [end, end + 1]


def test_cut_of_an_old_segment_keeps_the_segments_after_it(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    assert len(bases) >= 3
    end = plog.log_end_offset
    first = segment_file(tmp_path, bases[0])
    positions = [p for p, _ in iter_batches(first.read_bytes())]
    os.truncate(first, positions[-1] + 5)
    with capture_logs() as logs:
        log = reopen_clean(tmp_path)
    assert [e for e in logs if e["event"] == "segment_truncated_in_middle_of_log"]
    assert log.log_end_offset == end
    lost = set(range(bases[1] - 2, bases[1]))
    assert readable_offsets(log) == [o for o in range(end) if o not in lost]


def test_cut_on_a_batch_boundary_keeps_offsets_moving_forward(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    file = segment_file(tmp_path, bases[-1])
    positions = [p for p, _ in iter_batches(file.read_bytes())]
    os.truncate(file, positions[-2])  # whole batches gone: nothing is torn, the index may still fit
    (tmp_path / "t-0" / f"{bases[-1]:020d}.index").write_bytes(b"")
    with capture_logs() as logs:
        log = reopen_clean(tmp_path)
    [behind] = [e for e in logs if e["event"] == "log_end_behind_checkpoint"]
    assert behind["offsets_lost"] == 4 and behind["log_level"] == "warning"
    assert log.log_end_offset == end
    assert log.append(batch(1), leader_epoch=0, now_ms=0).base_offset == end


@pytest.mark.parametrize("damage", ["length", "magic", "crc"])
def test_damage_below_the_recovery_point_is_answered_as_corrupt(tmp_path: Path, damage: str) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    file = segment_file(tmp_path, bases[0])
    data = bytearray(file.read_bytes())
    positions = [p for p, _ in iter_batches(bytes(data))]
    target = positions[len(positions) // 2]
    if damage == "length":
        data[target + 8 : target + 12] = (10**6).to_bytes(4, "big")
    elif damage == "magic":
        data[target + 16] = 7
    else:
        data[target + 70] ^= 0x40
    file.write_bytes(bytes(data))
    with capture_logs() as logs:
        log = reopen_clean(tmp_path)  # the index is intact: the segment is not rescanned
        damaged_offset = bases[0] + 2 * (len(positions) // 2)
        with pytest.raises(CorruptRecordError) as raised:
            log.read(damaged_offset, 100_000)
    assert raised.value.code == 2
    [event] = [e for e in logs if e["event"] == "corrupt_batch_on_read"]
    assert event["log_level"] == "error" and event["file"] == str(file) and event["position"] == target
    # a reader positioned before the damage gets the good batches, then the error: never garbage
    served = log.read(bases[0], 100_000).records
    assert all(b.base_offset < damaged_offset for b, _ in decode_batches(served))
    # everything past the damaged batch stays readable (the index finds batch starts past a bad length)
    readable = readable_offsets(log)
    assert readable[-1] == end - 1 and damaged_offset not in readable
    assert len(readable) >= end - (4 if damage == "crc" else 2 * len(positions))


def test_file_descriptors_stay_within_the_cache(tmp_path: Path) -> None:
    cache_capacity = FILES.capacity
    FILES.capacity = 16
    try:
        manager = LogManager(tmp_path, LogConfig(index_interval_bytes=50), "never")
        manager.create_topic("many", 200, {})
        for p in range(200):
            manager.get_log("many", p).append(batch(p), leader_epoch=0, now_ms=0)
        assert len(FILES) <= 16
        assert all(manager.get_log("many", p).read(0, 10_000).records for p in range(200))
        manager.close()
        assert len(os.listdir(f"/proc/{os.getpid()}/fd")) < 200
        reopened = LogManager(tmp_path, LogConfig(index_interval_bytes=50), "never")
        assert [reopened.get_log("many", p).log_end_offset for p in range(200)] == [2] * 200
        reopened.close()
    finally:
        FILES.capacity = cache_capacity


def test_a_leased_descriptor_survives_eviction_and_forget(tmp_path: Path) -> None:
    cache = FileHandleCache(8)
    paths = [tmp_path / f"f{i}" for i in range(20)]
    with cache.lease(paths[0], create=True) as held:
        for p in paths[1:]:
            with cache.lease(p, create=True) as fd:
                os.write(fd, b"x")
        cache.forget(paths[0])
        os.write(held, b"still open")  # neither eviction nor forget closed it under us
    assert paths[0].read_bytes() == b"still open"
    assert len(cache) <= 8


def test_compaction_keeps_a_rotten_batch_as_it_is_and_still_answers_corrupt(tmp_path: Path) -> None:
    from kbroker.broker.storage.log.compaction import compact

    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, cleanup_policy="compact")
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config, flush_policy="never")
    for i in range(60):  # keys repeat, so compaction has work to do
        plog.append(encode_batch([Record(0, 1_000 + i, b"key-%d" % (i % 5), b"value-%d" % i)]),
                    leader_epoch=0, now_ms=0)
    plog.close()
    file = segment_file(tmp_path, 0)
    victim = list(iter_batches(file.read_bytes()))[3][0]
    data = bytearray(file.read_bytes())
    data[victim + 70] ^= 0x21
    file.write_bytes(bytes(data))
    log = PartitionLog(tmp_path / "t-0", "t", 0, config, flush_policy="never", clean_shutdown=True)
    stats = compact(log, now_ms=10_000)
    assert stats.segments_rewritten >= 1
    with pytest.raises(CorruptRecordError):
        log.read(3, 100_000)
    assert readable_offsets(log)[-1] == log.log_end_offset - 1


def test_an_old_segment_cut_on_a_batch_boundary_is_noticed(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    first = segment_file(tmp_path, bases[0])
    positions = [p for p, _ in iter_batches(first.read_bytes())]
    os.truncate(first, positions[-2])  # two whole batches gone; nothing is torn
    with capture_logs() as logs:
        log = reopen_clean(tmp_path)
    [gap] = [e for e in logs if e["event"] == "log_gap_between_segments"]
    assert gap["log_level"] == "warning"
    assert (gap["lost_from_offset"], gap["lost_to_offset"]) == (bases[1] - 4, bases[1] - 1)
    assert log.log_end_offset == end


@pytest.mark.parametrize("damage", ["length", "magic"])
def test_damaged_framing_in_the_active_segment_keeps_the_batches_behind_it(tmp_path: Path, damage: str) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    file = segment_file(tmp_path, bases[-1])
    positions = [p for p, _ in iter_batches(file.read_bytes())]
    target = positions[1]
    data = bytearray(file.read_bytes())
    if damage == "length":
        data[target + 8 : target + 12] = (10**6).to_bytes(4, "big")
    else:
        data[target + 16] = 9
    file.write_bytes(bytes(data))
    with capture_logs() as logs:
        log = reopen_clean(tmp_path)
    assert not [e for e in logs if e["event"] == "log_truncated_on_recovery"]
    [kept] = [e for e in logs if e["event"] == "corrupt_batch_on_recovery"]
    assert kept["log_level"] == "error" and kept["position"] == target
    assert log.log_end_offset == end
    readable = readable_offsets(log)
    assert readable[-1] == end - 1
    lost = set(range(bases[-1], end)) - set(readable)
    assert set(range(bases[-1] + 2, bases[-1] + 4)) <= lost  # the damaged batch
    assert len(lost) <= 8  # and at most the batches up to the next index entry (index.interval.bytes 200)
    assert log.append(batch(1), leader_epoch=0, now_ms=0).base_offset == end
    log.close()
    # a crash later finds the same: the damage is walked past again, nothing appended is cut
    again = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, flush_policy="never")
    assert again.log_end_offset == end + 2
    assert readable_offsets(again) == readable + [end, end + 1]


def test_compaction_leaves_a_segment_it_cannot_walk_alone(tmp_path: Path) -> None:
    from kbroker.broker.storage.log.compaction import compact

    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, cleanup_policy="compact")
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config, flush_policy="never")
    for i in range(60):
        plog.append(encode_batch([Record(0, 1_000 + i, b"key-%d" % (i % 5), b"value-%d" % i)]),
                    leader_epoch=0, now_ms=0)
    plog.close()
    file = segment_file(tmp_path, 0)
    before = file.read_bytes()
    victim = list(iter_batches(before))[3][0]
    damaged = bytearray(before)
    damaged[victim + 8 : victim + 12] = (10**6).to_bytes(4, "big")
    file.write_bytes(bytes(damaged))
    log = PartitionLog(tmp_path / "t-0", "t", 0, config, flush_policy="never", clean_shutdown=True)
    with capture_logs() as logs:
        compact(log, now_ms=10_000)
    assert [e for e in logs if e["event"] == "compaction_skipped_damaged_segment"]
    assert file.read_bytes() == bytes(damaged)  # untouched: a rewrite would have dropped all behind the damage
