"""Consumer groups of the new protocol (KIP-848, issue 12): time to full assignment, heartbeat rate.

    python -m bench.consumer_groups [--members 10,100,500] [--connections C] [--window W] [--seconds S]
                                    [--heartbeat-ms MS] [--rate-rounds N] [--peers tansu,kafka] [--quick]

The load generator speaks ConsumerGroupHeartbeat v1 with kbroker's codec, one TCP connection per
member, as librdkafka does with `group.protocol=consumer`: a member joins with epoch 0, its own
member id (KIP-1082) and the topic's name; it heartbeats again at once when its assignment or
epoch changed (acknowledging what it now owns, revoked partitions already dropped), otherwise
every --heartbeat-ms.

(a) assigned: N members join at once a group subscribed to a topic of N partitions; the clock runs
    from the first join to the moment every member holds exactly one partition at the same epoch
    (the group's target) and the members' partitions cover the topic: fully assigned.
(b) rate: a fully assigned group of C members; every connection keeps W ConsumerGroupHeartbeat
    requests in flight (the steady-state heartbeat: member id and epoch, every other field null)
    for S seconds. Answered requests per second: the round with the median rate of --rate-rounds (3),
    the brokers that serve it in turn (kbroker's two flush policies, Kafka), each round with a fresh
    group, rounds after the first on a fresh broker process (the first on the broker of (a)).

Tansu 0.6 advertises ConsumerGroupDescribe v0 but not ConsumerGroupHeartbeat: its column prints
what it answers (its ApiVersions range, and a ConsumerGroupDescribe of a group). Apache Kafka 4.4
serves the protocol with its uniform server assignor; it runs at its default flush only, since a
steady heartbeat writes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from dataclasses import dataclass, field

from kbroker.bench import brokers
from kbroker.bench.group_load import BenchError, _coordinator, prepare_topic
from kbroker.bench.loadgen import WARMUP_S, Rate, median_round, pipelined_rate, rounds_arg, run as run_loop
from kbroker.bench.report import (FULL_PEERS, KAFKA, KB_ALWAYS, KB_NEVER, NA, PEER, PEERS, QUICK_PEERS, Figure,
                                  machine_note, peers_arg, print_figures, run_labels)
from kbroker.protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from kbroker.protocol.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest, TopicPartitions

CGH, CGD = 68, 69
CGH_V = 1
# The columns this benchmark can measure: a steady heartbeat writes nothing, so Kafka's flush setting
# would change nothing.
LABELS = [KB_ALWAYS, KB_NEVER, PEER, KAFKA]


@dataclass
class Sizes:
    members: list[int] = field(default_factory=lambda: [10, 100, 500])
    connections: int = 4
    window: int = 32
    seconds: float = 5.0
    heartbeat_ms: int = 200
    timeout_s: float = 180.0
    rate_rounds: int = 3  # rounds of the rate (a target's), alternating between the brokers that serve it
    labels: tuple[str, ...] = field(default_factory=lambda: run_labels(FULL_PEERS))  # the brokers measured

    @classmethod
    def quick(cls) -> Sizes:
        return cls(members=[10, 50], seconds=2.0, rate_rounds=1, labels=run_labels(QUICK_PEERS))


@dataclass
class _Member:
    conn: object
    member_id: str
    epoch: int = 0
    owned: tuple = ()
    changed: bool = True


async def fully_assigned(bootstrap: str, n: int, topic: str, *, heartbeat_ms: int, timeout: float,
                         keep_open: bool = False) -> tuple[float, int, list[_Member], str]:
    group = f"bench-cg-{n}-{uuid.uuid4().hex[:6]}"
    conns = await asyncio.gather(*[_coordinator(bootstrap, group, f"bench-cg-member-{i}") for i in range(n)])
    members = [_Member(c, str(uuid.uuid4())) for c in conns]
    done = asyncio.Event()
    started = time.perf_counter()
    finished: list[float] = []

    def complete() -> bool:
        if any(m.epoch <= 0 for m in members):
            return False
        epochs = {m.epoch for m in members}
        parts = [p for m in members for _, ps in m.owned for p in ps]
        return len(epochs) == 1 and sorted(parts) == list(range(n)) and all(
            sum(len(ps) for _, ps in m.owned) == 1 for m in members)

    async def run(m: _Member) -> None:
        first = True
        while not done.is_set():
            if first:
                req = ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id=m.member_id, member_epoch=0, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=60_000, subscribed_topic_names=[topic], subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=[])
            else:
                req = ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id=m.member_id, member_epoch=m.epoch, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=[TopicPartitions(t, list(ps)) for t, ps in m.owned]
                    if m.changed else None)
            first = False
            r = await m.conn.call(CGH, CGH_V, req)
            if r.error_code:
                raise BenchError(f"ConsumerGroupHeartbeat v{CGH_V} error {r.error_code}: {r.error_message}")
            m.changed = r.member_epoch != m.epoch or r.assignment is not None
            m.epoch = r.member_epoch
            if r.assignment is not None:
                m.owned = tuple((tp.topic_id, tuple(tp.partitions)) for tp in r.assignment.topic_partitions)
            if complete() and not done.is_set():
                finished.append(time.perf_counter())
                done.set()
                return
            if not m.changed:
                try:
                    await asyncio.wait_for(done.wait(), heartbeat_ms / 1000)
                except TimeoutError:
                    pass

    tasks = [asyncio.create_task(run(m)) for m in members]
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except TimeoutError:
        raise BenchError(f"{n} members not fully assigned within {timeout:.0f}s") from None
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise t.exception()
        if not keep_open:
            await asyncio.gather(*[m.conn.close() for m in members], return_exceptions=True)
    return finished[0] - started, members[0].epoch, members, group


async def heartbeat_rate(bootstrap: str, topic: str, *, connections: int, window: int, seconds: float,
                         heartbeat_ms: int, broker_pid: int | None = None, warmup_s: float = WARMUP_S) -> Rate:
    from kbroker.protocol import framing

    _, _, members, group = await fully_assigned(bootstrap, connections, topic, heartbeat_ms=heartbeat_ms,
                                                timeout=60, keep_open=True)
    try:
        frames = [[framing.encode_request(CGH, CGH_V, 0, "bench-rate", ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=m.member_id, member_epoch=m.epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=None))] for m in members]
        return await pipelined_rate(bootstrap, frames, api_key=CGH, version=CGH_V, window=window, seconds=seconds,
                                    broker_pid=broker_pid, warmup_s=warmup_s)
    finally:
        await asyncio.gather(*[m.conn.close() for m in members], return_exceptions=True)


async def _describe(bootstrap: str, group: str) -> str:
    from kbroker.bench.wire import Connection

    conn = await Connection.open(bootstrap, "bench-cg-describe")
    try:
        r = await conn.call(CGD, 0, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        g = r.groups[0]
        return f"error {g.error_code}, state {g.group_state!r}, {len(g.members)} members"
    finally:
        await conn.close()


def _run(handle: brokers.BrokerHandle, sizes: Sizes, verbose: bool) -> dict:
    out: dict = {}
    try:
        handle.require(CGH, CGH_V, "ConsumerGroupHeartbeat")
    except brokers.Unavailable as e:
        apis = handle.apis()
        described = "not advertised"
        if CGD in apis:
            described = asyncio.run(_describe(handle.bootstrap, "bench-cg-probe"))
        reason = NA(f"{e}; ConsumerGroupDescribe v{apis[CGD][0]}-{apis[CGD][1]} of a group answers: {described}"
                    if CGD in apis else str(e))
        return {"assigned": reason, "rate": reason}
    out["assigned"] = {}
    for n in sizes.members:
        if verbose:
            print(f"    {n} members ...", flush=True)
        topic = prepare_topic(handle.bootstrap, n)
        try:
            seconds, epoch, _, _ = asyncio.run(fully_assigned(handle.bootstrap, n, topic,
                                                              heartbeat_ms=sizes.heartbeat_ms,
                                                              timeout=sizes.timeout_s))
            out["assigned"][n] = (seconds, epoch)
        except Exception as e:  # noqa: BLE001 - reported as n/a with the reason
            out["assigned"][n] = NA(f"{type(e).__name__}: {e}")
    if verbose:
        print("    heartbeat rate ...", flush=True)
    try:
        out["rate"] = _rate(handle, sizes)
    except Exception as e:  # noqa: BLE001
        out["rate"] = NA(f"{type(e).__name__}: {e}")
    return out


def _rate(handle: brokers.BrokerHandle, sizes: Sizes) -> Rate:
    """One round of the ConsumerGroupHeartbeat rate, on a topic and group of its own."""
    topic = prepare_topic(handle.bootstrap, sizes.connections)
    return run_loop(lambda: heartbeat_rate(handle.bootstrap, topic, connections=sizes.connections,
                                           window=sizes.window, seconds=sizes.seconds,
                                           heartbeat_ms=sizes.heartbeat_ms, broker_pid=handle.pid,
                                           warmup_s=brokers.warmup_s(handle)))


def _more_rate_rounds(results: dict[str, dict], sizes: Sizes, verbose: bool) -> None:
    """Rounds 2..rate_rounds of the rate, the brokers that gave a first one in turn, each on a fresh
    process (`brokers.more_rounds`); each figure becomes the round with the median rate
    (bench/loadgen.py `median_round`).

    Why: as for the one-group Heartbeat and OffsetCommit rates (bench/groups.py), this machine's speed
    drifts within minutes, and the figure meets a fixed bound (50k/s) and a ratio to Tansu's Heartbeat
    v4, itself the median of rounds. Tansu serves no ConsumerGroupHeartbeat: kbroker's policies and
    Kafka alternate."""
    first = {label: r["rate"] for label, r in results.items() if isinstance(r.get("rate"), Rate)}
    taken = brokers.more_rounds(first, sizes.rate_rounds, lambda handle: _rate(handle, sizes),
                                what="consumer groups, heartbeat rate", verbose=verbose)
    for label, rounds in taken.items():
        results[label]["rate"] = median_round(rounds, peer=label in PEERS)


def run(sizes: Sizes, *, verbose: bool = True) -> list[Figure]:
    results: dict[str, dict] = {}
    for label in [label for label in LABELS if label in sizes.labels]:
        if verbose:
            print(f"  consumer groups: {label} ...", flush=True)
        try:
            handle = brokers.start_label(label)
        except brokers.Unavailable as e:
            results[label] = {"assigned": NA(str(e)), "rate": NA(str(e))}
            continue
        try:
            results[label] = _run(handle, sizes, verbose)
        finally:
            handle.stop()
    if sizes.rate_rounds > 1:
        _more_rate_rounds(results, sizes, verbose)
    return figures(results, sizes)


def figures(results: dict[str, dict], s: Sizes) -> list[Figure]:
    out: list[Figure] = []
    for n in s.members:
        f = Figure("consumer_groups", f"{n} new-protocol members fully assigned",
                   f"{n} members, one connection each, ConsumerGroupHeartbeat v{CGH_V} joins at once (own member ids, "
                   f"one topic of {n} partitions, server-side uniform assignor); an ack heartbeat at once after "
                   f"each change, else every {s.heartbeat_ms} ms; first join to every member holding exactly one "
                   f"partition at the same epoch", "ms", higher_is_better=False, fmt=",.0f")
        for label, r in results.items():
            v = r["assigned"]
            if not isinstance(v, NA):
                v = v[n]
            f.values[label] = v if isinstance(v, NA) else v[0] * 1000
        out.append(f)
    f = Figure("consumer_groups", f"ConsumerGroupHeartbeat v{CGH_V} rate",
               f"a fully assigned group of {s.connections} members, one connection each, {s.window} steady-state "
               f"heartbeats in flight per connection, for {s.seconds:g} s after {WARMUP_S:g} s of warm-up (Kafka: "
               f"{brokers.JVM_WARMUP_S:g} s, for its JIT compiler); answered requests per second"
               + (f"; the round with the median rate of {s.rate_rounds}, the brokers in turn, rounds "
                  f"after the first each on a fresh broker process" if s.rate_rounds > 1 else "")
               + ("; Kafka reads one request of a connection at a time (its network layer mutes a connection until "
                  "that request is answered): of each window, one request per connection is in Kafka at once"
                  if KAFKA in results else ""),
               "requests/s", fmt=",.0f")
    for label, r in results.items():
        rate = r["rate"]
        f.values[label] = rate if isinstance(rate, NA) else rate.per_s
        if isinstance(rate, Rate):
            f.notes[label] = rate.cpu_note()
    out.append(f)
    return out


def main(argv: list[str] | None = None) -> int:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Sizes()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--members", help=f"comma-separated group sizes (default {','.join(map(str, d.members))})")
    parser.add_argument("--connections", type=int, help=f"members for the rate (default {d.connections})")
    parser.add_argument("--window", type=int, help=f"requests in flight per connection (default {d.window})")
    parser.add_argument("--seconds", type=float, help=f"seconds of the rate (default {d.seconds:g})")
    parser.add_argument("--heartbeat-ms", type=int, help=f"idle heartbeat interval (default {d.heartbeat_ms})")
    parser.add_argument("--rate-rounds", type=rounds_arg, help=f"rounds of the rate, brokers in turn (default {d.rate_rounds})")
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
    for name in ("connections", "window", "seconds", "heartbeat_ms", "rate_rounds"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    if args.peers is not None:
        sizes.labels = run_labels(args.peers)
    print(f"consumer groups (KIP-848): kbroker beside {brokers.peers_line(sizes.labels)}; {machine_note()}")
    print_figures(run(sizes), sizes.labels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
