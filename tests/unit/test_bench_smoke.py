"""Smoke test of the benchmarks (`make bench`): every bench module imports, and the smallest meaningful
run of each load generator works against a real `kbroker serve` subprocess, and against the peers:
Tansu, and Apache Kafka 4.4 (started as the bench starts it: on the broker core, with its scripts' JVM
options; skipped without its jars, except under `make test`). Sanity only (positive rates, every
member assigned, every commit answered): speed targets live in `python -m bench`, never in test asserts.

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
    table = report.summary_table([f], ["a", "c", "b"], ratios=[("a", "b"), ("a", "d")])
    assert "2.00x" in table and "n/a" in table and "why" in table
    assert "a/b" in table.splitlines()[0] and "a/d" not in table  # a ratio to a column not shown is left out


def test_the_data_path_throughputs_print_every_run_beside_the_median(capsys):
    runs = [{"msgs_per_s": m, "mb_per_s": m / 1000} for m in (300_000, 100_000, 200_000)]
    results = {report.KB_ALWAYS: {"produce": data_path._median_run(runs), "consume": data_path._median_run(runs[:1])}}
    figs = {f.name + f.unit: f for f in data_path.figures(results, data_path.Sizes())}
    produce = figs["produce throughputMB/s, 10^6 bytes of values"]
    assert produce.values[report.KB_ALWAYS] == 200.0
    assert "median of 3 runs: 300.0 / 100.0 / 200.0 MB/s" in produce.notes[report.KB_ALWAYS]
    assert report.KB_ALWAYS not in figs["consume throughputMB/s, 10^6 bytes of values"].notes  # one run: no spread
    report.print_figures([produce], [report.KB_ALWAYS])
    assert "300.0 / 100.0 / 200.0" in capsys.readouterr().out


def test_the_data_path_runs_through_three_nodes():
    """The 3-node figures (issue 41): RF=3 topics through `kbroker serve --nodes 3`, each partition led by
    another node, the median of the runs in kbroker's --flush always column."""
    handle = brokers.start_kbroker(nodes=3)
    try:
        assert handle.bootstrap.count(",") == 2
        sizes = data_path.Sizes(messages=2_000, size=100, partitions=3, repeat=3)
        result = data_path._run_cluster(handle, sizes)
        from confluent_kafka.admin import AdminClient

        topics = AdminClient({"bootstrap.servers": handle.bootstrap}).list_topics(timeout=10).topics
        placed = [t for name, t in topics.items() if name.startswith("bench-nodes-")]
        assert len(placed) == 3 and all(sorted(p.leader for p in t.partitions.values()) == [1, 2, 3]
                                        and all(len(p.replicas) == 3 for p in t.partitions.values()) for t in placed)
    finally:
        handle.stop()
    assert result["produce"]["delivered"] == 2_000 and len(result["produce"]["runs_mb_per_s"]) == 3
    figs = data_path.cluster_figures(result, sizes)
    assert [f.name for f in figs] == ["produce throughput, 3 nodes (RF 3)", "consume throughput, 3 nodes (RF 3)"]
    assert figs[0].values[report.KB_ALWAYS] == result["produce"]["mb_per_s"] and "median of 3" in figs[0].notes[
        report.KB_ALWAYS]
    assert data_path.cluster_figures(None, sizes) == []


def test_every_benchmark_has_help_with_size_flags():
    for name, flag in (("data_path", "--messages"), ("groups", "--members"), ("codec", "--seconds"),
                       ("transactions", "--transactions"), ("connections", "--counts"),
                       ("streams_groups", "--rounds"), ("share_groups", "--records")):
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
    kafka_times = iter([(7.0, 9.0), (5.0, 8.0), (6.0, 12.0), (9.0, 10.0), (8.0, 11.0)])

    def start(label: str) -> float:
        calls.append(label)
        if label == report.PEER:
            raise brokers.Unavailable("no tansu here")
        return float(next(times))

    def kafka() -> tuple[float, float]:
        calls.append("kafka")
        return next(kafka_times)

    def floor() -> float:
        calls.append("floor")
        return 0.5

    monkeypatch.setattr(groups, "empty_startup", start)
    monkeypatch.setattr(groups, "kafka_startup", kafka)
    monkeypatch.setattr(groups, "startup_floor", floor)
    results: dict = {label: {} for label in report.LABELS}
    groups._startups(results, tuple(report.LABELS))
    kb = [report.KB_ALWAYS, report.KB_NEVER]
    # the peer that failed once, Kafka in every round (its flush setting has no start-up of its own)
    assert calls == [*kb, report.PEER, "kafka", "floor"] + [*kb, "kafka", "floor"] * (groups.STARTUP_RUNS - 1)
    assert results[report.KB_ALWAYS]["startup"] == 5.0 and results[report.KB_NEVER]["startup"] == 6.0
    assert isinstance(results[report.PEER]["startup"], report.NA)
    assert results[report.KB_ALWAYS]["startup_floor"] == 0.5
    # Kafka's two figures, each the median of its own (7 and 10 s: not the same start's)
    assert results[report.KAFKA]["startup"] == 7.0 and results[report.KAFKA]["startup_serving"] == 10.0
    assert report.KAFKA_FSYNC not in calls and results[report.KAFKA_FSYNC] == {}
    calls.clear()
    groups._startups({label: {} for label in report.LABELS}, report.run_labels(report.QUICK_PEERS))
    assert "kafka" not in calls  # a run without Kafka starts none


