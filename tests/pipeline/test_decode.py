"""The segment walker and decoders without Spark: every codec, damaged files, __consumer_offsets rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from kbroker.pipeline import decode, schemas  # noqa: E402
from kbroker.pipeline.logdir import DataDirError, SegmentSlice, list_segments, partition_dirs, plan_slices  # noqa: E402
from kbroker.pipeline.source import parse_time  # noqa: E402
from kbroker.protocol.record_batch import HEADER_SIZE, iter_batches  # noqa: E402
from kbroker.tests.pipeline import datadir  # noqa: E402

RECORDS = schemas.arrow_schema(schemas.RECORDS)


def _decode_topic(root: Path, topic: str, issues: list | None = None) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    report = (issues.append if issues is not None else decode.print_issue)
    for seg in list_segments(root, {topic}):
        for batch in decode.record_batches(seg, RECORDS, report=report, rows_per_batch=7):
            for row in batch.to_pylist():
                out.setdefault(row["partition"], []).append(
                    (row["offset"], int(row["timestamp"].timestamp() * 1000), row["key"], row["value"],
                     [(h["key"], h["value"]) for h in row["headers"]]))
    return out


def _expected(sc: datadir.Scenario, partition: int) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in sc.produced[(datadir.ORDERS, partition)]]


def test_segments_are_listed_per_partition_in_offset_order(scenario) -> None:
    segments = list_segments(scenario.root, {datadir.ORDERS})
    assert {s.partition for s in segments} == {0, 1, 2}
    for p in range(3):
        bases = [s.base_offset for s in segments if s.partition == p]
        assert bases == sorted(bases) and len(bases) >= 2, "the small segment.bytes must roll segments"
        assert [s.last_in_partition for s in segments if s.partition == p][-1]


def test_every_codec_decodes_to_the_produced_records(scenario) -> None:
    decoded = _decode_topic(scenario.root, datadir.ORDERS)
    for p in range(3):
        assert decoded[p] == _expected(scenario, p)


def test_orphan_directories_are_ignored_and_a_missing_directory_is_named(tmp_path, scenario) -> None:
    root = tmp_path / "data"
    shutil.copytree(scenario.root, root)
    (root / "gone-0").mkdir()  # no topics/gone.json: being deleted, the broker sweeps it
    assert "gone" not in {p.topic for p in partition_dirs(root)}
    with pytest.raises(DataDirError, match="does-not-exist"):
        list_segments(tmp_path / "does-not-exist")


def _damaged_copy(tmp_path: Path, scenario) -> tuple[Path, Path, list[int]]:
    root = tmp_path / "data"
    shutil.copytree(scenario.root, root)
    seg = next(s for s in list_segments(root, {datadir.ORDERS}) if s.partition == 1 and not s.last_in_partition)
    path = Path(seg.path)
    positions = [pos for pos, _ in iter_batches(path.read_bytes())]
    return root, path, positions


def test_a_bad_crc_skips_that_batch_only_and_names_file_and_position(tmp_path, scenario) -> None:
    root, path, positions = _damaged_copy(tmp_path, scenario)
    bad = positions[1]
    datadir.corrupt_byte(path, bad + HEADER_SIZE + 3)  # inside the records: under the CRC
    issues: list[decode.ScanIssue] = []
    decoded = _decode_topic(root, datadir.ORDERS, issues)
    assert [(i.path, i.position, i.kind) for i in issues] == [(str(path), bad, "bad_crc")]
    assert str(path) in issues[0].describe() and f"byte {bad}" in issues[0].describe()
    expected = _expected(scenario, 1)
    skipped = {row[0] for row in expected} - {row[0] for row in decoded[1]}
    assert skipped and len(skipped) < len(expected)  # one batch gone, the rest of the file still read
    assert decoded[0] == _expected(scenario, 0) and decoded[2] == _expected(scenario, 2)


def test_an_impossible_length_abandons_the_rest_of_that_file(tmp_path, scenario) -> None:
    root, path, positions = _damaged_copy(tmp_path, scenario)
    data = bytearray(path.read_bytes())
    data[positions[1] + 8 : positions[1] + 12] = b"\x00\x00\x00\x05"  # batchLength 5
    path.write_bytes(bytes(data))
    issues: list[decode.ScanIssue] = []
    seg = next(s for s in list_segments(root, {datadir.ORDERS}) if s.path == str(path))
    rows = list(decode.batch_rows(seg, report=issues.append))
    assert [(i.kind, i.position) for i in issues] == [("bad_length", positions[1])]
    assert [r["position"] for r in rows if r.get("error") is None] == [positions[0]]
    assert rows[-1]["error_kind"] == "bad_length"


def test_a_torn_tail_is_reported_as_truncated(tmp_path, scenario) -> None:
    root, path, positions = _damaged_copy(tmp_path, scenario)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 10)
    issues: list[decode.ScanIssue] = []
    seg = next(s for s in list_segments(root, {datadir.ORDERS}) if s.path == str(path))
    list(decode.record_batches(seg, RECORDS, report=issues.append))
    assert [(i.kind, i.position) for i in issues] == [("truncated", positions[-1])]


def test_consumer_offsets_rows_use_the_coordinator_codec(scenario) -> None:
    rows = [row for seg in list_segments(scenario.root, {"__consumer_offsets"})
            for row in decode.consumer_offsets_rows(seg)]
    kinds = sorted({r["record_type"] for r in rows})
    assert kinds == ["group_metadata", "group_tombstone", "offset_commit", "offset_tombstone"]
    gen2 = next(r for r in rows if r["record_type"] == "group_metadata" and r["group_id"] == "billing"
                and r["generation"] == 2)
    assert gen2["leader"] == "b-1" and gen2["protocol"] == "range"
    assert [(m["member_id"], m["client_id"], m["subscription"], m["assignment"]) for m in gen2["members"]] == [
        ("b-1", "billing-a", ["orders"], [{"topic": "orders", "partitions": [0, 1]}]),
        ("b-2", "billing-b", ["orders"], [{"topic": "orders", "partitions": [2]}]),
    ]
    # Arrow accepts the rows as the view's schema
    batch = next(decode.rows_to_batches(rows, schemas.arrow_schema(schemas.CONSUMER_OFFSETS)))
    assert batch.num_rows == len(rows)


def test_slices_of_a_segment_read_each_batch_once_and_tasks_pack_small_segments(scenario) -> None:
    """A task reads the batches that start in its byte range (a big segment is several tasks), and small
    segments share tasks up to the byte budget: every record once, whatever the cut."""
    segments = list_segments(scenario.root, {datadir.ORDERS})
    for seg in segments:
        whole = [r for b in decode.record_batches(seg, RECORDS) for r in b.to_pylist()]
        for size in (1, 100, 333, seg.size):
            cuts = [SegmentSlice(seg, a, min(a + size, seg.size)) for a in range(0, seg.size, size)]
            pieces = [r for sl in cuts for b in decode.record_batches(sl, RECORDS) for r in b.to_pylist()]
            assert pieces == whole, (seg.path, size)
    total = sum(s.size for s in segments)
    tasks = plan_slices(segments, target_bytes=total // 3 + 1)
    assert len(tasks) <= 4 < len(segments)  # packed: fewer tasks than segments
    assert sorted((sl.segment.path, sl.start) for task in tasks for sl in task) == sorted(
        (s.path, 0) for s in segments if s.size)
    big = max(segments, key=lambda s: s.size)
    assert len(plan_slices([big], target_bytes=big.size // 4 + 1)) == 4  # cut: one big segment, four tasks


def test_transaction_markers_are_rows_and_records_carry_their_producer(tmp_path) -> None:
    from kbroker.coordinator.partitioning import partition_for

    built = datadir.build_groups(tmp_path / "data")
    seg = next(s for s in list_segments(built.root, {"__consumer_offsets"})
               if s.partition == partition_for(datadir.ETL, 50) and s.size)
    rows = list(decode.consumer_offsets_rows(seg))
    kinds = [(r["record_type"], r["transactional"], r["producer_id"] >= 0) for r in rows]
    assert ("txn_commit", True, True) in kinds and ("txn_abort", True, True) in kinds
    assert ("offset_commit", False, False) in kinds and ("offset_commit", True, True) in kinds


def test_foreign_member_metadata_is_left_undecoded() -> None:
    assert decode.decode_subscription(b"\x00") == (None, None)
    assert decode.decode_assignment(b"\x00\x00\xff\xff\xff\x7f") is None


@pytest.mark.parametrize("text,ms", [
    ("1700000000000", 1_700_000_000_000),
    ("2023-11-14T22:13:20Z", 1_700_000_000_000),
    ("2023-11-14T22:13:20", 1_700_000_000_000),
    ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
    (None, None),
])
def test_since_accepts_epoch_ms_and_iso_8601(text, ms) -> None:
    assert parse_time(text) == ms


def test_since_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")
