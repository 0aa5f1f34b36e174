"""A consume-transform-produce application with exactly-once output, run as its own process by the
transaction tests (so a test can SIGKILL it mid-transaction).

    python -m kbroker.tests.integration.txn_app BOOTSTRAP INPUT OUTPUT TXN_ID GROUP PARTITIONS \
        [--die-in-txn N] [--per-txn K] [--idle-exit S]

Each transaction: up to K input records -> K output records (value upper-cased, key kept), the
consumed offsets sent with send_offsets_to_transaction, commit. With --die-in-txn N the process kills
itself with SIGKILL in transaction N after producing and flushing, before committing. It exits 0
once no input arrived for --idle-exit seconds.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "txn_id", "group"):
        ap.add_argument(name)
    ap.add_argument("partitions", type=int)
    ap.add_argument("--die-in-txn", type=int, default=-1)
    ap.add_argument("--per-txn", type=int, default=20)
    ap.add_argument("--idle-exit", type=float, default=4.0)
    args = ap.parse_args(argv)

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    # assign(), not subscribe(): a killed instance leaves no member behind to wait out.
    consumer.assign([TopicPartition(args.input, p) for p in range(args.partitions)])
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.txn_id, "linger.ms": 2})
    producer.init_transactions(30)
    txn_no = 0
    last_input = time.monotonic()
    while time.monotonic() - last_input < args.idle_exit:
        batch = consumer.consume(args.per_txn, 0.5)
        batch = [m for m in batch if m.error() is None or m.error().code() != KafkaError._PARTITION_EOF]
        errors = [m.error() for m in batch if m.error() is not None]
        if errors:
            raise SystemExit(f"consume error: {errors[0]}")
        if not batch:
            continue
        last_input = time.monotonic()
        producer.begin_transaction()
        for m in batch:
            producer.produce(args.output, key=m.key(), value=m.value().upper(), partition=m.partition())
        positions = {}
        for m in batch:
            positions[m.partition()] = m.offset() + 1
        producer.flush(10)
        if txn_no == args.die_in_txn:
            os.kill(os.getpid(), signal.SIGKILL)
        producer.send_offsets_to_transaction(
            [TopicPartition(args.input, p, o) for p, o in positions.items()], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        txn_no += 1
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