# --- Apache Kafka, the second peer ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def kafka():
    """Kafka as `make bench` starts it. Skipped without its jars, except under `make test` (which resolves
    them and sets KBROKER_REQUIRE_KAFKA=1), as the reference tests are."""
    from kbroker.tests.reference.kafka import kafka_libs

    if kafka_libs() is None:
        if os.environ.get("KBROKER_REQUIRE_KAFKA") == "1":
            pytest.fail("Apache Kafka's jars are missing (make kafka-jars)")
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    handle = brokers.start_kafka()
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.timeout(420)
def test_kafka_starts_on_the_broker_core_with_its_scripts_jvm_and_serves_groups(kafka):
    assert kafka.running and kafka.name == "kafka" and kafka.label == report.KAFKA
    if cores.PINNING:
        assert _cpu_list(_status(kafka.pid, "Cpus_allowed_list")) == cores.BROKER_CORE
        soft = int(Path(f"/proc/{kafka.pid}/limits").read_text().split("Max open files")[1].split()[0])
        assert soft == cores.raise_fd_limit()
    command = Path(f"/proc/{kafka.pid}/cmdline").read_bytes().split(b"\0")
    for option in (b"-Xmx1G", b"-Xms1G", b"-XX:+UseG1GC", b"kafka.Kafka"):
        assert option in command
    assert b"-XX:TieredStopAtLevel=1" not in command  # the tests' quick-start JVM would skew every figure
    properties = kafka.process.properties_path.read_text().splitlines()
    assert "group.initial.rebalance.delay.ms=0" in properties
    assert not any(line.startswith("log.flush.interval.messages") for line in properties)  # Kafka's default
    assert kafka.serves_metadata() and kafka.rss() > 50 * 2 ** 20
    kafka.require(68, 1, "ConsumerGroupHeartbeat")  # KIP-848 is served: its column is measured
    # started = its groups are served: every partition of __consumer_offsets answers a fetch
    import asyncio

    assert asyncio.run(brokers._serves_groups(kafka.bootstrap))
    assert brokers.warmup_s(kafka) == brokers.JVM_WARMUP_S > loadgen.WARMUP_S


@pytest.mark.timeout(300)
def test_the_load_generators_run_against_kafka(kafka):
    import asyncio

    from kbroker.bench import consumer_groups

    topic = group_load.prepare_topic(kafka.bootstrap, 5)
    res = asyncio.run(group_load.form_group(kafka.bootstrap, 5, group=f"smoke-k-{uuid.uuid4().hex[:6]}", topic=topic,
                                            session_timeout_ms=10_000, timeout=120))
    assert sorted(p for ps in res.assignments.values() for p in ps) == [0, 1, 2, 3, 4]
    rates = loadgen.run(lambda: group_load.request_rates(kafka.bootstrap, connections=2, window=8, seconds=0.3,
                                                         session_timeout_ms=10_000, broker_pid=kafka.pid,
                                                         warmup_s=0.1))
    assert isinstance(rates, dict)
    for rate in (rates["heartbeat"], rates["commit"]):  # answered without an error code, the JVM's CPU read
        assert rate.per_s > 0 and rate.answered > 0 and rate.cpu.broker > 0
    seconds, _, members, _ = asyncio.run(consumer_groups.fully_assigned(
        kafka.bootstrap, 3, group_load.prepare_topic(kafka.bootstrap, 3), heartbeat_ms=100, timeout=120))
    assert seconds > 0 and sorted(p for m in members for _, ps in m.owned for p in ps) == [0, 1, 2]
    assert asyncio.run(group_load.commit_many_groups(kafka.bootstrap, 50, topic)) == 50


