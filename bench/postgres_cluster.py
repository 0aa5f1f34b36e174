"""A cluster over PostgreSQL (issue 44) beside the single-node local log: produce and consume MB/s and the
OffsetCommit rate through one and three `kbroker serve --cluster` nodes on one PostgreSQL, and the
failover time of three nodes (kill -9 of a leader to the first produce acknowledged again).

    python -m bench.postgres_cluster [--messages N] [--size BYTES] [--rounds R] [--quick]

Set-ups, each started fresh: `local`, one `kbroker serve` on its segment log (`--flush always`, its
default: acknowledged after an fsync); `pg-1`, one node over a scratch PostgreSQL 15 (fsync on,
synchronous_commit=on: acknowledged after COMMIT); `pg-3`, three nodes over one PostgreSQL, topics of
replication factor 3 (each partition led by another node, the clients bootstrapped from all three);
`pg-1-db`, `pg-1` with no tail in memory (`--postgres-tail-bytes 0`): every record consumed is read
back from the database (the read cache's 64 MiB default, much less than the log), the consume figure of
a log larger than its tail. The
figures are bench/data_path.py's (confluent-kafka, acks=all, `--partitions` partitions, every record
read back from the start) and bench/group_load.py's OffsetCommit v8 rate (one stable group of
`--members` members, each with `--window` commits in flight on its own connection to the group's
coordinator). Failover: an idempotent acks=all producer sends to a partition without pause; its leader
is killed (SIGKILL); the time from the kill to the first acknowledgement of a record sent after it is
the failover time (the node's lease, 5 s, then the controller's move, then the client's metadata
refresh); the node is started again for the next round. Each figure is the median of `--rounds` rounds,
every round printed beside it. Nothing is pinned to a core: PostgreSQL's processes are part of the cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kbroker.bench import data_path
from kbroker.bench.group_load import (COMMIT_V, OFFSET_COMMIT, GroupMember, _close_members, form_group,
                                      rate_frames)
from kbroker.bench.loadgen import pipelined_rate
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.postgres import PostgresServer, postgres_missing, start_postgres


@dataclass
class Sizes:
    messages: int = 100_000
    size: int = 1024
    partitions: int = 3
    rounds: int = 3
    members: int = 4
    window: int = 64
    commit_seconds: float = 3.0

    @classmethod
    def quick(cls) -> Sizes:
        return cls(messages=20_000, commit_seconds=1.0)


SETUPS = ("local", "pg-1", "pg-1-db", "pg-3")
# pg-1-db: nothing of a partition's log kept in memory past its commit (docs/postgres-cluster.md)
FROM_DATABASE = ("--postgres-tail-bytes", "0")


def _wait(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def _brokers_seen(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    return len(AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=10).brokers)


def start(setup: str, base: Path, server: PostgresServer | None) -> list[BrokerProcess]:
    """The set-up's nodes, serving; every node sees the others."""
    if setup == "local":
        return [BrokerProcess(base / "local")]
    assert server is not None
    url = server.url(server.create_database())
    count = int(setup.split("-")[1])
    nodes: list[BrokerProcess] = []
    try:
        for k in range(1, count + 1):
            nodes.append(BrokerProcess(base / f"{setup}-node{k}", "--cluster", url, "--node-id", str(k),
                                       *(FROM_DATABASE if setup.endswith("-db") else ())))
        for node in nodes:
            _wait(lambda: _brokers_seen(node.bootstrap) == count, f"{node.bootstrap} sees {count} nodes")
    except BaseException:
        for node in nodes:
            node.kill()
        raise
    return nodes


def commit_rate(bootstrap: str, sizes: Sizes) -> float:
    """OffsetCommit v8 requests answered per second, one group of `members` members pipelining commits to
    its coordinator (wherever FindCoordinator sends them)."""
    async def measure() -> float:
        topic = f"bench-pg-commits-{uuid.uuid4().hex[:6]}"
        data_path.create_topic(bootstrap, topic, sizes.members, replicas=len(bootstrap.split(",")))
        res = await form_group(bootstrap.split(",")[0], sizes.members, group=f"bench-pg-{uuid.uuid4().hex[:8]}",
                               topic=topic, keep_open=True, session_timeout_ms=30_000)
        try:
            host, port = res.member_states[0].conn.writer.get_extra_info("peername")[:2]
            members = [GroupMember(res.group, m.member_id, m.generation, m.assignment[0] if m.assignment else 0)
                       for m in res.member_states]
            _, commits = rate_frames(members, topic, sizes.members)
            rate = await pipelined_rate(f"{host}:{port}", commits, api_key=OFFSET_COMMIT, version=COMMIT_V,
                                        window=sizes.window, seconds=sizes.commit_seconds, broker_pid=None,
                                        warmup_s=0.5)
        finally:
            await _close_members(res)
        return rate.per_s

    return asyncio.run(measure())


