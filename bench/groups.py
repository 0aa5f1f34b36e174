"""Consumer groups (issue 4): rebalance to Stable, coordinator request rates, offsets replay, memory.

    python -m bench.groups [--members 10,100,500] [--connections C] [--window W] [--seconds S]
                           [--replay-records N] [--memory-groups N] [--heartbeat-ms MS] [--session-timeout-ms MS]
                           [--only stable,rates,replay,memory] [--quick]

The load generator speaks the protocol itself with kbroker's codec (`kbroker.protocol.framing` and the
generated messages) over asyncio streams, one TCP connection per member, so both brokers see the
same bytes. kbroker runs with `--group-initial-rebalance-delay-ms 0`, with `--flush always` (its
default: a commit is answered after an fsync group commit) and again with `--flush never`; Tansu runs
with memory storage (its default group settings).

(a) stable: N members start together: FindCoordinator, connect to the coordinator, then (clock starts)
    JoinGroup v5 with an empty member id, the MEMBER_ID_REQUIRED round trip, the leader assigns one
    partition per member, SyncGroup v3. A member answered REBALANCE_IN_PROGRESS (on SyncGroup, or on a
    Heartbeat v4 every --heartbeat-ms once synced) joins again, as a client would. The clock stops at
    the last SyncGroup response of the first generation that holds all N members.
(b) rates: a stable group of C members, one connection each; every connection keeps W requests in
    flight (pipelined) for S seconds of Heartbeat v4, then S seconds of OffsetCommit v8 (one partition
    per request, the member's generation and id). Answered requests per second, all connections.
(c) replay: N OffsetCommit records are written offline into the `__consumer_offsets` segment files of a
    tmp data dir (LogManager + OffsetsTopic.append_records, flush never, batches of 500, every group in
    the partition Kafka's hash gives it); then the clock runs from `kbroker serve` process start to
    its `offsets_loaded` log event.
(d) memory: RSS of the idle broker (a topic created, 3 s after start-up), then after one simple-consumer
    OffsetCommit v8 (generation -1, empty member id) for each of N groups and a settle.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import struct
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kbroker.bench import brokers
from kbroker.bench.report import NA, Figure, machine_note, print_figures
from kbroker.bench.wire import Connection
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
from kbroker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment

OFFSET_COMMIT, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 8, 10, 11, 12, 14
JOIN_V, SYNC_V, HEARTBEAT_V, COMMIT_V, FIND_V = 5, 3, 4, 8, 3

PEER = "tansu (memory storage)"
KB_ALWAYS = "kbroker (flush always)"
KB_NEVER = "kbroker (flush never)"
LABELS = [KB_ALWAYS, KB_NEVER, PEER]
PARTS = ("stable", "rates", "replay", "memory")

REBALANCE_TIMEOUT_MS = 60_000


@dataclass
class Sizes:
    members: list[int] = field(default_factory=lambda: [10, 100, 500])
    connections: int = 4
    window: int = 32
    seconds: float = 5.0
    replay_records: int = 1_000_000
    memory_groups: int = 10_000
    heartbeat_ms: int = 200
    session_timeout_ms: int = 45_000   # the Java client's and librdkafka's default
    settle_s: float = 3.0
    stable_timeout_s: float = 180.0
    only: tuple[str, ...] = PARTS

    @classmethod
    def quick(cls) -> Sizes:
        # session timeout 6 s (kbroker's group.min.session.timeout.ms): Tansu holds a first JoinGroup for
        # about half the session timeout, which at 45 s alone would take the quick run past its budget
        return cls(members=[10, 50], seconds=2.0, replay_records=100_000, memory_groups=1_000,
                   session_timeout_ms=6_000, settle_s=1.5)


class BenchError(RuntimeError):
    pass


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: one topic with the given partitions, no user data."""
    raw = topic.encode()
    return (struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


def decode_assignment(data: bytes) -> list[int]:
    if not data:
        return []
    (_v, n_topics) = struct.unpack_from(">hi", data, 0)
    pos, out = 6, []
    for _ in range(n_topics):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2 + n
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += list(struct.unpack_from(f">{count}i", data, pos))
        pos += 4 * count
    return out


# --- (a) members reach Stable ------------------------------------------------------------------------

@dataclass
class Member:
    conn: Connection
    member_id: str = ""
    generation: int = -1
    assignment: list[int] = field(default_factory=list)
    joins: int = 0


@dataclass
class StableResult:
    members: int
    seconds: float
    generation: int
    joins: int                      # JoinGroup requests sent in all
    assignments: dict[str, list[int]]
    group: str
    topic: str
    member_states: list[Member]


async def _coordinator(bootstrap: str, group: str, client_id: str) -> Connection:
    conn = await Connection.open(bootstrap, client_id)
    for _ in range(100):
        fc = await conn.call(FIND_COORDINATOR, FIND_V, FindCoordinatorRequest(key=group, key_type=0))
        if fc.error_code == 0:
            break
        if fc.error_code not in (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
            raise BenchError(f"FindCoordinator error {fc.error_code}")
        await asyncio.sleep(0.1)
    else:
        raise BenchError("FindCoordinator: no coordinator after 100 tries")
    address = f"{fc.host}:{fc.port}"
    if address != bootstrap:
        await conn.close()
        conn = await Connection.open(address, client_id)
    return conn


async def form_group(bootstrap: str, n: int, *, group: str, topic: str, heartbeat_ms: int = 200,
                     session_timeout_ms: int = 45_000, timeout: float = 180.0,
                     keep_open: bool = False) -> StableResult:
    """N members join `group` concurrently; returns when one generation holds all N and each has synced."""
    conns = await asyncio.gather(*[_coordinator(bootstrap, group, f"bench-member-{i}") for i in range(n)])
    members = [Member(c) for c in conns]
    sub = subscription(topic)
    gen_size: dict[int, int] = {}
    synced: dict[int, int] = {}
    done = asyncio.Event()
    result: dict = {}
    first_join: list[float] = []

    async def run_member(m: Member) -> None:
        while not done.is_set():
            if not first_join:
                first_join.append(time.perf_counter())
            m.joins += 1
            join = await m.conn.call(JOIN_GROUP, JOIN_V, JoinGroupRequest(
                group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id=m.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequestProtocol("range", sub)]))
            if join.error_code == E.MEMBER_ID_REQUIRED:
                m.member_id = join.member_id
                continue
            if join.error_code == E.UNKNOWN_MEMBER_ID:
                m.member_id = ""
                continue
            if join.error_code in (E.REBALANCE_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS):
                await asyncio.sleep(0.01)
                continue
            if join.error_code:
                raise BenchError(f"JoinGroup v{JOIN_V} error {join.error_code}")
            m.member_id, m.generation = join.member_id, join.generation_id
            assignments = []
            if join.leader == m.member_id:
                gen_size[m.generation] = len(join.members)
                assignments = [SyncGroupRequestAssignment(x.member_id, assignment(topic, [i]))
                               for i, x in enumerate(join.members)]
            sync = await m.conn.call(SYNC_GROUP, SYNC_V, SyncGroupRequest(
                group_id=group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None,
                protocol_type="consumer", protocol_name="range", assignments=assignments))
            if sync.error_code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
                continue
            if sync.error_code == E.UNKNOWN_MEMBER_ID:
                m.member_id = ""
                continue
            if sync.error_code:
                raise BenchError(f"SyncGroup v{SYNC_V} error {sync.error_code}")
            m.assignment = decode_assignment(sync.assignment)
            synced[m.generation] = synced.get(m.generation, 0) + 1
            if gen_size.get(m.generation) == n and synced[m.generation] == n and not done.is_set():
                result["end"] = time.perf_counter()
                result["generation"] = m.generation
                done.set()
                return
            # synced, but the group may still grow: heartbeat until told to rejoin or all are in
            while not done.is_set():
                try:
                    await asyncio.wait_for(done.wait(), heartbeat_ms / 1000)
                    return
                except asyncio.TimeoutError:
                    pass
                if gen_size.get(m.generation) == n and synced.get(m.generation) == n:
                    return
                hb = await m.conn.call(HEARTBEAT, HEARTBEAT_V, HeartbeatRequest(
                    group_id=group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None))
                if hb.error_code == E.REBALANCE_IN_PROGRESS:
                    break
                if hb.error_code == E.UNKNOWN_MEMBER_ID:
                    m.member_id = ""
                    break
                if hb.error_code:
                    raise BenchError(f"Heartbeat v{HEARTBEAT_V} error {hb.error_code}")

    tasks = [asyncio.ensure_future(run_member(m)) for m in members]
    try:
        finished = asyncio.ensure_future(done.wait())
        failed = asyncio.ensure_future(asyncio.gather(*tasks))
        await asyncio.wait([finished, failed], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if failed.done() and failed.exception() is not None:
            raise failed.exception()
        if not done.is_set():
            raise BenchError(f"{n} members did not reach Stable within {timeout:.0f}s "
                             f"(generations seen: {dict(sorted(gen_size.items()))}, synced: {synced})")
        await asyncio.wait_for(failed, 30)  # the rest see `done` within one heartbeat interval
    finally:
        for t in tasks:
            t.cancel()
        finished.cancel()
        if not keep_open or not done.is_set():
            await asyncio.gather(*[m.conn.close() for m in members], return_exceptions=True)
    gen = result["generation"]
    if any(m.generation != gen for m in members):
        raise BenchError("members ended in different generations")
    return StableResult(n, result["end"] - first_join[0], gen, sum(m.joins for m in members),
                        {m.member_id: m.assignment for m in members}, group, topic, members)


async def _close_members(res: StableResult) -> None:
    await asyncio.gather(*[m.conn.close() for m in res.member_states], return_exceptions=True)


# --- (b) Heartbeat and OffsetCommit rates ------------------------------------------------------------

async def _pipeline(conn: Connection, frames: list[bytes], api_key: int, version: int, window: int,
                    seconds: float, check) -> int:
    """Keep `window` requests in flight for `seconds`; the frames are pre-encoded and only their
    correlation id is patched. Returns the number of answered requests (errors raise)."""
    loop = asyncio.get_running_loop()
    inflight: list[asyncio.Future] = []
    answered = 0
    deadline = time.perf_counter() + seconds
    i = 0
    while True:
        now = time.perf_counter()
        sending = now < deadline
        while sending and len(inflight) < window:
            conn._correlation += 1
            cid = conn._correlation
            frame = bytearray(frames[i % len(frames)])
            struct.pack_into(">i", frame, 8, cid)
            fut = loop.create_future()
            conn._pending[cid] = (api_key, version, fut)
            conn.writer.write(frame)
            inflight.append(fut)
            i += 1
        if not inflight:
            return answered
        await conn.writer.drain()
        body = await inflight.pop(0)
        check(body)
        answered += 1


async def request_rates(bootstrap: str, *, connections: int, window: int, seconds: float,
                        heartbeat_ms: int = 200, session_timeout_ms: int = 45_000) -> dict:
    """Requests per second over `connections` members of one stable group: Heartbeat v4, OffsetCommit v8."""
    from kbroker.protocol import framing

    group = f"bench-rates-{uuid.uuid4().hex[:8]}"
    topic = _topic_for(bootstrap)
    res = await form_group(bootstrap, connections, group=group, topic=topic, heartbeat_ms=heartbeat_ms,
                           session_timeout_ms=session_timeout_ms, keep_open=True)
    out = {}
    try:
        def hb_frames(m: Member) -> list[bytes]:
            return [framing.encode_request(HEARTBEAT, HEARTBEAT_V, 0, m.conn.client_id, HeartbeatRequest(
                group_id=group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None))]

        def commit_frames(m: Member) -> list[bytes]:
            part = m.assignment[0] if m.assignment else 0
            return [framing.encode_request(OFFSET_COMMIT, COMMIT_V, 0, m.conn.client_id, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=m.generation, member_id=m.member_id,
                group_instance_id=None, topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequestPartition(partition_index=part, committed_offset=off,
                                                 committed_leader_epoch=-1, committed_metadata="")])]))
                for off in range(1, 257)]

        def hb_ok(body) -> None:
            if body.error_code:
                raise BenchError(f"Heartbeat v{HEARTBEAT_V} error {body.error_code}")

        def commit_ok(body) -> None:
            for t in body.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise BenchError(f"OffsetCommit v{COMMIT_V} error {p.error_code}")

        for name, make, api, version, check in (
                ("heartbeat", hb_frames, HEARTBEAT, HEARTBEAT_V, hb_ok),
                ("commit", commit_frames, OFFSET_COMMIT, COMMIT_V, commit_ok)):
            started = time.perf_counter()
            counts = await asyncio.gather(*[
                _pipeline(m.conn, make(m), api, version, window, seconds, check) for m in res.member_states])
            elapsed = time.perf_counter() - started
            out[name] = sum(counts) / elapsed
            out[name + "_count"] = sum(counts)
    finally:
        await _close_members(res)
    return out