@pytest.mark.timeout(420)
def test_kafka_startup_gives_its_first_answer_and_its_first_metadata_listing_itself(kafka):
    # (after the fixture's start, so that the jars are known to be there)
    answered, serving = groups.kafka_startup()
    assert 0 < answered <= serving < brokers.KAFKA_START_TIMEOUT_S


def test_the_fsync_column_is_kafka_flushing_every_message(tmp_path):
    from kbroker.tests.reference.kafka import kafka_libs

    if kafka_libs() is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    durable = brokers.kafka_process(tmp_path / "a", flush_every_message=True).properties()
    default = brokers.kafka_process(tmp_path / "b").properties()
    assert durable["log.flush.interval.messages"] == "1" and "log.flush.interval.messages" not in default
    assert durable["group.initial.rebalance.delay.ms"] == default["group.initial.rebalance.delay.ms"] == "0"


def test_a_kafka_start_whose_port_another_process_took_is_made_again_on_new_ports(monkeypatch):
    import socket

    from kbroker.tests.reference import kafka as reference

    reference.require_kafka_libs()
    taken = socket.create_server(("127.0.0.1", 0))  # another session's listener on the port Kafka is given
    real, given = reference.free_port, []

    def first_taken(host: str = "127.0.0.1") -> int:
        given.append(real(host) if given else taken.getsockname()[1])
        return given[-1]

    monkeypatch.setattr(reference, "free_port", first_taken)
    with taken:
        handle = brokers.start_kafka(groups=False)
        try:
            assert handle.process.port != taken.getsockname()[1] and handle.process.starts == 1
            assert handle.serves_metadata()
        finally:
            handle.stop()


def test_a_run_without_kafka_jars_prints_its_column_na(monkeypatch):
    monkeypatch.setattr(brokers, "kafka_reference", lambda: (_ for _ in ()).throw(
        brokers.Unavailable("Apache Kafka's jars are missing: run `make kafka-jars`")))
    with pytest.raises(brokers.Unavailable, match="make kafka-jars"):
        brokers.start_label(report.KAFKA_FSYNC)
    assert "n/a (Apache Kafka's jars are missing" in brokers.kafka_version()


def test_the_peers_of_a_run():
    assert report.run_labels(report.FULL_PEERS) == tuple(report.LABELS)
    assert report.run_labels(report.QUICK_PEERS) == (report.KB_ALWAYS, report.KB_NEVER, report.PEER)  # --quick
    assert report.run_labels(("kafka",)) == (report.KB_ALWAYS, report.KB_NEVER, report.KAFKA, report.KAFKA_FSYNC)
    assert groups.Sizes.quick().labels == data_path.Sizes.quick().labels == report.run_labels(report.QUICK_PEERS)
    assert report.KAFKA in groups.Sizes().labels and report.KAFKA in data_path.Sizes().labels
    import argparse

    assert report.peers_arg("tansu, kafka") == ("tansu", "kafka")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown peer redpanda"):
        report.peers_arg("tansu,redpanda")


def test_the_kafka_columns_print_with_a_ratio_to_each_peer(capsys):
    f = report.Figure("data_path", "produce throughput", "how", "MB/s",
                      values={report.KB_ALWAYS: 400.0, report.KB_NEVER: 500.0, report.PEER: 200.0,
                              report.KAFKA: 800.0, report.KAFKA_FSYNC: 100.0})
    report.print_figures([f], report.LABELS)
    rows = {line.split("  ")[1].strip(): line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")
            and not line.startswith("  how")}
    assert rows[report.KB_ALWAYS].endswith("ratio to tansu 2.00x, kafka 0.50x, kafka-fsync 4.00x")
    assert rows[report.KB_NEVER].endswith("ratio to tansu 2.50x, kafka 0.62x")
    assert "ratio" not in rows[report.KAFKA] and "800.0" in rows[report.KAFKA]
    table = report.summary_table([f], report.LABELS)
    assert table.splitlines()[0].split()[-5:] == ["always/tansu", "never/tansu", "always/kafka", "never/kafka",
                                                  "always/kafka-fsync"]
    assert table.splitlines()[2].split()[-5:] == ["2.00x", "2.50x", "0.50x", "0.62x", "4.00x"]
    # without Kafka in the run, no Kafka column and no ratio to it
    assert "kafka" not in report.summary_table([f], report.run_labels(report.QUICK_PEERS))


