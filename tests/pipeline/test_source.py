"""The `kbroker-log` data source through Spark (the shared session): partitioning, views, options."""

from __future__ import annotations

import shutil

import pytest

from kbroker.pipeline.logdir import list_segments
from kbroker.tests.pipeline import datadir


def test_segments_are_read_in_packed_tasks_and_small_budgets_cut_them(spark, scenario) -> None:
    nonempty = [s for s in list_segments(scenario.root) if s.size]
    df = spark.read.format("kbroker-log").load(str(scenario.root))
    assert df.rdd.getNumPartitions() == 1 < len(nonempty)  # a few KiB of segments: one task
    cut = spark.read.format("kbroker-log").option("task_bytes", "300").load(str(scenario.root))
    assert cut.rdd.getNumPartitions() > len(nonempty)  # 300-byte slices: more tasks than files
    key = ["topic", "partition", "offset"]
    assert cut.select(*key).orderBy(*key).collect() == df.select(*key).orderBy(*key).collect()


def test_a_file_uri_reads_as_the_path_does(spark, scenario) -> None:
    uri = scenario.root.resolve().as_uri()
    assert uri.startswith("file:///")
    assert spark.read.format("kbroker-log").load(uri).count() == \
        spark.read.format("kbroker-log").load(str(scenario.root)).count() > 0


def test_records_view_returns_every_record_in_every_codec(spark, scenario) -> None:
    df = spark.read.format("kbroker-log").option("topics", "orders").load(str(scenario.root))
    assert df.schema.simpleString() == ("struct<topic:string,partition:int,offset:bigint,timestamp:timestamp,"
                                        "key:binary,value:binary,headers:array<struct<key:string,value:binary>>>")
    got = sorted((r.partition, r.offset, int(r.timestamp.timestamp() * 1000), r.key and bytes(r.key),
                  r.value and bytes(r.value), [(h.key, h.value and bytes(h.value)) for h in r.headers])
                 for r in df.collect())
    want = sorted((p, r.offset, r.timestamp, r.key, r.value, list(r.headers))
                  for (_, p), records in scenario.produced.items() for r in records)
    assert got == want


def test_since_option_skips_older_records(spark, scenario) -> None:
    cut = datadir.T0 + 300_000
    df = spark.read.format("kbroker-log").option("topics", "orders").option("since", str(cut)).load(str(scenario.root))
    want = sum(1 for records in scenario.produced.values() for r in records if r.timestamp >= cut)
    assert 0 < df.count() == want


def test_consumer_offsets_view(spark, scenario) -> None:
    df = spark.read.format("kbroker-log").option("view", "consumer_offsets").load(str(scenario.root))
    counts = {r.record_type: r["count"] for r in df.groupBy("record_type").count().collect()}
    assert counts == {"offset_commit": 17, "offset_tombstone": 2, "group_metadata": 6, "group_tombstone": 1}
    assert df.where("producer_id >= 0 or transactional").count() == 0  # plain commits, no transaction
    member = df.where("group_id = 'billing' and generation = 3").select("members").first().members[0]
    assert (member.member_id, member.assignment[0].partitions) == ("b-2", [0, 1, 2])


def test_batches_view_reports_damage_with_file_and_position(spark, scenario, tmp_path) -> None:
    root = tmp_path / "data"
    shutil.copytree(scenario.root, root)
    seg = next(s for s in list_segments(root, {"orders"}) if s.partition == 2)
    datadir.corrupt_byte(__import__("pathlib").Path(seg.path), 70)
    df = spark.read.format("kbroker-log").option("view", "batches").load(str(root))
    errors = df.where("error is not null").collect()
    assert [(e.segment, e.position, e.error_kind) for e in errors] == [(seg.path, 0, "bad_crc")]
    assert seg.path in errors[0].error and "byte 0" in errors[0].error
    sound = df.where("error is null and topic = 'orders'").groupBy().sum("records").first()[0]
    total = sum(len(v) for v in scenario.produced.values())
    assert 0 < sound < total  # the damaged batch is missing, everything else is there


def test_unknown_view_is_refused(spark, scenario) -> None:
    with pytest.raises(Exception, match="unknown view"):
        spark.read.format("kbroker-log").option("view", "nope").load(str(scenario.root)).schema