_TOPICS: dict[str, str] = {}


def _topic_for(bootstrap: str) -> str:
    """The topic the group benchmarks subscribe to and commit for (created once per broker, 1000 partitions
    would be excessive: commits use the member's partition index, so create as many as the largest group)."""
    return _TOPICS[bootstrap]


def prepare_topic(bootstrap: str, partitions: int) -> str:
    from kbroker.bench.data_path import create_topic

    topic = f"bench-groups-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    _TOPICS[bootstrap] = topic
    return topic


# --- (c) replay of __consumer_offsets ---------------------------------------------------------------

def write_offsets_records(data_dir: Path, records: int, *, groups: int = 1000, partitions_per_group: int = 10,
                          batch: int = 500) -> dict:
    """Append `records` OffsetCommitRecords to `__consumer_offsets` in `data_dir`, offline.

    `groups` groups each commit `partitions_per_group` partitions of one topic, round after round with
    rising offsets, until `records` are written (1,000,000 = 1,000 groups x 10 partitions x 100 rounds)."""
    from kbroker.broker import cluster_meta
    from kbroker.broker.log.config import LogConfig
    from kbroker.broker.log.manager import LogManager
    from kbroker.broker.offsets_topic import OffsetsTopic
    from kbroker.coordinator.partitioning import partition_for
    from kbroker.coordinator.records import OffsetCommitRecord

    async def go() -> dict:
        cluster_meta.load_or_create(data_dir, 1, "")
        logs = LogManager(data_dir, LogConfig(), "never")
        topic = OffsetsTopic(logs, 50)
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