def test_the_targets_show_kafka_beside_tansu_for_information():
    produce = report.Figure("data_path", "produce throughput", "how", "MB/s, 10^6 bytes of values",
                            values={report.KB_ALWAYS: 400.0, report.PEER: 200.0, report.KAFKA: 800.0,
                                    report.KAFKA_FSYNC: 100.0})
    hb = report.Figure("groups", "Heartbeat v4 rate", "how", "requests/s",
                       values={report.KB_ALWAYS: 60_000.0, report.PEER: 20_000.0, report.KAFKA: 120_000.0},
                       fmt=",.0f")
    lines = {line.split("  ")[0]: line for line in targets.table([produce, hb]).splitlines()}
    durable = lines["produce MB/s >= 1.3x Tansu's, durable acks (--flush always)"]
    assert "100.0 (fsync)" in durable and "4.00x" in durable and durable.endswith("met")  # against Tansu: 2.00x
    beat = lines["Heartbeat v4 >= 2x Tansu"]
    assert "120,000" in beat and "0.50x" in beat and beat.endswith("met")  # Kafka faster: still met, information
    assert "Kafka" in targets.table([]).splitlines()[0]


def test_the_kafka_columns_take_their_turn_in_the_rate_rounds(monkeypatch):
    started: list[str] = []
    per_label = {report.KB_ALWAYS: 30_000, report.KB_NEVER: 40_000, report.PEER: 10_000,
                 report.KAFKA: 20_000, report.KAFKA_FSYNC: 5_000}
    rounds = {label: iter([per_label[label] * 2, per_label[label] // 2]) for label in per_label}

    class Handle:
        def __init__(self, label: str) -> None:
            self.label = label

        def stop(self) -> None:
            pass

    def start(label: str) -> Handle:
        started.append(label)
        if label == report.KAFKA_FSYNC and started.count(label) == 2:
            raise brokers.Unavailable("did not start")  # its third round is left out
        return Handle(label)

    def one_round(handle: Handle, sizes: groups.Sizes, n: int) -> dict:
        rate = next(rounds[handle.label])
        return {"heartbeat": _rate(rate), "commit": _rate(rate)}

    monkeypatch.setattr(brokers, "start_label", start)
    monkeypatch.setattr(groups, "_rates", one_round)
    monkeypatch.setattr(groups, "prepare_topic", lambda bootstrap, partitions: "t")
    Handle.bootstrap = "127.0.0.1:1"
    results = {label: {"rates": {1: {"heartbeat": _rate(v), "commit": _rate(v)}}} for label, v in per_label.items()}
    groups._more_rate_rounds(results, groups.Sizes(), verbose=False)
    assert started == report.LABELS * 2  # rounds 2 and 3, every column in turn
    assert results[report.KAFKA]["rates"][1]["heartbeat"].per_s == 20_000  # of 20k, 40k, 10k
    assert results[report.KAFKA]["rates"][1]["heartbeat"].rounds == (20_000, 40_000, 10_000)
    # an even count favours the peer: Kafka with flush.messages=1 is a peer, the higher of 5k and 10k
    assert results[report.KAFKA_FSYNC]["rates"][1]["commit"].per_s == 10_000


def test_kafka_with_fsync_is_measured_in_the_rates_only(monkeypatch):
    parts: list[tuple[str, tuple[str, ...]]] = []

    class Handle:
        def __init__(self, label: str) -> None:
            self.label = label

        def stop(self) -> None:
            pass

    monkeypatch.setattr(brokers, "start_label", Handle)
    monkeypatch.setattr(groups, "_run_broker", lambda handle, sizes, verbose: parts.append((handle.label, sizes.only))
                        or {})
    monkeypatch.setattr(groups, "figures", lambda results, sizes: [])
    groups.run(groups.Sizes(only=("stable", "rates", "memory"), rate_rounds=1), verbose=False)
    taken = {label: [only for who, only in parts if who == label] for label in report.LABELS}
    assert taken[report.KAFKA] == taken[report.KB_ALWAYS] == taken[report.PEER] == [("stable",), ("rates",), ("memory",)]
    assert taken[report.KB_NEVER] == [("stable",), ("rates",)]
    assert taken[report.KAFKA_FSYNC] == [("rates",)]
