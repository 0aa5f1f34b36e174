"""The job over transactions and a KIP-848 group (an offline data directory written with the broker's
own classes; datadir.build_groups says what it holds): committed offsets read as Kafka's loader reads
them, commits counted per request, the consumer group's epochs, owners and outage, the statuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.pipeline import job
from kbroker.tests.pipeline import browser, datadir


@pytest.fixture(scope="module")
def groups(tmp_path_factory) -> datadir.GroupsScenario:
    return datadir.build_groups(tmp_path_factory.mktemp("groups") / "data")


@pytest.fixture(scope="module")
def result(spark, groups, tmp_path_factory):
    return job.run(spark, groups.root, tmp_path_factory.mktemp("groups-report"))


def _rows(spark, result, name):
    return spark.read.parquet(f"{result.out}/{name}").collect()


def test_committed_offsets_are_read_committed_as_kafka_loads_them(spark, groups, result) -> None:
    latest = {(r.group_id, r.topic, r.partition): r.committed_offset for r in _rows(spark, result, "offsets_latest")}
    assert latest == groups.latest  # aborted 30 and open 9 never count; the plain 6 beats the later marker's 7
    lag = {(r.group_id, r.topic, r.partition): (r.lag, int(r.last_commit_time.timestamp() * 1000))
           for r in _rows(spark, result, "lag")}
    assert lag == {k: (groups.end_offsets[k[1:]] - o, groups.last_commit_ms[k]) for k, o in groups.latest.items()}


def test_commits_are_counted_per_request_and_transactions_per_outcome(spark, groups, result) -> None:
    commits = sum(r.commits for r in _rows(spark, result, "commit_rate") if r.group_id == datadir.ETL)
    assert commits == groups.commits[datadir.ETL]
    etl = next(r for r in _rows(spark, result, "group_summary") if r.group_id == datadir.ETL)
    assert (etl.transactions_committed, etl.transactions_aborted) == groups.transactions[datadir.ETL]
    assert etl.commits == groups.commits[datadir.ETL]
    assert (etl.status, etl.members_now) == ("stopped", None)  # nobody consumes, and it is behind


def test_a_consumer_groups_epochs_are_its_generations(spark, groups, result) -> None:
    rows = sorted((r for r in _rows(spark, result, "rebalances") if r.group_id == datadir.CG), key=lambda r: r.generation)
    got = [(r.generation, r.member_count, tuple(r.members_joined), tuple(r.members_left)) for r in rows]
    assert got == groups.epochs
    assert {r.group_type for r in rows} == {"consumer"}
    assert [r.reason_source for r in rows] == ["broker history"] * 4
    assert [r.ending for r in rows] == [None, None, "crash or hang", "clean stop"]
    assert rows[2].session_timeout_ms == datadir.SESSION_MS
    assert [m.client_id for m in rows[1].members] == ["client-m1", "client-m2"]


def test_owners_and_the_crash_outage_of_a_consumer_group(spark, groups, result) -> None:
    owners = {(r.generation, r.partition): r.member_id for r in _rows(spark, result, "ownership")
              if r.group_id == datadir.CG}
    assert owners == groups.owners
    outages = [r for r in _rows(spark, result, "outages") if r.group_id == datadir.CG]
    # m1 went silent a session timeout before its fence; m2 took its partitions 2 s after the fence
    assert [(o.kind, o.seconds) for o in outages] == [("crash (session expired)", datadir.SESSION_MS / 1000 + 2)]
    summary = {r.group_id: r for r in _rows(spark, result, "group_summary")}
    assert (summary[datadir.CG].status, summary[datadir.CG].members_now) == ("empty", 0)
    assert summary[datadir.CG].longest_outage_s == datadir.SESSION_MS / 1000 + 2


def test_rates_are_over_the_reports_window(spark, groups, result) -> None:
    topics = {(r.topic, r.partition): r for r in _rows(spark, result, "topics")}
    # 40 messages a partition over the 39 s the data spans, the same window for every partition
    assert [round(topics[(datadir.ORDERS, p)].messages_per_sec, 4) for p in range(3)] == [round(40 / 39, 4)] * 3


@pytest.mark.skipif(browser.chromium() is None, reason="needs Debian's chromium (make system-deps)")
def test_the_report_renders_sound_in_a_browser(spark, result) -> None:
    m = browser.assert_sound(Path(result.report), spark, result.out)
    assert {c["name"] for c in m["charts"]} >= {"lag", "commits", f"ownership:{datadir.CG}"}
