"""Smoke test of the benchmarks (`make bench`): every bench module imports, and the smallest meaningful
run of each load generator works against a real `kbroker serve` subprocess. Sanity only (positive
rates, every member assigned, every commit answered): speed targets live in `python -m bench`, never
in test asserts.

The whole `python -m bench --quick` (a few minutes; about 8 on a loaded machine) runs too when
KBROKER_BENCH_QUICK=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kbroker.bench import (  # noqa: F401  (imports are tested)
    brokers,
    codec,
    connections,
    cores,
    curves,
    data_path,
    echo,
    group_load,
    group_scale,
    groups,
    loadgen,
    report,
    targets,
    wire,
)
from kbroker.bench import __main__ as bench_main  # noqa: F401

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kbroker():
    handle = brokers.start_kbroker(flush="never")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def topic(kbroker):
    return group_load.prepare_topic(kbroker.bootstrap, 8)


def test_harness_exposes_pid_rss_and_apis(kbroker):
    assert kbroker.running and kbroker.pid > 0
    assert kbroker.log_events("offsets_loaded")  # started = its groups are served, not COORDINATOR_LOAD_IN_PROGRESS
    assert kbroker.rss() > 1_000_000
    kbroker.require(11, 5, "JoinGroup")
    with pytest.raises(brokers.Unavailable):
        kbroker.require(11, 99, "JoinGroup")


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


@pytest.mark.skipif(not cores.PINNING, reason="one core: nothing is pinned")
def test_brokers_start_on_the_broker_core_with_the_raised_descriptor_limit(kbroker):
    # Spawned without a preexec_fn (its fork costs with the bench's size): the child inherits the core
    # and the limit from the spawning thread, which goes back to where it was.
    before = os.sched_getaffinity(0)
    handle = brokers.start_echo()
    try:
        for pid in (kbroker.pid, handle.pid):
            assert _cpu_list(_status(pid, "Cpus_allowed_list")) == cores.BROKER_CORE
            soft = int(Path(f"/proc/{pid}/limits").read_text().split("Max open files")[1].split()[0])
            assert soft == cores.raise_fd_limit()
    finally:
        handle.stop()
    assert os.sched_getaffinity(0) == before


def test_tansu_starts():
    # The bench extra (installed by `make test`) ships Tansu; the benchmarks are worthless without their peer.
    handle = brokers.start_tansu(timeout=20)
    try:
        assert 18 in handle.apis() and handle.rss() > 0
    finally:
        handle.stop()


async def test_five_members_reach_stable_and_all_get_assignments(kbroker, topic):
    res = await group_load.form_group(kbroker.bootstrap, 5, group=f"smoke-{uuid.uuid4().hex[:6]}", topic=topic,
                                  session_timeout_ms=10_000, timeout=60)
    assert res.seconds > 0 and res.generation >= 1
    assert len(res.assignments) == 5
    assert sorted(p for ps in res.assignments.values() for p in ps) == [0, 1, 2, 3, 4]
    assert res.joins >= 10  # each member: the MEMBER_ID_REQUIRED round trip, then the real join


async def test_heartbeat_and_commit_rates_are_positive(kbroker, topic):
    rates = await group_load.request_rates(kbroker.bootstrap, connections=2, window=8, seconds=0.3,
                                           session_timeout_ms=10_000, broker_pid=kbroker.pid)
    for rate in (rates["heartbeat"], rates["commit"]):
        assert rate.per_s > 0 and rate.answered > 0 and rate.decoded >= 1
        assert rate.cpu.broker > 0 and rate.cpu.generator > 0  # both sides' CPU was read


async def test_rates_over_many_one_member_groups_send_to_every_group(kbroker, topic):
    rates = await group_load.request_rates(kbroker.bootstrap, connections=2, window=8, seconds=0.3, groups=5,
                                           session_timeout_ms=10_000, broker_pid=kbroker.pid)
    assert rates["heartbeat"].answered > 0 and rates["commit"].answered > 0


async def test_a_rate_of_errors_is_not_a_rate(kbroker, topic):
    # Heartbeats of a member the broker does not know: every answer carries an error code, and the
    # generator must refuse the figure rather than count the answers.
    frame = group_load.heartbeat_frame(group_load.GroupMember(f"smoke-nogroup-{uuid.uuid4().hex[:6]}", "nobody", 1, 0))
    with pytest.raises(loadgen.GeneratorError, match="a rate of errors is not a rate"):
        await loadgen.pipelined_rate(kbroker.bootstrap, [[frame]], api_key=12, version=4, window=4, seconds=0.2,
                                     broker_pid=kbroker.pid, warmup_s=0.0)


def test_generator_ceiling_against_the_echo_responder():
    frame = group_load.heartbeat_frame(group_load.GroupMember("g", "m", 1, 0))
    rate = loadgen.ceiling([[frame], [frame]], api_key=12, version=4, window=16, seconds=0.3)
    assert rate.per_s > 0 and rate.answered > 0 and rate.connections == 2
    assert rate.cpu.broker > 0  # the echo process's CPU, read from /proc


async def test_idle_connections_are_held_open_and_measured(kbroker):
    rss = await connections.idle_rss(kbroker, [5, 20], 0.5)
    assert set(rss) == {5, 20} and all(isinstance(v, int) and v > 1_000_000 for v in rss.values())


def test_curves_print_and_plot(tmp_path):
    c = curves.Curve("smoke_curve", "smoke", "groups", "MiB", [1, 10, 100],
                     points={"a": {1: 1.0, 10: 2.0, 100: report.NA("too slow")}, "b": {1: 3.0}})
    text = c.table()
    assert "too slow" in text and "n/a" in text and "3.0" in text
    path = c.plot(tmp_path)
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_targets_are_checked_against_the_peer_of_the_same_run():
    hb = report.Figure("groups", "Heartbeat v4 rate", "how", "requests/s",
                       values={report.KB_ALWAYS: 60_000.0, report.PEER: 20_000.0})
    idle = report.Figure("groups", "idle RSS", "how", "MiB", values={report.KB_ALWAYS: 40.0, report.PEER: 16.0},
                         higher_is_better=False)
    text = targets.table([hb, idle])
    lines = {line.split("  ")[0]: line for line in text.splitlines()}
    assert lines["Heartbeat v4 >= 2x Tansu"].endswith("met") and "3.00x" in lines["Heartbeat v4 >= 2x Tansu"]
    assert lines["Heartbeat v4 >= 50k requests/s"].endswith("met")
    assert lines["idle RSS < 30 MiB"].endswith("NOT MET") and "16.0" in lines["idle RSS < 30 MiB"]
    assert "n/a: not measured" in lines["consume MB/s >= Tansu's"]


def test_the_startup_target_shows_the_floor_measured_in_the_same_run():
    def startup(value: float) -> report.Figure:
        return report.Figure("groups", "start-up with nothing stored", "how", "s",
                             values={report.KB_ALWAYS: value, report.PEER: 0.02}, higher_is_better=False, fmt=",.2f")
    def floor(value: float) -> report.Figure:
        return report.Figure("groups", "start-up floor: Python importing asyncio, uvloop and structlog", "how", "s",
                             values={report.KB_ALWAYS: value}, higher_is_better=False, fmt=",.2f")
    name = "empty start-up to first answered ApiVersions < 0.15 s"
    slow = {line.split("  ")[0]: line for line in targets.table([startup(0.27), floor(0.16)]).splitlines()}
    assert slow[name].endswith("NOT MET (floor 0.16 s: Python with asyncio, uvloop and structlog alone)")
    fast = targets.table([startup(0.12), floor(0.07)])
    assert "met (floor 0.07 s" in fast and "1 of 13 targets met" in fast
    assert {line.split("  ")[0]: line for line in targets.table([startup(0.12)]).splitlines()}[name].endswith("met")


async def test_one_hundred_simple_commits_are_all_answered(kbroker, topic):
    assert await group_load.commit_many_groups(kbroker.bootstrap, 100, topic) == 100


def test_offsets_replay_loads_every_generated_record():
    info = groups.replay_time(2_000, timeout=60)
    assert info["records"] == info["loaded_records"] == 2_000
    assert info["seconds"] > 0 and info["bytes_on_disk"] > 0


def test_startup_floor_is_timed_to_the_first_line_of_its_process(monkeypatch):
    assert 0 < groups.startup_floor(timeout=60) < 60  # the real floor process says it is up
    # The clock stops at the line, not at the exit: the process is killed once it is up.
    monkeypatch.setattr(groups, "_FLOOR_CODE", "import sys, time; time.sleep(0.3); sys.stdout.write('up\\n'); "
                                               "sys.stdout.flush(); time.sleep(30)")
    started = time.monotonic()
    assert 0.3 <= groups.startup_floor(timeout=60) < 10
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("code, timeout, error", [
    ("import sys; sys.stderr.write('no uvloop here')", 60, "no uvloop here"),  # exits without its line
    ("import time; time.sleep(60)", 1, "hung"),  # says nothing
    ("import sys, time; sys.stdout.write('u'); sys.stdout.flush(); time.sleep(60)", 1, "hung"),  # half a line
    ("import sys, time; sys.stdout.write('down\\n'); sys.stdout.flush(); time.sleep(60)", 60, "failed"),
])
def test_a_floor_process_that_does_not_say_it_is_up_is_a_failed_measurement(monkeypatch, code, timeout, error):
    monkeypatch.setattr(groups, "_FLOOR_CODE", code)
    started = time.monotonic()
    with pytest.raises(group_load.BenchError, match=error):
        groups.startup_floor(timeout=timeout)
    assert time.monotonic() - started < 30  # never the 60 s the process would take on its own


def test_startup_floor_is_printed_for_kbroker_and_beside_the_startup_target():
    sizes = groups.Sizes(only=("replay",))
    results = {report.KB_ALWAYS: {"replay": report.NA("skipped"), "startup": 0.25, "startup_floor": 0.12},
               report.KB_NEVER: {"startup": 0.26}, report.PEER: {"replay": report.NA("memory"), "startup": 0.02}}
    figures = groups.figures(results, sizes)
    by_name = {f.name: f for f in figures}
    assert by_name[report.STARTUP_FLOOR].values == {report.KB_ALWAYS: 0.12}
    assert by_name["start-up with nothing stored"].values[report.PEER] == 0.02
    lines = {line.split("  ")[0]: line for line in targets.table(figures).splitlines()}
    assert lines["empty start-up to first answered ApiVersions < 0.15 s"].endswith(
        "NOT MET (floor 0.12 s: Python with asyncio, uvloop and structlog alone)")


def test_produce_consume_and_latency_round_trip(kbroker):
    t = f"smoke-dp-{uuid.uuid4().hex[:6]}"
    data_path.warm_up(kbroker.bootstrap, f"{t}-warm", 1024)  # a topic of its own, read back whole
    data_path.create_topic(kbroker.bootstrap, t, 2)
    p = data_path.produce(kbroker.bootstrap, t, 500, 1024)
    assert p["delivered"] == 500 and p["mb_per_s"] > 0
    c = data_path.consume(kbroker.bootstrap, t, 2, 500)
    assert c["read"] == 500 and c["msgs_per_s"] > 0
    lt = f"smoke-lat-{uuid.uuid4().hex[:6]}"
    data_path.create_topic(kbroker.bootstrap, lt, 1)
    lat = data_path.latency(kbroker.bootstrap, lt, rate=100, seconds=0.5, size=1024)
    assert lat["samples"] == 50 and 0 < lat["p50_ms"] <= lat["p99_ms"]


def test_produce_sends_each_message_once_around_a_full_client_queue(kbroker):
    from confluent_kafka import Consumer, TopicPartition

    t = f"smoke-full-{uuid.uuid4().hex[:6]}"
    data_path.create_topic(kbroker.bootstrap, t, 1)
    # librdkafka's queue takes 100 messages: sends fail with BufferError mid-chunk, again and again
    p = data_path.produce(kbroker.bootstrap, t, 3_000, 100, conf={"queue.buffering.max.messages": 100})
    assert p["delivered"] == 3_000
    consumer = Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(t, 0), timeout=10) == (0, 3_000)  # none lost or doubled
    finally:
        consumer.close()


def test_figures_print_with_ratios_and_na():
    f = report.Figure("x", "rate", "how", "req/s", values={"a": 10.0, "b": 5.0, "c": report.NA("why")})
    table = report.summary_table([f], ["a", "c", "b"], "b")
    assert "2.00x" in table and "n/a" in table and "why" in table


def test_every_benchmark_has_help_with_size_flags():
    for name, flag in (("data_path", "--messages"), ("groups", "--members"), ("codec", "--seconds"),
                       ("transactions", "--transactions"), ("connections", "--counts")):
        out = subprocess.run([sys.executable, "-m", "bench." + name, "--help"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and flag in out.stdout, out.stderr


@pytest.mark.slow
@pytest.mark.timeout(720)
@pytest.mark.skipif(os.environ.get("KBROKER_BENCH_QUICK") != "1", reason="set KBROKER_BENCH_QUICK=1 (a few minutes)")
def test_quick_bench_runs_to_the_summary(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench", "--quick", "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=700)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "=== summary ===" in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert "targets of issue 17" in out.stdout and "load generator ceiling, Heartbeat v4" in out.stdout
    assert sorted(p.name for p in tmp_path.glob("*.png"))  # the cost curves were plotted


def test_consumer_group_load_generator_gets_everyone_assigned(kbroker):
    import asyncio

    from kbroker.bench import consumer_groups

    topic = group_load.prepare_topic(kbroker.bootstrap, 5)
    seconds, epoch, members, _ = asyncio.run(consumer_groups.fully_assigned(
        kbroker.bootstrap, 5, topic, heartbeat_ms=100, timeout=60))
    assert seconds > 0 and epoch >= 5
    assert sorted(p for m in members for _, ps in m.owned for p in ps) == list(range(5))
    rate = asyncio.run(consumer_groups.heartbeat_rate(kbroker.bootstrap, group_load.prepare_topic(kbroker.bootstrap, 2),
                                                      connections=2, window=4, seconds=0.5, heartbeat_ms=100,
                                                      broker_pid=kbroker.pid))
    assert rate.per_s > 0 and rate.answered > 0


def _rate(per_s: float) -> loadgen.Rate:
    return loadgen.Rate(per_s=per_s, answered=int(per_s), seconds=1.0, cpu=cores.CpuUse(1.0, 0.1, 1.0), connections=4,
                        window=64, decoded=1)


def test_the_one_group_rates_report_the_median_round_with_every_round_beside_it():
    median = loadgen.median_round([_rate(30_000), _rate(10_000), _rate(20_000)])
    assert median.per_s == 20_000 and median.answered == 20_000  # the whole round: its CPU goes with it
    assert median.rounds == (30_000, 10_000, 20_000)  # in the order they were taken
    assert "median of 3 alternating rounds: 30,000 / 10,000 / 20,000" in median.cpu_note()
    assert "rounds" not in _rate(1_000).cpu_note()
    # an even count (a round failed): the middle one that favours the peer
    assert loadgen.median_round([_rate(40_000), _rate(10_000)]).per_s == 10_000
    assert loadgen.median_round([_rate(40_000), _rate(10_000)], peer=True).per_s == 40_000
    assert groups.Sizes().rate_rounds == 3 and groups.Sizes.quick().rate_rounds == 1


def test_the_consumer_group_heartbeat_rate_is_the_median_of_rounds_on_fresh_brokers(monkeypatch):
    from kbroker.bench import consumer_groups

    started: list[str] = []
    rates = iter([_rate(50_000), _rate(70_000), _rate(40_000), _rate(60_000)])

    class Handle:
        def __init__(self, label: str) -> None:
            self.label, self.stopped = label, False

        def stop(self) -> None:
            self.stopped = True

    handles: list[Handle] = []

    def start(label: str) -> Handle:
        started.append(label)
        if label == report.KB_NEVER and len(started) > 2:
            raise brokers.Unavailable("did not start")  # its third round is left out
        handles.append(Handle(label))
        return handles[-1]

    monkeypatch.setattr(brokers, "start_label", start)
    monkeypatch.setattr(consumer_groups, "_rate", lambda handle, sizes: next(rates))
    results = {report.KB_ALWAYS: {"rate": _rate(30_000)}, report.KB_NEVER: {"rate": _rate(20_000)},
               report.PEER: {"rate": report.NA("no ConsumerGroupHeartbeat")}}
    consumer_groups._more_rate_rounds(results, consumer_groups.Sizes(), verbose=False)
    kb = [report.KB_ALWAYS, report.KB_NEVER]
    assert started == kb * 2  # rounds 2 and 3, in turn; never the peer, which gave no first round
    assert all(h.stopped for h in handles)
    assert results[report.KB_ALWAYS]["rate"].per_s == 40_000  # of 30k, 50k, 40k
    assert results[report.KB_ALWAYS]["rate"].rounds == (30_000, 50_000, 40_000)
    assert results[report.KB_NEVER]["rate"].per_s == 20_000  # of 20k, 70k (even: the lower, for kbroker)
    assert isinstance(results[report.PEER]["rate"], report.NA)
    assert consumer_groups.Sizes().rate_rounds == 3 and consumer_groups.Sizes.quick().rate_rounds == 1


def test_startups_and_the_floor_are_taken_in_rounds_of_one_each(monkeypatch):
    calls: list[str] = []
    times = iter(range(1, 100))

    def start(label: str) -> float:
        calls.append(label)
        if label == report.PEER:
            raise brokers.Unavailable("no tansu here")
        return float(next(times))

    def floor() -> float:
        calls.append("floor")
        return 0.5

    monkeypatch.setattr(groups, "empty_startup", start)
    monkeypatch.setattr(groups, "startup_floor", floor)
    results: dict = {label: {} for label in report.LABELS}
    groups._startups(results)
    kb = [report.KB_ALWAYS, report.KB_NEVER]
    assert calls == [*kb, report.PEER, "floor"] + [*kb, "floor"] * (groups.STARTUP_RUNS - 1)  # the peer once
    assert results[report.KB_ALWAYS]["startup"] == 5.0 and results[report.KB_NEVER]["startup"] == 6.0
    assert isinstance(results[report.PEER]["startup"], report.NA)
    assert results[report.KB_ALWAYS]["startup_floor"] == 0.5