def throughput(nodes: list[BrokerProcess], sizes: Sizes) -> dict[str, list[float]]:
    """Per round: produce MB/s, consume MB/s, OffsetCommit/s."""
    bootstrap = ",".join(n.bootstrap for n in nodes)
    out: dict[str, list[float]] = {"produce": [], "consume": [], "commit": []}
    data_path.warm_up(bootstrap, f"bench-pg-warm-{uuid.uuid4().hex[:6]}", sizes.size)
    for _ in range(sizes.rounds):
        topic = f"bench-pg-{uuid.uuid4().hex[:6]}"
        data_path.create_topic(bootstrap, topic, sizes.partitions, replicas=len(nodes))
        out["produce"].append(data_path.produce(bootstrap, topic, sizes.messages, sizes.size)["mb_per_s"])
        out["consume"].append(data_path.consume(bootstrap, topic, sizes.partitions, sizes.messages)["mb_per_s"])
        out["commit"].append(commit_rate(bootstrap, sizes))
    return out


def failover_s(nodes: list[BrokerProcess], timeout: float = 90.0) -> float:
    """kill -9 of the leader of a partition under a producer sending to it alone; seconds from the kill to
    the first acknowledgement of a record sent after it. The node is started again (once its partitions
    moved) before returning."""
    from confluent_kafka import Producer

    from kbroker.tests.integration.cluster_scenarios import leaders

    bootstrap = ",".join(n.bootstrap for n in nodes)
    topic = f"bench-pg-failover-{uuid.uuid4().hex[:6]}"
    data_path.create_topic(bootstrap, topic, 3, replicas=len(nodes))
    victim_id = leaders(nodes[0].bootstrap, topic)[0][0]
    victim = next(n for n in nodes if n.extra_args[n.extra_args.index("--node-id") + 1] == str(victim_id))
    other = next(n for n in nodes if n is not victim)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1,
                         "message.timeout.ms": int(timeout * 1000), "log_level": 0})
    killed_at: list[float] = []
    acked_after: list[float] = []
    stop = threading.Event()

    def delivered(sent: float):
        def on_delivery(err, _msg) -> None:
            if err is None and killed_at and sent > killed_at[0] and not acked_after:
                acked_after.append(time.monotonic())
        return on_delivery

    def send() -> None:
        while not stop.is_set():
            producer.produce(topic, value=b"x" * 100, partition=0, on_delivery=delivered(time.monotonic()))
            producer.poll(0.005)
        producer.flush(timeout)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        time.sleep(2)  # steady
        killed_at.append(time.monotonic())
        victim.kill()
        _wait(lambda: bool(acked_after), "a produce acknowledged after the kill", timeout)
        took = acked_after[0] - killed_at[0]
    finally:
        stop.set()
        sender.join(timeout + 10)
    _wait(lambda: victim_id not in {leader for leader, _ in leaders(other.bootstrap, topic).values()},
          "the killed node's partitions moved")
    victim.start()
    return took


def _spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({' / '.join(format(v, fmt) for v in values)})"


def run(sizes: Sizes, setups: tuple[str, ...] = SETUPS, failover_rounds: int | None = None) -> dict:
    """{setup: {"produce": [MB/s per round], "consume": [...], "commit": [...], "failover": [s, ...]}}; a
    set-up that cannot run (PostgreSQL absent) is {"n/a": reason}."""
    results: dict[str, dict] = {}
    base = Path(tempfile.mkdtemp(prefix="kbroker-bench-pg-"))
    missing = postgres_missing()
    server = start_postgres() if missing is None and any(s.startswith("pg") for s in setups) else None
    try:
        for setup in setups:
            if setup != "local" and server is None:
                results[setup] = {"n/a": missing}
                continue
            nodes = start(setup, base, server)
            try:
                results[setup] = throughput(nodes, sizes)
                if len(nodes) > 1:
                    results[setup]["failover"] = [failover_s(nodes) for _ in range(failover_rounds or sizes.rounds)]
            finally:
                for node in nodes:
                    node.kill()
    finally:
        if server is not None:
            server.stop("fast")
            server.remove()
    return results


def report(results: dict, sizes: Sizes) -> None:
    print(f"  {sizes.messages:,} records of {sizes.size} bytes in {sizes.partitions} partitions (acks=all); "
          f"OffsetCommit v8 from {sizes.members} members x {sizes.window} in flight for {sizes.commit_seconds} s; "
          f"median of {sizes.rounds} rounds (each round)")
    for setup, figures in results.items():
        if "n/a" in figures:
            print(f"  {setup:7} n/a: {figures['n/a']}")
            continue
        line = (f"  {setup:7} produce {_spread(figures['produce'], '.1f')} MB/s, consume "
                f"{_spread(figures['consume'], '.1f')} MB/s, OffsetCommit {_spread(figures['commit'], ',.0f')}/s")
        if "failover" in figures:
            line += f", failover {_spread(figures['failover'], '.2f')} s"
        print(line)


def main(argv: list[str] | None = None) -> int:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")
    parser = argparse.ArgumentParser(prog="python -m bench.postgres_cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--setups", default=",".join(SETUPS), help=f"comma-separated, of {','.join(SETUPS)}")
    parser.add_argument("--quick", action="store_true", help="20,000 records, 1 s of commits")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    for name in ("messages", "size", "rounds"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    setups = tuple(s for s in args.setups.split(",") if s)
    report(run(sizes, setups), sizes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