def empty_startup(label: str, timeout: float = 60.0) -> float:
    """Seconds from process start to the first ApiVersions answer, with nothing stored (polled in-process
    every 10 ms, so no probe subprocess adds its own start-up)."""
    started = time.perf_counter()
    if label == PEER:
        handle = brokers.start_tansu(timeout=timeout)  # its readiness check is this same ApiVersions poll
        try:
            return time.perf_counter() - started
        finally:
            handle.stop()
    handle = brokers.start_kbroker(flush="always" if label == KB_ALWAYS else "never", wait=False)
    try:
        while True:
            try:
                brokers.api_versions(handle.bootstrap, timeout=1.0)
                return time.perf_counter() - started
            except (OSError, ValueError):
                pass
            if not handle.running:
                raise BenchError(f"kbroker exited during start-up: {handle.log_tail()[-300:]}")
            if time.perf_counter() - started > timeout:
                raise BenchError(f"kbroker did not answer within {timeout:.0f}s")
            time.sleep(0.01)
    finally:
        handle.stop()


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


# --- (d) memory for N groups with committed offsets ------------------------------------------------

async def commit_many_groups(bootstrap: str, groups: int, topic: str, *, connections: int = 4,
                             window: int = 64) -> int:
    """One simple-consumer OffsetCommit v8 (generation -1, empty member id) for each of `groups` groups."""
    prefix = f"bench-mem-{uuid.uuid4().hex[:6]}"
    conns = [await Connection.open(bootstrap, f"bench-mem-{i}") for i in range(connections)]
    ok = 0

    async def worker(k: int, conn: Connection) -> None:
        nonlocal ok
        inflight: list[asyncio.Future] = []
        names = range(k, groups, connections)
        it = iter(names)
        more = True
        while more or inflight:
            while more and len(inflight) < window:
                g = next(it, None)
                if g is None:
                    more = False
                    break
                inflight.append(conn.send(OFFSET_COMMIT, COMMIT_V, OffsetCommitRequest(
                    group_id=f"{prefix}-{g}", generation_id_or_member_epoch=-1, member_id="",
                    group_instance_id=None, topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=1000 + g,
                                                     committed_leader_epoch=-1, committed_metadata="")])])))
            if not inflight:
                break
            await conn.drain()
            body = await inflight.pop(0)
            for t in body.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise BenchError(f"OffsetCommit v{COMMIT_V} error {p.error_code}")
            ok += 1

    try:
        await asyncio.gather(*[worker(k, c) for k, c in enumerate(conns)])
    finally:
        await asyncio.gather(*[c.close() for c in conns], return_exceptions=True)
    return ok


