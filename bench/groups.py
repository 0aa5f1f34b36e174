"""Consumer groups (issue 4): rebalance to Stable, coordinator request rates, offsets replay, memory.

    python -m bench.groups [--members 10,100,500] [--connections C] [--window W] [--seconds S] [--rate-rounds N]
                           [--replay-records N] [--memory-groups N,N] [--heartbeat-ms MS] [--session-timeout-ms MS]
                           [--only stable,rates,replay,memory] [--peers tansu,kafka] [--quick]

The load generator speaks the protocol itself with kbroker's codec (`kbroker.protocol.framing` and the
generated messages) over asyncio streams, one TCP connection per member, so both brokers see the
same bytes. kbroker runs with `--group-initial-rebalance-delay-ms 0`, with `--flush always` (its
default: a commit is answered after an fsync group commit) and again with `--flush never`; Tansu runs
with memory storage (its default group settings); Apache Kafka 4.4 (bench/brokers.py `start_kafka`)
with `group.initial.rebalance.delay.ms=0`, at its default flush, and for the rates of (b) again with
`log.flush.interval.messages=1`. `--peers` picks the peers (default both; `--quick` Tansu only).

(a) stable: N members start together: FindCoordinator, connect to the coordinator, then (clock starts)
    JoinGroup v5 with an empty member id, the MEMBER_ID_REQUIRED round trip, the leader assigns one
    partition per member, SyncGroup v3. A member answered REBALANCE_IN_PROGRESS (on SyncGroup, or on a
    Heartbeat v4 every --heartbeat-ms once synced) joins again, as a client would. The clock stops at
    the last SyncGroup response of the first generation that holds all N members.
(b) rates: a stable group of C members, one connection each (and then 100 and 10,000 one-member groups,
    their requests dealt over C connections: the cost curve); every connection keeps W requests in
    flight (bench/loadgen.py: pre-encoded, pipelined, counted by frame length, every answer checked for
    error codes) for S seconds of Heartbeat v4, then S seconds of OffsetCommit v8 (one partition per
    request, the member's generation and id). Answered requests per second, all connections, with the
    broker's and the generator's CPU over the interval. The one-group rates (the targets') are taken in
    3 rounds, the brokers in turn, rounds 2 and 3 on fresh processes (the first on the broker of (a)),
    and the round with the median rate is reported:
    the machine's speed drifts within minutes, and alternating puts each broker at each moment.
(c) replay: N OffsetCommit records are written offline into the `__consumer_offsets` segment files of a
    tmp data dir (LogManager + OffsetsTopic.append_records, flush never, batches of 500, every group in
    the partition Kafka's hash gives it); then the clock runs from `kbroker serve` process start to
    its `offsets_loaded` log event. With it, each broker's empty start-up (process start to the first
    ApiVersions answer) and the floor under kbroker's: a Python process importing asyncio, uvloop and
    structlog, timed from its start to its first line; median of 5 each, in rounds of one of each.
Parts (a), (b) and (d) each run on a fresh broker process, so that none inherits another's state.
(d) memory: RSS of the idle broker (a topic created, 3 s after start-up), then after one simple-consumer
    OffsetCommit v8 (generation -1, empty member id) for each of 1,000, then 10,000, then 100,000 groups
    and a settle; at each count kbroker is restarted on its data dir and timed to its first ApiVersions
    answer and to offsets_loaded (bench/group_scale.py). kbroker --flush always, Tansu and Kafka only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kbroker.bench import brokers, cores, group_scale
from kbroker.bench.group_load import (
    REBALANCE_TIMEOUT_MS,
    BenchError,
    form_group,
    prepare_topic,
    request_rates,
)
from kbroker.bench.loadgen import WARMUP_S, Rate, median_round, rounds_arg
from kbroker.bench.loadgen import run as run_loop
from kbroker.bench.report import (FULL_PEERS, KAFKA, KAFKA_FSYNC, KB_ALWAYS, KB_NEVER, LABELS, NA, PEER,
                                  PEERS, QUICK_PEERS, STARTUP_FLOOR, Figure, machine_note, peers_arg, print_figures,
                                  run_labels)

OFFSET_COMMIT, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 8, 10, 11, 12, 14
JOIN_V, SYNC_V, HEARTBEAT_V, COMMIT_V, FIND_V = 5, 3, 4, 8, 3

PARTS = ("stable", "rates", "replay", "memory")



@dataclass
class Sizes:
    members: list[int] = field(default_factory=lambda: [10, 100, 500, 2_000])
    connections: int = 4
    window: int = 64
    seconds: float = 5.0
    rate_groups: list[int] = field(default_factory=lambda: [1, 100, 10_000])  # 1: one group of `connections`
    rate_rounds: int = 3  # rounds of the one-group rates (the targets'), alternating between the brokers
    replay_records: int = 1_000_000
    memory_groups: list[int] = field(default_factory=lambda: [1_000, 10_000, 100_000])  # 10,000: the target
    heartbeat_ms: int = 200
    session_timeout_ms: int = 45_000   # the Java client's and librdkafka's default
    settle_s: float = 3.0
    stable_timeout_s: float = 180.0
    only: tuple[str, ...] = PARTS
    labels: tuple[str, ...] = field(default_factory=lambda: run_labels(FULL_PEERS))  # the brokers measured

    @classmethod
    def quick(cls) -> Sizes:
        # session timeout 6 s (kbroker's group.min.session.timeout.ms): Tansu holds a first JoinGroup for
        # about half the session timeout, which at 45 s alone would take the quick run past its budget
        return cls(members=[10, 50], seconds=1.5, rate_groups=[1, 100], rate_rounds=1, replay_records=100_000,
                   memory_groups=[1_000], session_timeout_ms=6_000, settle_s=1.5, labels=run_labels(QUICK_PEERS))


# --- (c) replay of __consumer_offsets ---------------------------------------------------------------

def write_offsets_records(data_dir: Path, records: int, *, groups: int = 1000, partitions_per_group: int = 10,
                          batch: int = 500) -> dict:
    """Append `records` OffsetCommitRecords to `__consumer_offsets` in `data_dir`, offline.

    `groups` groups each commit `partitions_per_group` partitions of one topic, round after round with
    rising offsets, until `records` are written (1,000,000 = 1,000 groups x 10 partitions x 100 rounds)."""
    from kbroker.broker import cluster_meta
    from kbroker.broker.storage.log.config import LogConfig
    from kbroker.broker.storage.log.manager import LogManager
    from kbroker.broker.coordinators.offsets_topic import OffsetsTopic
    from kbroker.broker.partitions.service import PartitionService
    from kbroker.coordinator.partitioning import partition_for
    from kbroker.protocol.records.classic_records import OffsetCommitRecord

    async def go() -> dict:
        cluster_meta.load_or_create(data_dir, 1, "")
        logs = LogManager(data_dir, LogConfig(), "never")
        topic = OffsetsTopic(PartitionService.offline(logs), 50)
        n_parts = topic.ensure()
        names = [f"bench-replay-{g}" for g in range(groups)]
        owner = [partition_for(g, n_parts) for g in names]
        pending: dict[int, list] = {}
        now = int(time.time() * 1000)
        written = 0
        rnd = 0
        while written < records:
            for g, name in enumerate(names):
                for p in range(partitions_per_group):
                    if written >= records:
                        break
                    part = owner[g]
                    buf = pending.setdefault(part, [])
                    buf.append(OffsetCommitRecord(name, "bench-replay-topic", p, rnd * 100 + p, -1, "", now))
                    written += 1
                    if len(buf) >= batch:
                        await topic.append_records(part, buf)
                        pending[part] = []
            rnd += 1
        for part, buf in pending.items():
            if buf:
                await topic.append_records(part, buf)
        close = logs.close()
        if asyncio.iscoroutine(close):
            await close
        return {"records": written, "groups": groups, "rounds": rnd}

    return asyncio.run(go())


STARTUP_POLL_S = 0.002
# One start is one sample of a figure that moves by tens of ms with what the disk cache and the other core
# are doing (a first start after other work ran 30-40 ms slower than the next ones): the median of a few.
STARTUP_RUNS = 5


def empty_startup(label: str, timeout: float = 60.0) -> float:
    """Seconds from process start to the first ApiVersions answer, with nothing stored (polled in-process
    every STARTUP_POLL_S, both brokers, so no probe subprocess adds its own start-up and the figure
    overshoots the first answer by a millisecond on average, not five)."""
    started = time.perf_counter()
    if label == PEER:
        handle = brokers.start_tansu(timeout=timeout, poll_s=STARTUP_POLL_S)  # the same ApiVersions poll
        try:
            return time.perf_counter() - started
        finally:
            handle.stop()
    handle = brokers.start_kbroker(flush="always" if label == KB_ALWAYS else "never", wait=False)
    try:
        brokers.wait_answering(handle, timeout, STARTUP_POLL_S)
        return time.perf_counter() - started
    finally:
        handle.stop()


def kafka_startup(timeout: float = brokers.KAFKA_START_TIMEOUT_S) -> tuple[float, float]:
    """Kafka's empty start-up: (seconds to its first ApiVersions answer, seconds to a Metadata answer
    that lists itself), from the spawn of its JVM; its log directory is formatted before, untimed, as
    a KRaft node's is once before its first start. ApiVersions polled as the others' are; Metadata
    every 10 ms, each poll a new connection that the JVM answers on the broker core."""
    handle = brokers.start_kafka(groups=False, timeout=timeout, poll_s=STARTUP_POLL_S)
    try:
        return handle.answered_at - handle.launched_at, handle.serving_at - handle.launched_at
    finally:
        handle.stop()


# The libraries kbroker serves on, imported as `kbroker serve` imports them (the cyclic collector off,
# structlog without rich: see broker/cli.py), then one line out: what any asyncio broker built on them
# pays before code of its own runs.
_FLOOR_CODE = ("import gc; gc.disable(); import sys; sys.modules['rich'] = None; import asyncio, uvloop, structlog; "
               "sys.stdout.write('up\\n'); sys.stdout.flush()")


def startup_floor(timeout: float = 60.0) -> float:
    """Seconds from process start to the first line of a Python process that imports asyncio, uvloop
    and structlog and does nothing else: about the part of `empty_startup` that no code of kbroker's
    can shorten on this machine, printed beside it so a reader can tell the two apart. Started as the
    brokers are (`cores.spawning_broker`, so on the broker's core); killed once it
    has said it is up, or at the timeout if it never does."""
    started = time.perf_counter()
    with cores.spawning_broker():
        proc = subprocess.Popen([sys.executable, "-c", _FLOOR_CODE], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    out = b""
    try:
        while b"\n" not in out:  # os.read, not readline: a partial line must not block past the deadline
            left = started + timeout - time.perf_counter()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:  # it exited without its line
                break
            out += chunk
        took = time.perf_counter() - started
    finally:
        proc.kill()  # up (the figure is taken) or hung: its exit is not part of the figure
        _, err = proc.communicate()
    if out.split(b"\n")[0].strip() != b"up" or b"\n" not in out:
        raise BenchError(f"the start-up floor process failed or hung: {err.decode(errors='replace')[-500:]}")
    return took


def replay_time(records: int, *, timeout: float = 600.0) -> dict:
    """Generate `records` offline, then time `kbroker serve` from process start to `offsets_loaded`."""
    tmp = Path(tempfile.mkdtemp(prefix="kbroker-replay-"))
    try:
        data = tmp / "data"
        t0 = time.perf_counter()
        info = write_offsets_records(data, records)
        info["generate_s"] = time.perf_counter() - t0
        info["bytes_on_disk"] = sum(f.stat().st_size for f in data.glob("__consumer_offsets-*/*.log"))
        started = time.perf_counter()
        handle = brokers.start_kbroker(data_dir=data, wait=False)
        try:
            deadline = started + timeout
            while True:
                events = handle.log_events("offsets_loaded")
                if events:
                    info["seconds"] = time.perf_counter() - started
                    info["load_ms"] = events[0].get("load_ms")
                    info["loaded_records"] = events[0].get("records")
                    break
                if not handle.running:
                    raise BenchError(f"kbroker exited during replay: {handle.log_tail()[-300:]}")
                if time.perf_counter() > deadline:
                    raise BenchError(f"no offsets_loaded event within {timeout:.0f}s")
                time.sleep(0.01)
            info["rss_after_replay"] = brokers.settle_rss(handle, 1.0)
        finally:
            handle.stop()
        if info["loaded_records"] != info["records"]:
            raise BenchError(f"replayed {info['loaded_records']} records, wrote {info['records']}")
        return info
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- running against each broker --------------------------------------------------------------------

def _na(e: BaseException) -> NA:
    return NA(str(e) if isinstance(e, (brokers.Unavailable, BenchError)) else f"{type(e).__name__}: {e}")


def _topic_partitions(sizes: Sizes) -> int:
    """The benchmark topic: a partition for each member of the largest group (members consume from it)."""
    return max(sizes.members + [sizes.connections, 1])


def _run_broker(handle: brokers.BrokerHandle, sizes: Sizes, verbose: bool) -> dict:
    out: dict = {}
    if "memory" in sizes.only:
        out["empty_rss"] = brokers.settle_rss(handle, sizes.settle_s)
    topic = prepare_topic(handle.bootstrap, _topic_partitions(sizes))
    if "memory" in sizes.only:
        out["idle_rss"] = brokers.settle_rss(handle, sizes.settle_s)
    for what, key, version in (("FindCoordinator", FIND_COORDINATOR, FIND_V), ("JoinGroup", JOIN_GROUP, JOIN_V),
                               ("SyncGroup", SYNC_GROUP, SYNC_V), ("Heartbeat", HEARTBEAT, HEARTBEAT_V),
                               ("OffsetCommit", OFFSET_COMMIT, COMMIT_V)):
        try:
            handle.require(key, version, what)
        except brokers.Unavailable as e:
            reason = NA(f"not yet served: {e}") if handle.name == "kbroker" else NA(str(e))
            return {k: reason for k in ("stable", "rates", "memory")}
    if "stable" in sizes.only:
        out["stable"] = {}
        for n in sizes.members:
            if verbose:
                print(f"    {n} members ...", flush=True)
            try:
                res = asyncio.run(form_group(handle.bootstrap, n, group=f"bench-stable-{n}-{uuid.uuid4().hex[:6]}",
                                             topic=topic, heartbeat_ms=sizes.heartbeat_ms,
                                             session_timeout_ms=sizes.session_timeout_ms,
                                             timeout=sizes.stable_timeout_s))
                assigned = sorted(p for ps in res.assignments.values() for p in ps)
                if assigned != list(range(n)):
                    raise BenchError(f"assignments do not cover partitions 0..{n - 1}")
                out["stable"][n] = res
            except Exception as e:
                out["stable"][n] = _na(e)
    if "rates" in sizes.only:
        out["rates"] = {}
        for groups in sizes.rate_groups:
            if verbose:
                print(f"    request rates, {groups:,} group{'s' if groups > 1 else ''} ...", flush=True)
            try:
                out["rates"][groups] = _rates(handle, sizes, groups)
            except Exception as e:
                out["rates"][groups] = _na(e)
    if "memory" in sizes.only:
        try:
            # a fresh broker (see run()) so that the earlier parts leave nothing behind in its heap
            out["memory"] = group_scale.fill(handle, sizes.memory_groups, topic, sizes.settle_s, verbose)
        except Exception as e:
            out["memory"] = _na(e)
    return out


def _rates(handle: brokers.BrokerHandle, sizes: Sizes, groups: int) -> dict[str, Rate]:
    """One round of the Heartbeat and OffsetCommit rates over `groups` groups."""
    return run_loop(lambda: request_rates(
        handle.bootstrap, connections=sizes.connections, window=sizes.window, seconds=sizes.seconds,
        heartbeat_ms=sizes.heartbeat_ms, session_timeout_ms=sizes.session_timeout_ms, groups=groups,
        broker_pid=handle.pid, warmup_s=brokers.warmup_s(handle)))


def _more_rate_rounds(results: dict, sizes: Sizes, verbose: bool) -> None:
    """Rounds 2..rate_rounds of the one-group Heartbeat and OffsetCommit rates, each broker in turn on a
    fresh process, and each figure replaced by the round with the median rate (its CPU figures with it;
    an even count: see `median_round`). The first round is the one `_run_broker` took minutes before.

    Why: this machine's speed drifts by a third within minutes (full runs of 2026-11-27: the same code's
    Heartbeat v4 at 13.8 and 20.9 us of broker CPU per request), and in one round each broker is
    measured at another moment, so the ratio carries the drift. Alternating rounds put every broker at
    every moment, as the start-up figures alternate their starts."""
    first: dict[str, dict[str, Rate]] = {}
    for label in sizes.labels:
        rates = results.get(label, {}).get("rates")
        if isinstance(rates, dict) and isinstance(rates.get(1), dict):
            first[label] = rates[1]  # a broker that failed its first round gets no more

    def measure(handle: brokers.BrokerHandle) -> dict[str, Rate]:
        prepare_topic(handle.bootstrap, _topic_partitions(sizes))
        return _rates(handle, sizes, 1)

    taken = brokers.more_rounds(first, sizes.rate_rounds, measure, what="groups, request rates, 1 group",
                                verbose=verbose)
    for label, rounds in taken.items():
        results[label]["rates"][1] = {key: median_round([r[key] for r in rounds], peer=label in PEERS)
                                      for key in rounds[0]}


# Whose empty start-up is timed: Kafka's flush setting changes nothing before the first write.
STARTUP_LABELS = (KB_ALWAYS, KB_NEVER, PEER, KAFKA)


def _startups(results: dict, labels: tuple[str, ...] = tuple(LABELS)) -> None:
    """Each broker's empty start-up and the floor, median of STARTUP_RUNS each, taken in rounds of one
    start of each (as `python -m bench.startup` does), so that all of them see the same moments of a
    machine whose speed drifts; one that fails is n/a and left out of the later rounds. Kafka's
    start gives two figures (`kafka_startup`), each the median of its own."""
    taken: dict[str, list | NA] = {label: [] for label in (*STARTUP_LABELS, STARTUP_FLOOR)
                                   if label in labels or label == STARTUP_FLOOR}
    for _ in range(STARTUP_RUNS):
        for who, times in taken.items():
            if isinstance(times, NA):
                continue
            try:
                times.append(startup_floor() if who == STARTUP_FLOOR else kafka_startup() if who == KAFKA
                             else empty_startup(who))
            except Exception as e:
                taken[who] = _na(e)
    for who, times in taken.items():
        if who == KAFKA:
            results[who]["startup"] = times if isinstance(times, NA) else statistics.median(t[0] for t in times)
            results[who]["startup_serving"] = times if isinstance(times, NA) else statistics.median(
                t[1] for t in times)
            continue
        figure = times if isinstance(times, NA) else statistics.median(times)
        if who == STARTUP_FLOOR:
            results[KB_ALWAYS]["startup_floor"] = figure
        else:
            results[who]["startup"] = figure


def run(sizes: Sizes, *, verbose: bool = True) -> list[Figure]:
    results: dict[str, dict | NA] = {}
    for label in sizes.labels:
        if verbose:
            print(f"  groups: {label} ...", flush=True)
        r: dict = {}
        # Each part gets a broker of its own, so that none leaves anything behind for the next: the
        # memory figure must not count the earlier parts' heap, and a broker still busy with a group
        # that did not reach Stable (Tansu at 2,000 members) would lend its CPU to the request rates.
        phases = [p for p in (("stable",), ("rates",), ("memory",)) if any(x in sizes.only for x in p)]
        for phase in phases:
            if phase == ("memory",) and label == KB_NEVER:
                continue  # memory does not depend on --flush; the fill would only take time
            if phase != ("rates",) and label == KAFKA_FSYNC:
                continue  # Kafka's flush setting shows where it writes: OffsetCommit, of these parts
            try:
                handle = brokers.start_label(label)
            except brokers.Unavailable as e:
                r.update({k: NA(str(e)) for k in phase})
                continue
            try:
                sub = Sizes(**{**sizes.__dict__, "only": tuple(x for x in sizes.only if x in phase)})
                r.update(_run_broker(handle, sub, verbose))
            except Exception as e:
                r.update({k: _na(e) for k in phase})
            finally:
                handle.stop()
        results[label] = r
    if "rates" in sizes.only and 1 in sizes.rate_groups and sizes.rate_rounds > 1:
        _more_rate_rounds(results, sizes, verbose)
    if "replay" in sizes.only:
        if verbose:
            print(f"  groups: replay of {sizes.replay_records:,} records ...", flush=True)
        try:
            results[KB_ALWAYS]["replay"] = replay_time(sizes.replay_records)
        except Exception as e:
            results[KB_ALWAYS]["replay"] = _na(e)
        _startups(results, sizes.labels)
        if PEER in results:
            results[PEER]["replay"] = NA("Tansu here keeps its groups and offsets in memory: a restart starts "
                                         "empty, there is nothing to replay")
    return figures(results, sizes)


def figures(results: dict[str, dict], s: Sizes) -> list[Figure]:
    out: list[Figure] = []

    def fig(name: str, how: str, unit: str, getter, *, hib: bool = True, fmt: str = ",.1f",
            labels: list[str] = LABELS) -> None:
        f = Figure("groups", name, how, unit, higher_is_better=hib, fmt=fmt)
        for label in labels:
            r = results.get(label)
            if r is None:
                continue
            try:
                v = getter(r)
            except KeyError:
                continue
            f.values[label] = v
        if f.values:  # a figure of a column not in this run (Kafka's Metadata start-up) is left out
            out.append(f)

    def stable_get(n: int, attr: str):
        def get(r: dict):
            v = r["stable"]
            if isinstance(v, NA):
                return v
            x = v[n]
            return x if isinstance(x, NA) else getattr(x, attr)
        return get

    if "stable" in s.only:
        for n in s.members:
            fig(f"{n} members to Stable", f"{n} members, one connection each, join at once (JoinGroup v5 with the "
                f"MEMBER_ID_REQUIRED round trip, SyncGroup v3, Heartbeat v4 every {s.heartbeat_ms} ms once synced); "
                f"first JoinGroup sent to the last SyncGroup response of the first generation holding all {n}; "
                f"session timeout {s.session_timeout_ms / 1000:g} s, rebalance timeout {REBALANCE_TIMEOUT_MS // 1000} s "
                f"(Tansu, which has no initial-delay setting, holds a new group's JoinGroup for about half the "
                f"session timeout; kbroker and Kafka run with an initial rebalance delay of 0)",
                "ms", lambda r, n=n: _scale(stable_get(n, "seconds")(r), 1000), hib=False, fmt=",.0f")
            fig(f"{n} members: JoinGroup requests sent", "JoinGroup requests all members sent until Stable "
                f"({2 * n} if everyone joined one generation: the first join of each only gets a member id)",
                "requests", stable_get(n, "joins"), hib=False, fmt=",.0f")
    if "rates" in s.only:
        for groups in s.rate_groups:
            who = (f"a stable group of {s.connections} members, one connection each" if groups == 1 else
                   f"{groups:,} one-member groups (joined and synced, session timeout 30 s), their requests dealt over {s.connections} "
                   f"connections")
            how = (f"{who}, {s.window} requests in flight per connection, pre-encoded and pipelined "
                   f"(bench/loadgen.py), for {s.seconds:g} s after {WARMUP_S:g} s of warm-up (Kafka: "
                   f"{brokers.JVM_WARMUP_S:g} s, for its JIT compiler); answered requests per "
                   f"second over all connections, every answer checked for error codes")
            if groups == 1 and s.rate_rounds > 1:
                how += (f"; the round with the median rate of {s.rate_rounds}, the brokers in turn, rounds after "
                        f"the first each on a fresh broker process")
            if any(label in s.labels for label in (KAFKA, KAFKA_FSYNC)):
                how += ("; Kafka reads one request of a connection at a time (its network layer mutes a "
                        "connection until that request is answered), so of each window one request is in "
                        "Kafka at once, and its figure is that of as many requests in flight as connections")
            tag = "" if groups == 1 else f", {groups:,} groups"
            for key, name, extra in (("heartbeat", f"Heartbeat v{HEARTBEAT_V} rate{tag}", ""),
                                     ("commit", f"OffsetCommit v{COMMIT_V} rate{tag}",
                                      "; one partition per commit, the member's own, rising offsets; kbroker "
                                      "answers a commit after its fsync with --flush always, Kafka after its "
                                      "append to __consumer_offsets (in the page cache at its default flush, "
                                      "fsynced with flush.messages=1)")):
                f = Figure("groups", name, how + extra, "requests/s", fmt=",.0f")
                for label in LABELS:
                    r = results.get(label, {}).get("rates")
                    if r is None:
                        continue
                    v = r if isinstance(r, NA) else r.get(groups)
                    if v is None:
                        continue
                    if isinstance(v, NA):
                        f.values[label] = v
                    else:
                        rate: Rate = v[key]
                        f.values[label] = rate.per_s
                        f.notes[label] = rate.cpu_note()
                out.append(f)
    if "replay" in s.only:
        rec = s.replay_records
        how = (f"{rec:,} OffsetCommit records (1,000 groups x 10 partitions x {max(1, rec // 10_000)} rounds) written "
               f"offline to __consumer_offsets (50 partitions, batches of 500); `kbroker serve` process start to its "
               f"offsets_loaded log event (includes interpreter start-up); broker at default flags")
        fig(f"offsets replay of {rec:,} commits at start-up", how, "s",
            lambda r: r["replay"] if isinstance(r["replay"], NA) else r["replay"]["seconds"],
            hib=False, fmt=",.2f", labels=[KB_ALWAYS, PEER])
        fig("offsets replay, load_ms of offsets_loaded", "the replay itself as the broker logs it (load_ms)", "s",
            lambda r: r["replay"] if isinstance(r["replay"], NA) else r["replay"]["load_ms"] / 1000,
            hib=False, fmt=",.2f", labels=[KB_ALWAYS, PEER])
        fig("offsets replay rate", "records replayed per second: records / load_ms of offsets_loaded",
            "records/s", lambda r: r["replay"] if isinstance(r["replay"], NA) else
            r["replay"]["loaded_records"] / (r["replay"]["load_ms"] / 1000), fmt=",.0f", labels=[KB_ALWAYS, PEER])
        fig("start-up with nothing stored", f"process start to the first ApiVersions answer, empty data dir / "
            f"memory store, polled every {STARTUP_POLL_S * 1000:g} ms, median of {STARTUP_RUNS} starts taken in "
            "rounds with the other brokers' and the floor's below (the comparable start-up figure for a memory "
            "store); Kafka: from the spawn of its JVM (-Xmx1G -Xms1G, G1), its log directory formatted before, "
            "untimed", "s",
            lambda r: r["startup"], hib=False, fmt=",.2f")
        fig("start-up to Metadata listing itself", "the same Kafka starts: spawn of its JVM to the first Metadata "
            "answer that lists the node (a KRaft broker answers ApiVersions before it has caught up with its "
            "controller and can serve anything else), polled every 10 ms, median of the same starts; kbroker "
            "and Tansu serve Metadata from their first answer", "s",
            lambda r: r["startup_serving"], hib=False, fmt=",.2f", labels=[KAFKA])
        fig(STARTUP_FLOOR, "process start to the first line of a `python -c` that imports the libraries "
            "kbroker serves on (as `kbroker serve` does: the cyclic collector off, structlog without rich) and "
            f"nothing else, started on the broker's core, median of {STARTUP_RUNS}, in rounds with the brokers' "
            "starts: "
            "about the part of the start-up figure above that is not kbroker's own code", "s",
            lambda r: r["startup_floor"], hib=False, fmt=",.2f", labels=[KB_ALWAYS])
    if "memory" in s.only:
        heap = ("; Kafka: a JVM with -Xmx1G -Xms1G (kafka-server-start.sh's default heap), whose RSS grows "
                "toward its heap as the heap's regions are first written")
        fig("idle RSS", f"broker RSS {s.settle_s:g} s after start-up with one topic of {_topic_partitions(s):,} "
            f"partitions created, before any group{heap}", "MiB",
            lambda r: _scale(r["idle_rss"], 1 / 2 ** 20), hib=False)
        fig("idle RSS, nothing stored", f"broker RSS {s.settle_s:g} s after start-up with an empty data dir / "
            "memory store, before any topic (Kafka: once it serves groups, __consumer_offsets created)", "MiB",
            lambda r: _scale(r["empty_rss"], 1 / 2 ** 20), hib=False)
        def mem(n: int, key: str, k: float = 1.0):
            def get(r: dict):
                m = r["memory"]
                if isinstance(m, NA):
                    return m
                if key not in m[n]:
                    raise KeyError(key)   # Tansu: no restart figures
                return m[n][key] * k
            return get

        fill_how = ("groups, each with one simple-consumer OffsetCommit v8 (generation -1, empty member id, one "
                    "partition) over 4 connections, 64 in flight each, added step by step to one broker "
                    f"(bench/group_scale.py); RSS after a {s.settle_s:g} s settle (a fresh broker: parts a and b each ran "
                    f"on one of their own; kbroker --flush always only){heap}")
        for n in s.memory_groups:
            fig(f"RSS with {n:,} groups", f"{n:,} {fill_how}", "MiB", mem(n, "rss", 1 / 2 ** 20), hib=False,
                labels=[KB_ALWAYS, PEER, KAFKA])
            fig(f"RSS growth per group, {n:,} groups", f"(RSS with {n:,} groups - idle RSS) / {n:,}", "bytes",
                lambda r, n=n: r["memory"] if isinstance(r["memory"], NA) else
                (r["memory"][n]["rss"] - r["idle_rss"]) / n, hib=False, fmt=",.0f", labels=[KB_ALWAYS, PEER, KAFKA])
        for n in s.memory_groups:
            fig(f"start-up with {n:,} groups stored", f"kbroker stopped with {n:,} groups' offsets stored and "
                "started on the same data dir: process start to its first ApiVersions answer (Tansu's memory "
                "store restarts empty)", "s", mem(n, "startup_s"), hib=False, fmt=",.2f", labels=[KB_ALWAYS])
            fig(f"offsets loaded with {n:,} groups stored", "the same restart: process start to its "
                "offsets_loaded log event", "s", mem(n, "loaded_s"), hib=False, fmt=",.2f", labels=[KB_ALWAYS])
    return out


def curves(figs: list[Figure], s: Sizes) -> list:
    """The cost curves of issue 17 that this benchmark measures, from its figures."""
    from kbroker.bench.curves import from_figures

    out = []
    if "rates" in s.only:
        for api, name in (("Heartbeat", f"Heartbeat v{HEARTBEAT_V} rate"), ("OffsetCommit", f"OffsetCommit v{COMMIT_V} rate")):
            out.append(from_figures(
                figs, f"{api.lower()}_rate_by_groups", f"{name} by number of groups", "groups", "requests/s",
                {g: name if g == 1 else f"{name}, {g:,} groups" for g in s.rate_groups}, fmt=",.0f",
                note=f"1 group: {s.connections} members of one group; N groups: N one-member groups; "
                     f"{s.connections} connections x {s.window} in flight, {s.seconds:g} s each"))
    if "stable" in s.only:
        out.append(from_figures(figs, "stable_ms_by_members", "time to Stable by members", "members", "ms",
                                {n: f"{n} members to Stable" for n in s.members}, fmt=",.0f",
                                note="see the figures above for how (Tansu holds a new group's first JoinGroup "
                                     "for about half the session timeout)"))
    if "memory" in s.only:
        out.append(from_figures(figs, "rss_by_groups", "broker RSS by groups with committed offsets", "groups", "MiB",
                                {n: f"RSS with {n:,} groups" for n in s.memory_groups},
                                note="one simple-consumer commit per group, filled step by step on one broker"))
        out.append(from_figures(figs, "startup_by_groups", "kbroker restart by groups stored: first ApiVersions "
                                "answer", "groups", "s",
                                {n: f"start-up with {n:,} groups stored" for n in s.memory_groups}, fmt=",.2f",
                                note="Tansu's memory store restarts empty: no figure"))
    return out


def _scale(v, k: float):
    return v if isinstance(v, NA) else v * k


def main(argv: list[str] | None = None) -> int:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")  # the offline replay writer's info events would clutter the report
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Sizes()
    parser.add_argument("--quick", action="store_true", help="small sizes (as `python -m bench --quick`)")
    parser.add_argument("--members", help=f"comma-separated group sizes for (a) (default "
                                          f"{','.join(map(str, d.members))})")
    parser.add_argument("--connections", type=int, help=f"members/connections for (b) (default {d.connections})")
    parser.add_argument("--window", type=int, help=f"requests in flight per connection in (b) (default {d.window})")
    parser.add_argument("--seconds", type=float, help=f"seconds per API in (b) (default {d.seconds:g})")
    parser.add_argument("--rate-groups", help=f"comma-separated group counts for (b) (default "
                                              f"{','.join(map(str, d.rate_groups))})")
    parser.add_argument("--rate-rounds", type=rounds_arg, help=f"rounds of the one-group rates in (b), brokers in turn "
                                                        f"(default {d.rate_rounds})")
    parser.add_argument("--replay-records", type=int, help=f"offset-commit records for (c) "
                                                           f"(default {d.replay_records:,})")
    parser.add_argument("--memory-groups", help=f"comma-separated group counts for (d) (default "
                                                f"{','.join(map(str, d.memory_groups))})")
    parser.add_argument("--heartbeat-ms", type=int, help=f"heartbeat interval of synced members in (a) "
                                                         f"(default {d.heartbeat_ms})")
    parser.add_argument("--session-timeout-ms", type=int, help=f"members' session timeout "
                                                               f"(default {d.session_timeout_ms})")
    parser.add_argument("--only", help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    parser.add_argument("--peers", type=peers_arg, help=f"comma-separated peers to measure beside kbroker "
                                                        f"(default {','.join(FULL_PEERS)}; --quick: "
                                                        f"{','.join(QUICK_PEERS)})")
    args = parser.parse_args(argv)
    from kbroker.bench import cores

    cores.pin_generator()
    cores.raise_fd_limit()
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.members:
        sizes.members = [int(x) for x in args.members.split(",") if x.strip()]
    if args.memory_groups:
        sizes.memory_groups = [int(x) for x in args.memory_groups.split(",") if x.strip()]
    if args.rate_groups:
        sizes.rate_groups = [int(x) for x in args.rate_groups.split(",") if x.strip()]
    for name in ("connections", "window", "seconds", "rate_rounds", "replay_records", "heartbeat_ms",
                 "session_timeout_ms"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    if args.only:
        sizes.only = tuple(x.strip() for x in args.only.split(",") if x.strip() in PARTS)
    if args.peers is not None:
        sizes.labels = run_labels(args.peers)
    print(f"groups: kbroker beside {brokers.peers_line(sizes.labels)}; {machine_note()}")
    figs = run(sizes)
    print_figures(figs, sizes.labels)
    from kbroker.bench.curves import report

    print()
    report(curves(figs, sizes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
