"""The analyze job on an offline data directory (shared session): tables, report, bad input, options."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from kbroker.pipeline import job
from kbroker.pipeline.logdir import list_segments
from kbroker.tests.pipeline import browser, datadir


@pytest.fixture(scope="module")
def result(spark, scenario, tmp_path_factory):
    return job.run(spark, scenario.root, tmp_path_factory.mktemp("report"))


def _table(spark, result, name):
    return spark.read.parquet(f"{result.out}/{name}")


def test_every_table_is_a_parquet_folder_and_the_report_has_its_charts(result) -> None:
    for name in job.TABLES:
        assert (Path(result.out) / name / "_SUCCESS").exists(), name
    html = Path(result.report).read_text()
    for chart in ("lag", "commits", "partition-lag:billing", "ownership:billing"):
        assert f"data-chart='{chart}'" in html
    assert result.problems == []


def test_offsets_latest_is_the_compacted_view(spark, scenario, result) -> None:
    rows = _table(spark, result, "offsets_latest").collect()
    assert {(r.group_id, r.topic, r.partition): r.committed_offset for r in rows} == scenario.latest


def test_lag_is_log_end_minus_committed(spark, scenario, result) -> None:
    rows = _table(spark, result, "lag").collect()
    want = {key: scenario.end_offsets[(key[1], key[2])] - offset for key, offset in scenario.latest.items()}
    assert {(r.group_id, r.topic, r.partition): r.lag for r in rows} == want
    assert {(r.group_id, r.topic, r.partition): int(r.last_commit_time.timestamp() * 1000) for r in rows} == {
        key: scenario.last_commit_ms[key] for key in scenario.latest}


def test_commit_rate_counts_commits_per_minute(spark, scenario, result) -> None:
    rows = _table(spark, result, "commit_rate").collect()
    got = {(r.group_id, int(r.minute.timestamp() * 1000)): r.commits for r in rows}
    # two commits sharing a millisecond count twice (the scenario has one such pair)
    assert got == {(g, m): n for g, minutes in scenario.commit_minutes.items() for m, n in minutes.items()}
    billing = sorted((r.minute, r.complete) for r in rows if r.group_id == "billing")
    assert [c for _, c in billing] == [False] + [True] * (len(billing) - 2) + [False]


def test_rebalances_say_how_they_ended_and_groups_are_summed_up(spark, scenario, result) -> None:
    rows = {(r.group_id, r.generation): r for r in _table(spark, result, "rebalances").collect()}
    assert rows[("billing", 3)].reason_kind == "member_left" and rows[("billing", 3)].ending == "clean leave"
    assert rows[("audit", 2)].reason_kind == "group_emptied"
    summary = {r.group_id: r for r in _table(spark, result, "group_summary").collect()}
    assert summary["billing"].generations == 3 and summary["billing"].members_now == 1
    assert summary["billing"].commits == sum(scenario.commit_minutes["billing"].values())
    want_lag = sum(scenario.end_offsets[(t, p)] - o for (g, t, p), o in scenario.latest.items() if g == "billing")
    assert summary["billing"].total_lag == want_lag


def test_report_tables_show_no_none_no_float_counts_and_utc_times(result) -> None:
    import re

    html = Path(result.report).read_text()
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", html)]
    assert cells and "None" not in cells and "NaN" not in cells and "nan" not in cells
    assert not [c for c in cells if re.fullmatch(r"-?\d+\.0", c)]
    times = [c for c in cells if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d.*", c)]
    assert times and all(c.endswith(" UTC") for c in times)
    assert "<h2>Groups</h2>" in html


def test_the_brokers_history_file_gives_the_reasons_without_its_log(spark, scenario, tmp_path) -> None:
    root = tmp_path / "data"
    shutil.copytree(scenario.root, root)
    event = {"event": "rebalance_completed", "timestamp": "2023-11-14T22:14:30Z", "group_id": "billing",
             "old_generation": 2, "new_generation": 3, "reason": "session expired for member b-1",
             "client_reason": None, "trigger_member": "b-1", "members_in": [], "members_out": ["b-1"],
             "member_count": 1, "duration_ms": 6001}
    (root / "rebalances.jsonl").write_text(json.dumps(event) + "\n")
    res = job.run(spark, root, tmp_path / "r")
    row = _table(spark, res, "rebalances").where("group_id = 'billing' and generation = 3").collect()[0]
    assert (row.reason, row.reason_source, row.ending) == ("session expired for member b-1", "broker history",
                                                           "crash or hang")


def test_rebalances_list_every_generation_with_members_and_gaps(spark, scenario, result) -> None:
    rows = _table(spark, result, "rebalances").orderBy("group_id", "generation").collect()
    assert {(r.group_id, r.generation) for r in rows} == {(g, n) for g, gens in scenario.generations.items() for n in gens}
    billing = [r for r in rows if r.group_id == "billing"]
    assert [r.member_count for r in billing] == [1, 2, 1]
    assert [r.reason for r in billing] == ["first generation seen", "member joined", "member left"]
    assert [r.seconds_since_previous for r in billing] == [None, 70.0, 60.0]
    assert billing[1].members_joined == ["b-2"] and billing[2].members_left == ["b-1"]
    audit = [r for r in rows if r.group_id == "audit"]
    assert audit[-1].reason == "group became empty" and audit[-1].leader is None


def test_topics_table_has_sizes_counts_and_end_offsets(spark, scenario, result) -> None:
    rows = {(r.topic, r.partition): r for r in _table(spark, result, "topics").collect()}
    for (topic, p), end in scenario.end_offsets.items():
        assert rows[(topic, p)].log_end_offset == end
    for p in range(3):
        row = rows[(datadir.ORDERS, p)]
        assert row.messages == len(scenario.produced[(datadir.ORDERS, p)])
        files = [s for s in list_segments(scenario.root, {datadir.ORDERS}) if s.partition == p]
        assert row.size_bytes == sum(s.size for s in files) and row.segments == len(files)
        assert row.messages_per_sec > 0
        assert set(row.compression) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert rows[(datadir.EMPTY, 0)].messages == 0


def test_since_limits_the_time_series(spark, scenario, tmp_path) -> None:
    since = datadir.T0 + 75_000
    res = job.run(spark, scenario.root, tmp_path / "r", since_ms=since)
    commits = _table(spark, res, "commit_rate").collect()
    assert {r.group_id for r in commits} == {"billing"} and sum(r.commits for r in commits) == 3
    gens = _table(spark, res, "rebalances").collect()
    assert sorted((r.group_id, r.generation) for r in gens) == [("audit", 2), ("billing", 3)]
    # state tables are not cut: the newest commits stay
    assert res.rows["offsets_latest"] == len(scenario.latest)


def test_broker_log_gives_the_reasons(spark, scenario, tmp_path) -> None:
    log = tmp_path / "broker.log"
    events = [
        {"event": "rebalance_completed", "timestamp": "2023-11-14T22:14:30Z", "group_id": "billing",
         "old_generation": 1, "new_generation": 2, "reason": "member joined", "client_reason": "new consumer",
         "trigger_member": "b-2", "members_in": ["b-2"], "members_out": [], "member_count": 2, "duration_ms": 3004},
        # a generation that never reached __consumer_offsets (abandoned before SyncGroup)
        {"event": "rebalance_completed", "timestamp": "2023-11-14T22:20:00Z", "group_id": "billing",
         "old_generation": 3, "new_generation": 4, "reason": "member left", "client_reason": None,
         "trigger_member": "b-2", "members_in": [], "members_out": ["b-2"], "member_count": 0, "duration_ms": 1},
        {"event": "offsets_loaded", "partitions": 50},
    ]
    log.write_text("\n".join(json.dumps(e) for e in events) + "\nnot json at all\n")
    res = job.run(spark, scenario.root, tmp_path / "r", broker_log=log)
    rows = {r.generation: r for r in _table(spark, res, "rebalances").where("group_id = 'billing'").collect()}
    assert (rows[2].reason, rows[2].reason_source, rows[2].client_reason, rows[2].rebalance_duration_ms) == (
        "member joined", "broker log", "new consumer", 3004)
    assert rows[3].reason_source == "derived"
    assert rows[4].in_offsets_log is False and rows[4].reason == "member left"
    assert rows[4].seconds_since_previous == 270.0


def test_a_damaged_segment_is_reported_and_the_job_goes_on(spark, scenario, tmp_path) -> None:
    root = tmp_path / "data"
    shutil.copytree(scenario.root, root)
    seg = next(s for s in list_segments(root, {"orders"}) if s.partition == 0)
    datadir.corrupt_byte(Path(seg.path), 70)
    res = job.run(spark, root, tmp_path / "r")
    assert len(res.problems) == 1 and seg.path in res.problems[0] and "byte 0" in res.problems[0]
    errors = _table(spark, res, "errors").collect()
    assert [(e.segment, e.position, e.error_kind) for e in errors] == [(seg.path, 0, "bad_crc")]
    assert res.rows["lag"] == len(scenario.latest)
    assert "Problems in the input" in Path(res.report).read_text()


def _args(**kw) -> argparse.Namespace:
    base = dict(data_dir=None, out=None, master=None, since=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_main_refuses_a_missing_directory_before_starting_spark(tmp_path, capsys) -> None:
    missing = tmp_path / "nope"
    assert job.main(_args(data_dir=str(missing), out=str(tmp_path / "r"))) == 2
    assert f"data directory {str(missing)!r} does not exist" in capsys.readouterr().err


def test_main_refuses_a_bad_since(tmp_path, capsys) -> None:
    assert job.main(_args(data_dir=str(tmp_path), since="last tuesday")) == 2
    assert "--since" in capsys.readouterr().err


def test_an_empty_or_foreign_directory_is_named(spark, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(job.JobError, match="is empty"):
        job.run(spark, tmp_path / "empty", tmp_path / "r")
    (tmp_path / "foreign" / "photos").mkdir(parents=True)
    with pytest.raises(job.JobError, match="not a kbroker data directory"):
        job.run(spark, tmp_path / "foreign", tmp_path / "r")


@pytest.mark.skipif(browser.chromium() is None, reason="needs Debian's chromium (make system-deps)")
def test_the_report_renders_sound_in_a_browser(spark, result) -> None:
    browser.assert_sound(Path(result.report), spark, result.out)
