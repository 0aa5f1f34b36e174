"""Appends to the PostgreSQL log (issue 44): MB/s committed by one node's group commit, into a scratch
PostgreSQL 15 on this machine (fsync on, synchronous_commit=on), as acks=all producers see it.

`python -m bench.postgres_append [--partitions 8] [--producers 32] [--batch-kib 16] [--seconds 10] [--rounds 3]`

Each producer appends one batch of `--batch-kib` to its partition, awaits its commit, and appends the
next (one in flight per producer, as a producer with max.in.flight 1); the node's rounds commit what
every producer has appended meanwhile in one transaction. Prints each round's MB/s, commits per
second and batches per commit, then the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from kbroker.broker.storage.api import AppendOrigin
from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.postgres import metadata
from kbroker.broker.storage.postgres.log import PostgresLog
from kbroker.broker.storage.postgres.schema import connect, prepare_schema
from kbroker.protocol import record_batch as rb
from kbroker.tests.integration.postgres import require_postgres, start_postgres


def batch(kib: int) -> bytes:
    now = int(time.time() * 1000)
    value = b"x" * 1024
    return rb.encode_batch([rb.Record(offset=i, timestamp=now, key=None, value=value) for i in range(kib)])


async def one_round(url: str, topic: str, partitions: int, producers: int, kib: int, seconds: float) -> tuple[float, float, float]:
    admin = await connect(url)
    await metadata.create_topic(admin, topic, {p: [1] for p in range(partitions)})
    plog = PostgresLog(await connect(url), 1)
    config = LogConfig(segment_bytes=1 << 30, max_message_bytes=1 << 24)
    stores = [await plog.open_partition(topic, p, config) for p in range(partitions)]
    data = batch(kib)
    committed = 0
    deadline = time.monotonic() + seconds

    async def producer(index: int) -> None:
        nonlocal committed
        store = stores[index % partitions]
        while time.monotonic() < deadline:
            headers = rb.validate_produced_batches(data, single_batch=True)
            result = store.append(data, origin=AppendOrigin.CLIENT, now_ms=int(time.time() * 1000),
                                  leader_epoch=store.leader_epoch, headers=headers)
            await result.wait_durable()
            committed += len(data)

    started = time.monotonic()
    rounds_before = plog.rounds
    await asyncio.gather(*(producer(i) for i in range(producers)))
    took = time.monotonic() - started
    commits = plog.rounds - rounds_before
    await plog.close()
    await plog.conn.close()
    await admin.close()
    mb_s = committed / took / 1e6
    return mb_s, commits / took, (committed / len(data)) / max(commits, 1)


async def main_async(args: argparse.Namespace) -> None:
    server = start_postgres()
    try:
        database = server.create_database()
        url = server.url(database)
        conn = await connect(url)
        await prepare_schema(conn)
        await conn.close()
        figures = []
        for n in range(args.rounds):
            mb_s, commits_s, per_commit = await one_round(url, f"bench-{n}", args.partitions, args.producers,
                                                          args.batch_kib, args.seconds)
            figures.append(mb_s)
            print(f"round {n + 1}: {mb_s:.1f} MB/s committed, {commits_s:.0f} commits/s, "
                  f"{per_commit:.1f} batches of {args.batch_kib} KiB per commit")
        print(f"median {statistics.median(figures):.1f} MB/s (spread {min(figures):.1f}-{max(figures):.1f}); "
              f"{args.partitions} partitions, {args.producers} producers, one node, one PostgreSQL 15")
    finally:
        server.stop("fast")
        server.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--producers", type=int, default=32)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import pytest

    try:
        require_postgres()
    except pytest.skip.Exception as e:
        raise SystemExit(f"no PostgreSQL here: {e}") from None
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
