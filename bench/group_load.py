"""The consumer-group load generator of `bench/groups.py`: members that speak the protocol with
kbroker's own codec over asyncio streams (one connection each), so every broker sees the same bytes.

form_group: N members through FindCoordinator, JoinGroup v5 (with the MEMBER_ID_REQUIRED round trip),
the leader's assignment and SyncGroup v3, until one generation holds them all; request_rates:
Heartbeat v4 / OffsetCommit v8 rates from bench/loadgen.py (pre-encoded, pipelined, counted by frame
length) for members of one group or of N one-member groups; commit_many_groups: one simple-consumer
commit per group.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from dataclasses import dataclass, field

from kbroker.bench.loadgen import WARMUP_S, Rate, pipelined_rate
from kbroker.bench.wire import Connection
from kbroker.protocol.consumer_protocol import assigned_partitions, encode_assignment
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

REBALANCE_TIMEOUT_MS = 60_000
OFFSET_COMMIT, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 8, 10, 11, 12, 14
JOIN_V, SYNC_V, HEARTBEAT_V, COMMIT_V, FIND_V = 5, 3, 4, 8, 3

class BenchError(RuntimeError):
    pass


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: one topic with the given partitions, no user data."""
    return encode_assignment([(topic, partitions)], 0)


def decode_assignment(data: bytes) -> list[int]:
    return [p for _, parts in assigned_partitions(data) for p in parts]


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
        # members cancelled below end the gather with CancelledError: retrieve it, or asyncio logs it
        failed.add_done_callback(lambda f: f.cancelled() or f.exception())
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

@dataclass
class GroupMember:
    """A member that has synced: enough to build its Heartbeat and OffsetCommit frames."""

    group: str
    member_id: str
    generation: int
    partition: int


SETUP_CONNECTIONS = 2_000
KEEPALIVE_S = 8.0


async def single_member_groups(bootstrap: str, n: int, topic: str, *,
                               session_timeout_ms: int = 45_000) -> list[GroupMember]:
    """`n` groups of one member each, through JoinGroup v5 (with the MEMBER_ID_REQUIRED round trip) and
    SyncGroup v3 (a single broker is every group's coordinator). Each member owns partition 0.

    One connection per group up to SETUP_CONNECTIONS (opened 200 at a time), joining at once: Tansu
    answers one connection's requests one after another and holds a new group's first JoinGroup for
    about half the session timeout, so groups sharing a connection join one hold after another (10,000
    groups: 5 holds). A member told UNKNOWN_MEMBER_ID (its pending id expired while the broker was
    busy) joins again without an id, as a client does."""
    prefix = f"bench-ng-{uuid.uuid4().hex[:6]}"
    sub = subscription(topic)
    connections = min(n, SETUP_CONNECTIONS)
    conns: list[Connection] = []
    members: list[GroupMember] = []

    async def one(conn: Connection, g: int) -> GroupMember:
        group, member_id = f"{prefix}-{g}", ""
        for _ in range(20):
            join = await conn.call(JOIN_GROUP, JOIN_V, JoinGroupRequest(
                group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id=member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequestProtocol("range", sub)]))
            if join.error_code == E.MEMBER_ID_REQUIRED:
                member_id = join.member_id
                continue
            if join.error_code == E.UNKNOWN_MEMBER_ID:
                member_id = ""
                continue
            if join.error_code in (E.REBALANCE_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS):
                await asyncio.sleep(0.05)
                continue
            if join.error_code:
                raise BenchError(f"JoinGroup v{JOIN_V} error {join.error_code} for a one-member group")
            sync = await conn.call(SYNC_GROUP, SYNC_V, SyncGroupRequest(
                group_id=group, generation_id=join.generation_id, member_id=join.member_id, group_instance_id=None,
                protocol_type="consumer", protocol_name="range",
                assignments=[SyncGroupRequestAssignment(join.member_id, assignment(topic, [0]))]))
            if sync.error_code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
                continue
            if sync.error_code == E.UNKNOWN_MEMBER_ID:
                member_id = ""
                continue
            if sync.error_code:
                raise BenchError(f"SyncGroup v{SYNC_V} error {sync.error_code} for a one-member group")
            return GroupMember(group, join.member_id, join.generation_id, 0)
        raise BenchError(f"group {group}: no stable generation after 20 joins")

    setup_done = asyncio.Event()

    async def worker(k: int) -> None:
        mine: list[GroupMember] = []

        async def keepalive() -> None:
            # members synced early would expire while later groups still join: heartbeat them, as a client does
            while not setup_done.is_set():
                try:
                    await asyncio.wait_for(setup_done.wait(), KEEPALIVE_S)
                except asyncio.TimeoutError:
                    for m in list(mine):
                        await conns[k].call(HEARTBEAT, HEARTBEAT_V, HeartbeatRequest(
                            group_id=m.group, generation_id=m.generation, member_id=m.member_id,
                            group_instance_id=None))

        alive = asyncio.ensure_future(keepalive())
        try:
            for g in range(k, n, connections):
                mine.append(await one(conns[k], g))
            members.extend(mine)
        finally:
            alive.cancel()

    try:
        while len(conns) < connections:
            conns += await asyncio.gather(*[Connection.open(bootstrap, f"bench-ng-{len(conns) + i}")
                                            for i in range(min(200, connections - len(conns)))])
        workers = asyncio.gather(*[worker(k) for k in range(connections)])
        try:
            await workers
        finally:
            setup_done.set()
    finally:
        await asyncio.gather(*[c.close() for c in conns], return_exceptions=True)
    return members


