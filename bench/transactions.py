"""Transactions (issue 13): transactions per second, and read_committed beside read_uncommitted.

    python -m bench.transactions [--transactions N] [--messages M] [--quick]

(a) txn/s: one confluent-kafka transactional producer runs N transactions back to back, each: begin,
    10 records of 100 bytes to 2 partitions (5 each), send_offsets_to_transaction for one partition of
    a source topic (AddOffsetsToTxn + TxnOffsetCommit), commit (EndTxn, then the coordinator's markers).
    Clock from the first begin to the last commit's return.
(b) consume: M records of 100 bytes written into 3 partitions in transactions of 1,000 records (every
    fifth one aborted, so 80% are visible to read_committed), then read back from the beginning by a
    read_uncommitted and by a read_committed confluent-kafka consumer (assign(), no group): records
    delivered per second, clock from assign() to the last record; the consumer's local queue holds
    them all (queued.min.messages), so it never pauses its fetching for a full queue.

kbroker runs with `--flush always` (every transaction-state write and marker waits for an fsync) and
`--flush never`. No peer: Tansu (the peer of the other benchmarks) has no transaction coordinator.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass

from kbroker.bench import brokers
from kbroker.bench.data_path import consume
from kbroker.bench.report import KB_ALWAYS, KB_NEVER, Figure, machine_note

LABELS = [KB_ALWAYS, KB_NEVER]  # no peer: Tansu has no transactions
PEER = "none"


@dataclass
class Sizes:
    transactions: int = 500
    messages: int = 200_000

    @classmethod
    def quick(cls) -> Sizes:
        return cls(transactions=50, messages=20_000)


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        f.result(timeout=30)


def txn_rate(bootstrap: str, count: int) -> float:
    from confluent_kafka import Consumer, Producer, TopicPartition

    out, src = f"txn-out-{uuid.uuid4().hex[:6]}", f"txn-src-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, out, 2)
    _create(bootstrap, src, 1)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-txn-{uuid.uuid4().hex[:6]}"})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:6]}",
                  "linger.ms": 0})
    p.init_transactions(30)
    value = b"x" * 100
    metadata = group.consumer_group_metadata()
    start = time.perf_counter()
    for i in range(count):
        p.begin_transaction()
        for j in range(10):
            p.produce(out, value=value, partition=j % 2)
        p.send_offsets_to_transaction([TopicPartition(src, 0, i + 1)], metadata, 30)
        p.commit_transaction(30)
    elapsed = time.perf_counter() - start
    group.close()
    return count / elapsed


def fill(bootstrap: str, topic: str, messages: int) -> int:
    """Write `messages` records in transactions of 1,000, aborting every fifth; returns the committed count."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fill-{uuid.uuid4().hex[:6]}",
                  "linger.ms": 5, "batch.num.messages": 1000})
    p.init_transactions(30)
    value = b"y" * 100
    committed = 0
    for t in range(messages // 1000):
        p.begin_transaction()
        for j in range(1000):
            p.produce(topic, value=value, partition=j % 3)
        if t % 5 == 4:
            p.flush(60)  # otherwise librdkafka purges the unsent records instead of writing them
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += 1000
    return committed


def consume_rate(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    read = consume(bootstrap, topic, 3, expected, conf={"isolation.level": isolation})  # data_path's reader
    return read["msgs_per_s"]


def run(sizes: Sizes) -> list[Figure]:
    rate = Figure("transactions", "transactions/s",
                  f"{sizes.transactions} transactions, each 10 x 100 B records to 2 partitions + "
                  "send_offsets_to_transaction + commit, one confluent-kafka producer", "txn/s")
    ru = Figure("transactions", "read_uncommitted consume",
                f"{sizes.messages:,} x 100 B records in transactions of 1,000 (1 in 5 aborted), 3 partitions, "
                "all read back", "msgs/s", fmt=",.0f")
    rc = Figure("transactions", "read_committed consume",
                f"the same log, read_committed: the {sizes.messages * 4 // 5:,} committed records", "msgs/s",
                fmt=",.0f")
    for label, flush in ((KB_ALWAYS, "always"), (KB_NEVER, "never")):
        with brokers.start_kbroker(flush=flush) as handle:
            rate.values[label] = txn_rate(handle.bootstrap, sizes.transactions)
            topic = f"txn-read-{uuid.uuid4().hex[:6]}"
            _create(handle.bootstrap, topic, 3)
            committed = fill(handle.bootstrap, topic, sizes.messages)
            total = sizes.messages // 1000 * 1000
            ru.values[label] = consume_rate(handle.bootstrap, topic, "read_uncommitted", total)
            rc.values[label] = consume_rate(handle.bootstrap, topic, "read_committed", committed)
    return [rate, ru, rc]


def print_figures(figures: list[Figure], labels: list[str], peer: str = PEER) -> None:
    """Like report.print_figures, without ratio columns: there is no peer to compare with."""
    for f in figures:
        print(f"\n* {f.name} [{f.unit}; higher is better]")
        print(f"  how: {f.how}")
        for label in labels:
            if label in f.values:
                print(f"  {label:26} {f.show(label):>14}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.transactions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=Sizes.transactions)
    parser.add_argument("--messages", type=int, default=Sizes.messages)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes(args.transactions, args.messages)
    print(f"machine: {machine_note()}")
    print_figures(run(sizes), LABELS, PEER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