# --- running against each broker --------------------------------------------------------------------

def _na(e: BaseException) -> NA:
    return NA(str(e) if isinstance(e, (brokers.Unavailable, BenchError)) else f"{type(e).__name__}: {e}")


def _run_broker(handle: brokers.BrokerHandle, sizes: Sizes, verbose: bool) -> dict:
    out: dict = {}
    top = max(sizes.members + [sizes.connections, 1])
    topic = prepare_topic(handle.bootstrap, top)
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
        if verbose:
            print("    request rates ...", flush=True)
        try:
            out["rates"] = asyncio.run(request_rates(handle.bootstrap, connections=sizes.connections,
                                                     window=sizes.window, seconds=sizes.seconds,
                                                     heartbeat_ms=sizes.heartbeat_ms,
                                                     session_timeout_ms=sizes.session_timeout_ms))
        except Exception as e:
            out["rates"] = _na(e)
    if "memory" in sizes.only:
        if verbose:
            print(f"    memory for {sizes.memory_groups:,} groups ...", flush=True)
        try:
            # a fresh broker so that the earlier parts leave nothing behind in its heap
            ok = asyncio.run(commit_many_groups(handle.bootstrap, sizes.memory_groups, topic))
            if ok != sizes.memory_groups:
                raise BenchError(f"{ok} of {sizes.memory_groups} commits answered")
            out["memory"] = {"rss": brokers.settle_rss(handle, sizes.settle_s), "groups": ok}
        except Exception as e:
            out["memory"] = _na(e)
    return out