def heartbeat_frame(m: GroupMember) -> bytes:
    from kbroker.protocol import framing

    return framing.encode_request(HEARTBEAT, HEARTBEAT_V, 0, "bench-rate", HeartbeatRequest(
        group_id=m.group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None))


def commit_frame(m: GroupMember, topic: str, offset: int) -> bytes:
    from kbroker.protocol import framing

    return framing.encode_request(OFFSET_COMMIT, COMMIT_V, 0, "bench-rate", OffsetCommitRequest(
        group_id=m.group, generation_id_or_member_epoch=m.generation, member_id=m.member_id,
        group_instance_id=None, topics=[OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequestPartition(partition_index=m.partition, committed_offset=offset,
                                         committed_leader_epoch=-1, committed_metadata="")])]))


def rate_frames(members: list[GroupMember], topic: str, connections: int) -> tuple[list[list[bytes]], list[list[bytes]]]:
    """(Heartbeat frames, OffsetCommit frames) per connection: the members dealt round-robin, each
    member's commits with rising offsets (as many rounds as fit a ring of 256 frames, at least one)."""
    hb: list[list[bytes]] = [[] for _ in range(connections)]
    oc: list[list[bytes]] = [[] for _ in range(connections)]
    per_conn = max(1, -(-len(members) // connections))
    rounds = max(1, 256 // per_conn)
    for i, m in enumerate(members):
        hb[i % connections].append(heartbeat_frame(m))
    for r in range(rounds):
        for i, m in enumerate(members):
            oc[i % connections].append(commit_frame(m, topic, 1 + r))
    return hb, oc


async def request_rates(bootstrap: str, *, connections: int, window: int, seconds: float,
                        heartbeat_ms: int = 200, session_timeout_ms: int = 45_000, groups: int = 1,
                        broker_pid: int | None = None, warmup_s: float = WARMUP_S) -> dict[str, Rate]:
    """Requests per second of Heartbeat v4, then OffsetCommit v8, over `connections` connections with
    `window` in flight each (bench/loadgen.py). groups=1: one stable group of `connections` members, one
    connection each; groups=N>1: N one-member groups, their requests dealt over the connections."""
    topic = _topic_for(bootstrap)
    if groups == 1:
        res = await form_group(bootstrap, connections, group=f"bench-rates-{uuid.uuid4().hex[:8]}", topic=topic,
                               heartbeat_ms=heartbeat_ms, session_timeout_ms=session_timeout_ms, keep_open=True)
        members = [GroupMember(res.group, m.member_id, m.generation, m.assignment[0] if m.assignment else 0)
                   for m in res.member_states]
    else:
        res = None
        # A shorter session here: Tansu holds each new group's first join for half of it. 30 s still
        # outlasts the commit phase, in which no heartbeat keeps a member alive.
        members = await single_member_groups(bootstrap, groups, topic,
                                             session_timeout_ms=min(session_timeout_ms, 30_000))
    hb, oc = rate_frames(members, topic, connections)
    out: dict[str, Rate] = {}
    try:
        out["heartbeat"] = await pipelined_rate(bootstrap, hb, api_key=HEARTBEAT, version=HEARTBEAT_V, window=window,
                                                seconds=seconds, broker_pid=broker_pid, warmup_s=warmup_s)
        out["commit"] = await pipelined_rate(bootstrap, oc, api_key=OFFSET_COMMIT, version=COMMIT_V, window=window,
                                             seconds=seconds, broker_pid=broker_pid, warmup_s=warmup_s)
    finally:
        if res is not None:
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


# --- (d) memory for N groups with committed offsets ------------------------------------------------

async def commit_many_groups(bootstrap: str, groups: int, topic: str, *, connections: int = 4,
                             window: int = 64, prefix: str | None = None, first: int = 0) -> int:
    """One simple-consumer OffsetCommit v8 (generation -1, empty member id) for each of `groups` groups,
    named <prefix>-<first> onwards."""
    prefix = prefix or f"bench-mem-{uuid.uuid4().hex[:6]}"
    conns = [await Connection.open(bootstrap, f"bench-mem-{i}") for i in range(connections)]
    ok = 0

    async def worker(k: int, conn: Connection) -> None:
        nonlocal ok
        inflight: list[asyncio.Future] = []
        names = range(first + k, first + groups, connections)
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
