"""Memory per idle connection (issue 17's cost curve): broker RSS with 100 / 1,000 / 10,000 idle clients.

    python -m bench.connections [--counts 100,1000,10000] [--quick]

Each connection is a real client's first step: TCP connect, one ApiVersions v3 request, its answer, then
silence. Connections are added in batches of 200 (the listen backlog) until the next count is reached,
the broker's RSS is read after a settle, and every connection is checked to be still open (a broker that
refused or dropped some would otherwise look cheap). 10,000 connections need 10,000 descriptors on each
side: the bench raises its soft RLIMIT_NOFILE to the hard limit and starts brokers with the same
(bench/cores.py), which kbroker's fd budget (broker/network/fd_budget.py) turns into room for them.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from dataclasses import dataclass, field

from kbroker.bench import brokers, cores
from kbroker.bench.curves import Curve
from kbroker.bench.report import KB_ALWAYS, NA, PEER, Value, machine_note

BATCH = 200


@dataclass
class Sizes:
    counts: list[int] = field(default_factory=lambda: [100, 1_000, 10_000])
    settle_s: float = 2.0

    @classmethod
    def quick(cls) -> Sizes:
        return cls(counts=[100, 1_000], settle_s=1.0)


class _Idle(asyncio.Protocol):
    def __init__(self, request: bytes, answered: asyncio.Future) -> None:
        self.request = request
        self.answered = answered
        self.got = b""
        self.open = True
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.got += data
        if len(self.got) >= 4 and len(self.got) >= 4 + int.from_bytes(self.got[:4], "big") \
                and not self.answered.done():
            self.answered.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if not self.answered.done():
            self.answered.set_exception(ConnectionError(f"closed by the broker before answering ({exc!r})"))


async def idle_rss(handle: brokers.BrokerHandle, counts: list[int], settle_s: float) -> dict[int, Value]:
    """{count: broker RSS in bytes with that many idle connections open}."""
    from kbroker.protocol import framing
    from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest

    loop = asyncio.get_running_loop()
    host, port = handle.bootstrap.rsplit(":", 1)
    request = framing.encode_request(18, 3, 1, "bench-idle", ApiVersionsRequest("bench-idle", "1"))
    conns: list[_Idle] = []
    out: dict[int, Value] = {}
    try:
        for count in sorted(counts):
            while len(conns) < count:
                batch = []
                for _ in range(min(BATCH, count - len(conns))):
                    fut = loop.create_future()
                    _, proto = await loop.create_connection(functools.partial(_Idle, request, fut), host, int(port))
                    conns.append(proto)
                    batch.append(fut)
                await asyncio.wait_for(asyncio.gather(*batch), timeout=60)
            await asyncio.sleep(max(0.0, settle_s - 0.5))
            rss = await asyncio.to_thread(brokers.settle_rss, handle, 0.5)
            lost = sum(1 for c in conns if not c.open)
            out[count] = rss if not lost else NA(f"{lost} of {count} connections closed by the broker")
    except (OSError, ConnectionError, asyncio.TimeoutError) as e:
        for count in counts:
            out.setdefault(count, NA(f"{type(e).__name__}: {e}"))
    finally:
        for c in conns:
            if c.transport is not None:
                c.transport.close()
        await asyncio.sleep(0)
    return out


def run(sizes: Sizes, *, verbose: bool = True) -> Curve:
    from kbroker.bench.loadgen import run as run_loop

    limit = cores.raise_fd_limit()
    curve = Curve("rss_by_idle_connections", "broker RSS by idle connections", "idle connections", "MiB",
                  sorted(sizes.counts),
                  note=f"each connection: connect, ApiVersions v3, its answer, then idle; RSS {sizes.settle_s:g} s "
                       f"after the last one; every connection checked open; descriptor limit {limit:,} on both sides")
    for label in (KB_ALWAYS, PEER):
        if verbose:
            print(f"  connections: {label} ...", flush=True)
        try:
            handle = brokers.start_tansu() if label == PEER else brokers.start_kbroker(flush="always")
        except brokers.Unavailable as e:
            curve.points[label] = {c: NA(str(e)) for c in sizes.counts}
            continue
        try:
            rss = run_loop(lambda h=handle: idle_rss(h, sizes.counts, sizes.settle_s))
            assert isinstance(rss, dict)
            curve.points[label] = {c: v if isinstance(v, NA) else v / 2 ** 20 for c, v in rss.items()}
        finally:
            handle.stop()
    return curve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--counts", help="comma-separated connection counts (default 100,1000,10000)")
    args = parser.parse_args(argv)
    cores.pin_generator()
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.counts:
        sizes.counts = [int(x) for x in args.counts.split(",") if x.strip()]
    print(f"connections: kbroker beside {brokers.tansu_version()}; {machine_note()}")
    from kbroker.bench.curves import report

    report([run(sizes)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