def _start(label: str) -> brokers.BrokerHandle:
    if label == PEER:
        return brokers.start_tansu()
    return brokers.start_kbroker(flush="always" if label == KB_ALWAYS else "never")


def run(sizes: Sizes, *, verbose: bool = True) -> list[Figure]:
    results: dict[str, dict | NA] = {}
    for label in LABELS:
        if verbose:
            print(f"  groups: {label} ...", flush=True)
        r: dict = {}
        # the memory figure gets a broker of its own, so that parts (a) and (b) leave nothing behind
        phases = [p for p in (("stable", "rates"), ("memory",)) if any(x in sizes.only for x in p)]
        for phase in phases:
            try:
                handle = _start(label)
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
    if "replay" in sizes.only:
        if verbose:
            print(f"  groups: replay of {sizes.replay_records:,} records ...", flush=True)
        try:
            results[KB_ALWAYS]["replay"] = replay_time(sizes.replay_records)
        except Exception as e:
            results[KB_ALWAYS]["replay"] = _na(e)
        for label in LABELS:
            try:
                results[label]["startup"] = empty_startup(label)
            except Exception as e:
                results[label]["startup"] = _na(e)
        results[PEER]["replay"] = NA("Tansu here keeps its groups and offsets in memory: a restart starts empty, "
                                     "there is nothing to replay")
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
                f"session timeout)",
                "ms", lambda r, n=n: _scale(stable_get(n, "seconds")(r), 1000), hib=False, fmt=",.0f")
            fig(f"{n} members: JoinGroup requests sent", "JoinGroup requests all members sent until Stable "
                f"({2 * n} if everyone joined one generation: the first join of each only gets a member id)",
                "requests", stable_get(n, "joins"), hib=False, fmt=",.0f")
    if "rates" in s.only:
        how = (f"a stable group of {s.connections} members, one connection each, {s.window} requests in flight per "
               f"connection, for {s.seconds:g} s; answered requests per second over all connections (load "
               f"generator on the same cores)")
        fig("Heartbeat v4 rate", how, "requests/s",
            lambda r: r["rates"] if isinstance(r["rates"], NA) else r["rates"]["heartbeat"], fmt=",.0f")
        fig("OffsetCommit v8 rate", how + "; one partition per commit, the member's own partition, rising offsets",
            "requests/s", lambda r: r["rates"] if isinstance(r["rates"], NA) else r["rates"]["commit"], fmt=",.0f")
    if "replay" in s.only:
        rec = s.replay_records
        how = (f"{rec:,} OffsetCommit records (1,000 groups x 10 partitions x {max(1, rec // 10_000)} rounds) written "
               f"offline to __consumer_offsets (50 partitions, batches of 500); `kbroker serve` process start to its "
               f"offsets_loaded log event (includes interpreter start-up); broker at default flags")
        fig("offsets replay at start-up", how, "s",
            lambda r: r["replay"] if isinstance(r["replay"], NA) else r["replay"]["seconds"],
            hib=False, fmt=",.2f", labels=[KB_ALWAYS, PEER])
        fig("offsets replay, load_ms of offsets_loaded", "the replay itself as the broker logs it (load_ms)", "s",
            lambda r: r["replay"] if isinstance(r["replay"], NA) else r["replay"]["load_ms"] / 1000,
            hib=False, fmt=",.2f", labels=[KB_ALWAYS, PEER])
        fig("offsets replay rate", "records replayed per second: records / load_ms of offsets_loaded",
            "records/s", lambda r: r["replay"] if isinstance(r["replay"], NA) else
            r["replay"]["loaded_records"] / (r["replay"]["load_ms"] / 1000), fmt=",.0f", labels=[KB_ALWAYS, PEER])
        fig("start-up with nothing stored", "process start to the first ApiVersions answer, empty data dir / "
            "memory store, polled every 10 ms (the comparable start-up figure for a memory store)", "s",
            lambda r: r["startup"], hib=False, fmt=",.2f")
    if "memory" in s.only:
        fig("idle RSS", f"broker RSS {s.settle_s:g} s after start-up with one topic created, before any group",
            "MiB",
            lambda r: _scale(r["idle_rss"], 1 / 2 ** 20), hib=False)
        fig(f"RSS with {s.memory_groups:,} groups", f"{s.memory_groups:,} groups, each with one simple-consumer "
            f"OffsetCommit v8 (generation -1, empty member id, one partition) over 4 connections, 64 in flight each; "
            f"broker RSS after a {s.settle_s:g} s settle (a fresh broker: parts a/b ran on another)", "MiB",
            lambda r: r["memory"] if isinstance(r["memory"], NA) else r["memory"]["rss"] / 2 ** 20, hib=False)
        fig("RSS growth per group", f"(RSS with {s.memory_groups:,} groups - idle RSS) / {s.memory_groups:,}",
            "bytes", lambda r: r["memory"] if isinstance(r["memory"], NA) else
            (r["memory"]["rss"] - r["idle_rss"]) / s.memory_groups, hib=False, fmt=",.0f")
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
    parser.add_argument("--replay-records", type=int, help=f"offset-commit records for (c) "
                                                           f"(default {d.replay_records:,})")
    parser.add_argument("--memory-groups", type=int, help=f"groups for (d) (default {d.memory_groups:,})")
    parser.add_argument("--heartbeat-ms", type=int, help=f"heartbeat interval of synced members in (a) "
                                                         f"(default {d.heartbeat_ms})")
    parser.add_argument("--session-timeout-ms", type=int, help=f"members' session timeout "
                                                               f"(default {d.session_timeout_ms})")
    parser.add_argument("--only", help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.members:
        sizes.members = [int(x) for x in args.members.split(",") if x.strip()]
    for name in ("connections", "window", "seconds", "replay_records", "memory_groups", "heartbeat_ms",
                 "session_timeout_ms"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    if args.only:
        sizes.only = tuple(x.strip() for x in args.only.split(",") if x.strip() in PARTS)
    print(f"groups: kbroker beside {brokers.tansu_version()}; {machine_note()}")
    figs = run(sizes)
    print_figures(figs, LABELS, PEER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
