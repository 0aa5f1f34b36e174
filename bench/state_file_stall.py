"""A large client-quota file: how long one small AlterClientQuotas takes, and holds every other client.

    python -m bench.state_file_stall [--entities N]

Fills a fresh kbroker with N client-id quota entities in requests of 10,000 (Kafka's bound per
operation), then sends five one-entry AlterClientQuotas, each answered once the whole file is
durable again. Meanwhile a second client sends ApiVersions every 20 ms; its worst round trip is how
long any client waited behind those writes. Rendered and written on the event loop, the file held
everyone for the whole write (4.9 s at 200,000 entities on the slow host); on the state-files
worker (broker/state_file.py) the loop is free. Not part of `make bench`: no peer, and a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import time

BOUND = 10_000


async def _run(bootstrap: str, entities: int) -> dict:
    from kbroker.bench.wire import Connection, worst_round_trip
    from kbroker.protocol.messages import alter_client_quotas_request as aq

    def entry(name: str) -> aq.EntryData:
        return aq.EntryData(entity=[aq.EntityData("client-id", name)], ops=[aq.OpData("producer_byte_rate", 1e6, False)])

    admin = await Connection.open(bootstrap, "admin")
    other = await Connection.open(bootstrap, "other")
    for start in range(0, entities, BOUND):
        r = await admin.call(49, 1, aq.AlterClientQuotasRequest(
            entries=[entry(f"client-{i:08d}") for i in range(start, min(entities, start + BOUND))]))
        assert {e.error_code for e in r.entries} == {0}, {e.error_code for e in r.entries}

    async def small_changes() -> list[float]:
        took = []
        for i in range(5):
            started = time.perf_counter()
            await admin.call(49, 1, aq.AlterClientQuotasRequest(entries=[entry(f"small-{i}")]))
            took.append(time.perf_counter() - started)
        return took

    changes = asyncio.get_running_loop().create_task(small_changes())
    worst, _ = await worst_round_trip(other, changes)
    took = await changes
    await admin.close()
    await other.close()
    return {"alter_s": took, "worst_ms": 1000 * worst}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_file_stall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=200_000)
    args = parser.parse_args(argv)
    from kbroker.bench.brokers import start_kbroker

    broker = start_kbroker(flush="always")
    try:
        r = asyncio.run(_run(broker.bootstrap, args.entities))
    finally:
        broker.stop()
    print(f"{args.entities:,} quota entities: one-entry AlterClientQuotas answered in "
          f"{', '.join(f'{s:.2f}' for s in r['alter_s'])} s; another client's worst round trip {r['worst_ms']:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
