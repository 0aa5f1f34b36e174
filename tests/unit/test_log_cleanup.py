"""Retention (delete policy) and compaction (compact policy) on real segment files."""

from __future__ import annotations

from pathlib import Path

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.log.compaction import compact
from kbroker.broker.storage.log.retention import apply_retention
from kbroker.protocol.record_batch import COMPRESSION_GZIP, Record, decode_batches, encode_batch

DAY = 86_400_000


def open_log(path: Path, config: LogConfig) -> PartitionLog:
    return PartitionLog(path / "t-0", "t", 0, config, flush_policy="never")


def filled(path: Path, config: LogConfig, batches: int, ts_step: int = 1_000) -> PartitionLog:
    plog = open_log(path, config)
    for i in range(batches):
        plog.append(
            encode_batch([Record(j, i * ts_step, b"k%d" % j, b"x" * 100) for j in range(2)]),
            leader_epoch=0,
            now_ms=0,
        )
    return plog


def records(plog: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        decoded = list(decode_batches(plog.read(offset, 1_000_000).records))
        for _, recs in decoded:
            out.extend(r for r in recs if r.offset >= offset)
        offset = decoded[-1][0].next_offset
    return out


# --- retention ----------------------------------------------------------------------------------------


def test_retention_by_time_deletes_old_segments_and_advances_log_start(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1_000, retention_ms=10_000)
    plog = filled(tmp_path, config, 40)  # timestamps 0 .. 39_000
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 4
    maxima = {s.base_offset: s.max_timestamp for s in plog.segments}
    deleted = apply_retention(plog, now_ms=45_000)  # expires segments whose newest record is < 35_000
    assert deleted == sum(1 for ts in maxima.values() if ts < 35_000) > 0
    assert all(s.max_timestamp >= 35_000 for s in plog.segments)
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    assert [r.offset for r in records(plog)] == list(range(plog.log_start_offset, 80))
    assert not (tmp_path / "t-0" / f"{bases[0]:020d}.log").exists()
    plog.close()
    assert open_log(tmp_path, config).log_start_offset == plog.log_start_offset


def test_retention_by_time_rolls_an_expired_active_segment(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1_000, retention_ms=1_000)
    plog = filled(tmp_path, config, 20)
    apply_retention(plog, now_ms=10 * DAY)
    assert plog.log_start_offset == plog.log_end_offset == 40
    assert len(plog.segments) == 1 and plog.active.size == 0
    assert plog.append(encode_batch([Record(0, 1, b"a", b"b")]), leader_epoch=0, now_ms=0).base_offset == 40


def test_retention_by_size_keeps_total_under_limit(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1_000, retention_bytes=2_500, retention_ms=-1)
    plog = filled(tmp_path, config, 40)
    sizes = [s.size for s in plog.segments]
    assert sum(sizes) > 2_500
    deleted = apply_retention(plog, now_ms=0)
    assert deleted > 0
    # Kafka's rule: delete oldest segments while the log stays at or above retention.bytes without
    # them, so what remains exceeds the limit by less than its oldest segment.
    assert plog.size_bytes == sum(sizes[deleted:])
    assert 0 <= plog.size_bytes - 2_500 < plog.segments[0].size
    assert plog.log_start_offset == plog.segments[0].base_offset


def test_no_retention_for_compact_only_topics(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1_000, retention_ms=1, cleanup_policy="compact")
    plog = filled(tmp_path, config, 20)
    assert apply_retention(plog, now_ms=10 * DAY) == 0
    assert plog.log_start_offset == 0


# --- compaction ---------------------------------------------------------------------------------------


def keyed(key: bytes, value: bytes | None, ts: int) -> bytes:
    return encode_batch([Record(0, ts, key, value)])


def test_compaction_keeps_newest_per_key_with_original_offsets(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=600, cleanup_policy="compact")
    plog = open_log(tmp_path, config)
    expected: dict[bytes, tuple[int, bytes]] = {}
    for i in range(60):
        key = b"key-%d" % (i % 7)
        value = b"value-%d" % i
        info = plog.append(keyed(key, value, ts=1_000 + i), leader_epoch=0, now_ms=0)
        expected[key] = (info.base_offset, value)
    assert len(plog.segments) > 3
    end = plog.log_end_offset
    stats = compact(plog, now_ms=2_000)
    assert stats.segments_rewritten > 0
    assert stats.records_after < stats.records_before
    survivors = records(plog)
    assert plog.log_end_offset == end
    newest = {r.key: (r.offset, r.value) for r in survivors}
    assert newest == expected
    # closed segments keep only newest records; the active segment is never rewritten
    active_base = plog.active.base_offset
    closed = [r for r in survivors if r.offset < active_base]
    assert all(expected[r.key][0] == r.offset for r in closed)
    offsets = [r.offset for r in survivors]
    assert offsets == sorted(offsets)


def test_compaction_splits_batches_and_preserves_offsets(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=10_000, cleanup_policy="compact")
    plog = open_log(tmp_path, config)
    recs = [Record(i, 100 + i, b"k%d" % (i % 3), b"v%d" % i) for i in range(9)]
    plog.append(encode_batch(recs, compression=COMPRESSION_GZIP), leader_epoch=2, now_ms=0)
    plog.roll()
    plog.append(keyed(b"k0", b"newest", 500), leader_epoch=2, now_ms=0)  # offset 9
    compact(plog, now_ms=1_000)
    [(header, kept)] = list(decode_batches(plog.read(0, 100_000).records))
    [(_, tail)] = list(decode_batches(plog.read(9, 100_000).records))
    assert [(r.offset, r.key, r.value) for r in kept] == [(7, b"k1", b"v7"), (8, b"k2", b"v8")]
    assert header.compression == COMPRESSION_GZIP and header.partition_leader_epoch == 2
    assert header.base_offset == 7 and header.last_offset == 8
    assert [(r.offset, r.value) for r in tail] == [(9, b"newest")]
    # reading from an offset that compaction removed returns the next surviving batch
    [(h, _)] = list(decode_batches(plog.read(3, 100_000).records))[:1]
    assert h.base_offset == 7


def test_compaction_drops_old_tombstones_only(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=10_000, cleanup_policy="compact", delete_retention_ms=1_000)
    plog = open_log(tmp_path, config)
    plog.append(keyed(b"gone", b"v", 100), leader_epoch=0, now_ms=0)
    plog.append(keyed(b"gone", None, 200), leader_epoch=0, now_ms=0)  # old tombstone
    plog.append(keyed(b"recent", b"v", 300), leader_epoch=0, now_ms=0)
    plog.append(keyed(b"recent", None, 5_000), leader_epoch=0, now_ms=0)  # young tombstone
    plog.append(keyed(b"live", b"v", 5_100), leader_epoch=0, now_ms=0)
    plog.roll()
    plog.append(keyed(b"other", b"v", 5_200), leader_epoch=0, now_ms=0)
    compact(plog, now_ms=5_500)
    assert [(r.offset, r.key, r.value) for r in records(plog)] == [
        (3, b"recent", None),
        (4, b"live", b"v"),
        (5, b"other", b"v"),
    ]
    # once the young tombstone ages past delete.retention.ms it goes too
    compact(plog, now_ms=7_000)
    assert [r.key for r in records(plog)] == [b"live", b"other"]


def test_compaction_respects_min_compaction_lag(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=10_000, cleanup_policy="compact", min_compaction_lag_ms=1_000)
    plog = open_log(tmp_path, config)
    plog.append(keyed(b"a", b"1", 1_000), leader_epoch=0, now_ms=0)
    plog.append(keyed(b"a", b"2", 1_500), leader_epoch=0, now_ms=0)
    plog.roll()
    plog.append(keyed(b"b", b"1", 1_600), leader_epoch=0, now_ms=0)
    assert compact(plog, now_ms=2_000).segments_rewritten == 0  # segment's newest record is too young
    assert compact(plog, now_ms=2_600).segments_rewritten == 1
    assert [r.offset for r in records(plog)] == [1, 2]


def test_compacted_log_survives_restart_with_rebuilt_indexes(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=600, cleanup_policy="compact", index_interval_bytes=50)
    plog = open_log(tmp_path, config)
    for i in range(60):
        plog.append(keyed(b"key-%d" % (i % 5), b"value-%d" % i, 1_000 + i), leader_epoch=0, now_ms=0)
    compact(plog, now_ms=2_000)
    before = [(r.offset, r.key, r.value) for r in records(plog)]
    end = plog.log_end_offset
    plog.close()
    for clean in (True, False):
        reopened = PartitionLog(tmp_path / "t-0", "t", 0, config, flush_policy="never", clean_shutdown=clean)
        assert reopened.log_end_offset == end
        assert [(r.offset, r.key, r.value) for r in records(reopened)] == before
        reopened.close()


def test_steady_overwrites_of_the_same_keys_stay_bounded(tmp_path: Path) -> None:
    """What __consumer_offsets sees under steady commits: files and bytes must not grow without bound."""
    config = LogConfig(segment_bytes=1_000, cleanup_policy="compact")
    plog = open_log(tmp_path, config)
    sizes = []
    for round_ in range(20):
        for i in range(50):
            plog.append(keyed(b"group-%d" % (i % 5), b"offset-%d" % (round_ * 50 + i), ts=1_000 + i),
                        leader_epoch=0, now_ms=0)
        stats = compact(plog, now_ms=2_000)
        sizes.append((len(plog.segments), plog.size_bytes))
    assert stats.segments_removed > 0
    # Bounded: the first segment, at most a couple of segments holding survivors, and the active one.
    assert max(n for n, _ in sizes[5:]) <= 6
    assert max(b for _, b in sizes[5:]) <= 4 * config.segment_bytes
    survivors = records(plog)
    assert {r.key: r.value for r in survivors} == {b"group-%d" % k: b"offset-%d" % (19 * 50 + 45 + k)
                                                    for k in range(5)}
    log_start, end = plog.log_start_offset, plog.log_end_offset
    plog.close()
    reopened = open_log(tmp_path, config)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (log_start, end)
    assert records(reopened) == survivors
    reopened.close()
