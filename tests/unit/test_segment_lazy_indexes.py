"""An empty segment's index objects are made with their first use (an idle partition holds neither),
while its index files exist on disk from the start, as Kafka's do. The invariant: an index not yet made
has an empty file, so nothing that skips it (sync, close, recovery of an empty log) loses an entry."""

from __future__ import annotations

import os
from pathlib import Path

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.log.segment import LogSegment
from kbroker.protocol.record_batch import Record, decode_batches, encode_batch

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=200)


def batch(i: int) -> bytes:
    return encode_batch([Record(j, 1_000 + i, b"key-%d-%d" % (i, j), b"value-%d" % i) for j in range(2)])


def files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.suffix in (".log", ".index", ".timeindex")}


def test_a_new_partition_has_its_index_files_but_no_index_objects(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, flush_policy="never")
    segment = plog.active
    assert segment._offset_index is None and segment._time_index is None
    assert files(tmp_path / "t-0") == {"00000000000000000000.log", "00000000000000000000.index",
                                       "00000000000000000000.timeindex"}
    plog.close()
    assert segment._offset_index is None  # closing an idle partition makes nothing


def test_appends_make_and_fill_the_indexes(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, flush_policy="never")
    for i in range(10):
        plog.append(batch(i), leader_epoch=0, now_ms=0)
    segment = plog.active
    assert segment._offset_index is not None and len(segment.offset_index) > 0
    assert segment.find_batch(9) is not None
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, flush_policy="never", clean_shutdown=True)
    assert reopened.log_end_offset == 20
    assert [header.base_offset for header, _ in decode_batches(bytes(reopened.read(10, 1 << 20).records))][:1] == [10]
    reopened.close()


def test_recovering_an_empty_log_leaves_the_indexes_unmade_and_empties_stale_files(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog = PartitionLog(directory, "t", 0, CONFIG, flush_policy="never")
    plog.close()
    # a crash left index entries behind an empty log: they must not be trusted or kept
    (directory / "00000000000000000000.index").write_bytes(b"\x00\x00\x00\x05\x00\x00\x01\x00")
    (directory / "00000000000000000000.timeindex").write_bytes(b"\x00" * 12)
    reopened = PartitionLog(directory, "t", 0, CONFIG, flush_policy="never", clean_shutdown=False)
    segment = reopened.active
    assert segment._offset_index is None and segment._time_index is None
    assert os.path.getsize(directory / "00000000000000000000.index") == 0
    assert os.path.getsize(directory / "00000000000000000000.timeindex") == 0
    assert reopened.log_end_offset == 0
    reopened.append(batch(0), leader_epoch=0, now_ms=0)
    assert segment.find_batch(1) is not None
    reopened.close()


def test_deleting_a_segment_with_unmade_indexes_removes_its_files_without_making_them(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    directory.mkdir()
    segment = LogSegment(str(directory), 0, 200)
    segment.delete()
    assert files(directory) == set()
    assert segment._offset_index is None and segment._time_index is None


def test_promoting_a_cleaned_segment_with_unmade_indexes_renames_its_files(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    directory.mkdir()
    segment = LogSegment(str(directory), 0, 200, suffix=".cleaned")
    assert files(directory) == set()  # ".cleaned" names: none of the three suffixes above
    segment.promote_log()
    segment.promote_indexes()
    assert files(directory) == {"00000000000000000000.log", "00000000000000000000.index",
                                "00000000000000000000.timeindex"}
    assert segment.offset_index.path == directory / "00000000000000000000.index"
    segment.close()


def test_syncing_with_indexes_does_not_make_them(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    directory.mkdir()
    segment = LogSegment(str(directory), 0, 200)
    segment.sync(with_indexes=True)
    assert segment.indexes_synced and segment._offset_index is None
    segment.close()
