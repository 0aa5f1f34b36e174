"""The transactions side of `make chaos` (chaos.py): a transactional producer under every round, damage to
`__transaction_state` (issue 38), and what must hold afterwards.

The producer commits transactions of a few records to `chaos-txn` and aborts every seventh itself; it
fences its predecessor at every (re)start, as an application restarted with its transactional id does.
Damage (the broker stopped cleanly or killed): a flipped byte in a batch in the middle of a
`__transaction_state` partition (its CRC fails), or, after a clean stop, the partition's segment cut in
half. Afterwards the broker must start; read_committed consumers must reach the partition's end (no
transaction left open for ever: one the damaged log no longer knows is aborted) and must never be served
a record of a transaction the producer aborted. Committed transactions whose records a damaged batch
took with it are the test's doing, reported but not counted as lost.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from pathlib import Path

from kbroker.tests.faults.damage import rot, segments, stored_batches
from kbroker.tests.integration.broker_process import BrokerProcess

TXN_TOPIC = "chaos-txn"
TXN_RECORDS = 4

_QUIET = logging.getLogger("kbroker.chaos.librdkafka.txn")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class TxnLedger:
    def __init__(self) -> None:
        self.committed: set[bytes] = set()
        self.aborted: set[bytes] = set()
        # Committed before a damage to the transaction log: a batch the test damaged may have held a
        # prepared commit whose markers were not written yet (the test's doing, not a loss).
        self.exposed: set[bytes] = set()
        self.lock = threading.Lock()


class TxnLoad:
    """One transactional producer thread; `stop()` ends it (abandoning an open transaction if killed)."""

    def __init__(self, broker: BrokerProcess, ledger: TxnLedger, round_no: int) -> None:
        self.broker, self.ledger, self.round_no = broker, ledger, round_no
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        n = 0
        while not self.stopping.is_set():
            producer = None
            try:
                producer = Producer({"bootstrap.servers": self.broker.bootstrap, "transactional.id": "chaos-txn",
                                     "transaction.timeout.ms": 5000, "linger.ms": 1, "logger": _QUIET})
                producer.init_transactions(10)
                while not self.stopping.is_set():
                    values = [b"t%d-%d-%d" % (self.round_no, n, i) for i in range(TXN_RECORDS)]
                    n += 1
                    producer.begin_transaction()
                    for v in values:
                        producer.produce(TXN_TOPIC, v, partition=0)
                    if n % 7 == 0:
                        producer.abort_transaction(10)
                        with self.ledger.lock:
                            self.ledger.aborted.update(values)
                    else:
                        producer.commit_transaction(10)
                        with self.ledger.lock:
                            self.ledger.committed.update(values)
            except (KafkaException, BufferError):
                time.sleep(0.2)  # the broker went away or fenced us: start over with a new instance
            finally:
                del producer

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)


def damage_txn_log(data_dir: Path, rnd: random.Random, *, clean: bool) -> str:
    """A flipped byte in a batch in the middle of a `__transaction_state` partition (only its CRC broken,
    as a kill -9 may leave it), or after a clean stop sometimes the partition's segment cut in half."""
    candidates = []
    for directory in sorted(data_dir.glob("__transaction_state-*")):
        partition = int(directory.name.rsplit("-", 1)[1])
        for file in segments(data_dir, "__transaction_state", partition):
            batches = stored_batches(file)
            if len(batches) >= 3:
                candidates.append((partition, file, batches))
    if not candidates:
        return "no __transaction_state batch to damage yet"
    partition, file, batches = rnd.choice(candidates)
    if clean and rnd.random() < 0.3:
        size = file.stat().st_size
        os.truncate(file, size // 2)
        return f"__transaction_state-{partition}'s {file.name} cut in half ({size} -> {size // 2} bytes)"
    batch = rnd.choice(batches[1:-1])
    rot(file, batch)
    return f"a flipped byte in batch {batch.base_offset} of __transaction_state-{partition} ({file.name})"


def verify_txn(broker: BrokerProcess, ledger: TxnLedger, limit_s: float = 60.0) -> tuple[int, int, list[str]]:
    """(committed records read, committed records missing, problems): read_committed to the partition's
    end, which must be reached (no transaction open for ever), nothing of an aborted transaction served,
    nothing committed missing but what a damage exposed."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    problems: list[str] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"chaos-verify-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "logger": _QUIET})
    tp = TopicPartition(TXN_TOPIC, 0, 0)
    c.assign([tp])
    seen: set[bytes] = set()
    deadline = time.monotonic() + limit_s
    try:
        _, high = c.get_watermark_offsets(tp, timeout=10)
        position = 0
        while position < high and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                seen.add(m.value())
            elif m is not None and m.error().code() != KafkaError._PARTITION_EOF:
                problems.append(f"{TXN_TOPIC}: {m.error()}")
                break
            position = max(position, (c.position([tp])[0].offset or 0))
        if position < high:
            problems.append(f"{TXN_TOPIC}: read_committed stuck at offset {position} below the high watermark "
                            f"{high} for {limit_s:.0f} s (a transaction left open for ever)")
    finally:
        c.close()
    with ledger.lock:
        served_aborted = seen & ledger.aborted
        missing = ledger.committed - seen
        lost = missing - ledger.exposed
    if served_aborted:
        problems.append(f"{TXN_TOPIC}: {len(served_aborted)} records of aborted transactions served read_committed")
    if lost and not problems:  # (a read cut short reports itself above)
        problems.append(f"{TXN_TOPIC}: {len(lost)} records of acknowledged commits missing (e.g. {sorted(lost)[:3]})")
    return len(seen & ledger.committed), len(missing), problems
