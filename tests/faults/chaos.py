"""`make chaos`: a seeded campaign of crashes, disk damage and malformed frames against a real broker
under produce and offset-commit load. It prints every fault it tried and, at the end, what acknowledged
data was lost. The only acceptable answer is nothing.

    python -m kbroker.tests.faults.chaos [--seed N] [--rounds N] [--keep DIR]

Each round runs the load (a librdkafka producer with acks=all over 3 partitions of 1 MiB segments, and a
committer of rising offsets for 20 groups), injects one fault, restarts the broker if it stopped, and
checks that every acknowledged record can still be fetched and every group's committed offset is at
least the last acknowledged one. Faults:

* kill -9 under load;
* clean stop or kill -9, then damage that must cost nothing acknowledged (in the data topic or in
  `__consumer_offsets`): garbage or zeros or half a batch after the end of a segment, deleted or
  truncated or garbage indexes, a garbage checkpoint, a stale compaction output, a clean-shutdown
  marker that lies; and damage to the small files beside the segments (issue 38), each of which must
  also be reported by its error event in the next start's log: a checkpoint or a producer snapshot
  whose content no longer matches its checksum (treated as missing; the snapshot rebuilt from the
  log), a producer-id block that says 0 (ids go on past every known one), a side topic's record cut
  short (that topic fenced, the others serving), a side topic's partition directory deleted (its lost
  offsets named, the partition going on from its old end);
* clean stop, then damage to a stored batch (a flipped byte, a damaged length or magic byte): the
  records it destroys (that batch; for framing damage also the batches up to the next index entry) are
  not counted as lost, but must be answered CORRUPT_MESSAGE, never served, and every other acknowledged
  record must still be read;
* a burst of malformed frames on side connections while the load runs: the broker must stay up;
* clean stop or kill -9, then damage to `__transaction_state` (a batch in the middle with its CRC broken,
  or its segment cut in half): the broker must start, read_committed consumers of the transactional
  producer's topic must reach its end (no transaction left open for ever) and never see an aborted
  record (txn_chaos.py);
* clean stop or kill -9, then damage to a state file beside the logs (issue 38; tests/faults/
  state_damage.py): one bit of a SCRAM, PLAIN, ACL or quota entry flipped, or the file cut short; the
  next start must report it with its error event and contain it (that user refused, every other
  served; only super users authorized while the ACLs are damaged; that quota dropped), the load
  (a super user) untouched; the files are then put back for the rounds after.

The broker serves a SASL listener and an authorizer for the state files' sake; the load runs on the
PLAINTEXT listener as User:ANONYMOUS, a super user.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kbroker.coordinator.partitioning import partition_for
from kbroker.tests.faults.damage import (
    commit,
    committed,
    damage_length,
    damage_magic,
    read_partition,
    rot,
    segments,
    stored_batches,
)
from kbroker.tests.faults.state_damage import KINDS as STATE_DAMAGE
from kbroker.tests.faults.state_damage import StateFiles
from kbroker.tests.faults.txn_chaos import TXN_TOPIC, TxnLedger, TxnLoad, damage_txn_log, verify_txn
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

TOPIC = "chaos"
PARTITIONS = 3
GROUPS = 20
BENIGN = ("tail_garbage", "tail_zeros", "tail_half_batch", "index_deleted", "index_truncated", "index_garbage",
          "timeindex_garbage", "checkpoint_garbage", "stale_cleaned", "lying_marker")
FILE_DAMAGE = ("checkpoint_flipped", "snapshot_flipped", "producer_ids_flipped", "side_record_cut", "side_dir_deleted")
# Side topics the storage-file damage goes to: one whose record is cut (fenced from then on), one whose
# partition directory is deleted; the ledger's topic is never among them.
FENCED_SIDE, VANISHING_SIDE = "chaos-fenced", "chaos-vanish"
# What each kind of damage to a file beside the segments must say in the next start's log.
REPORTED_BY = {"checkpoint_flipped": "checkpoint_damaged", "snapshot_flipped": "producer_snapshot_damaged",
               "producer_ids_flipped": "producer_ids_file_damaged", "side_record_cut": "topic_record_damaged",
               "side_dir_deleted": "partition_directory_missing"}


_QUIET = logging.getLogger("kbroker.chaos.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


@dataclass
class Ledger:
    acked: dict[int, dict[int, bytes]] = field(default_factory=lambda: {p: {} for p in range(PARTITIONS)})
    commits: dict[str, int] = field(default_factory=dict)  # group -> last acknowledged committed offset
    destroyed: dict[int, set[int]] = field(default_factory=lambda: {p: set() for p in range(PARTITIONS)})
    lock: threading.Lock = field(default_factory=threading.Lock)


class Load:
    """Producer and committer threads; `stop()` ends them (and abandons in-flight, unacknowledged work)."""

    def __init__(self, broker: BrokerProcess, ledger: Ledger, rnd: random.Random, round_no: int) -> None:
        from confluent_kafka import Producer

        self.broker, self.ledger, self.round_no = broker, ledger, round_no
        self.stopping = threading.Event()
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                                  "enable.idempotence": True,  # producer state, its snapshots, producer ids
                                  "batch.num.messages": rnd.choice([1, 10, 100]), "message.timeout.ms": 10000,
                                  "logger": _QUIET})
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._commit, daemon=True)]
        for t in self.threads:
            t.start()

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            with self.ledger.lock:
                self.ledger.acked[msg.partition()][msg.offset()] = msg.value()

    def _produce(self) -> None:
        seq = 0
        while not self.stopping.is_set():
            value = b"r%d-%d-" % (self.round_no, seq) + b"x" * 150
            try:
                self.producer.produce(TOPIC, value, partition=seq % PARTITIONS, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            seq += 1
            if seq % 50 == 0:
                self.producer.poll(0.01)  # about 5,000 records/s: enough load, a verify that stays quick

    def _commit(self) -> None:
        try:
            wire = Wire(self.broker.bootstrap, client_id="chaos-committer", timeout=5)
        except OSError:
            return
        n = 0
        try:
            while not self.stopping.is_set():
                group = f"chaos-g{n % GROUPS}"
                offset = 1_000_000 * self.round_no + n
                if commit(wire, group, TOPIC, 0, offset) == 0:
                    with self.ledger.lock:
                        self.ledger.commits[group] = offset
                n += 1
        except (OSError, ConnectionError, AssertionError, ValueError):
            pass  # the broker went away mid-request: that commit was never acknowledged
        finally:
            wire.close()

    def stop(self, *, drain: bool) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(30)
        if drain:
            self.producer.flush(30)
        else:
            self.producer.purge()
            self.producer.flush(0)
        self.producer = None  # destroyed now, so it stops reconnecting (and logging) in later rounds


def _flip_json(path: Path, change) -> None:
    """What a flipped bit does to a small JSON file: its content changes, its checksum stays."""
    import json

    body = json.loads(path.read_text())
    change(body)
    path.write_text(json.dumps(body))


def damage_files(data_dir: Path, kind: str, rnd: random.Random, clean: bool) -> tuple[str, str | None]:
    """Damage a file beside the segments: (what was done, the event the next start must log, if any)."""
    import shutil

    partition = rnd.randrange(PARTITIONS)
    if kind == "checkpoint_flipped":
        path = data_dir / f"{TOPIC}-{partition}" / "checkpoint.json"
        if not path.exists():
            return f"{kind}: {TOPIC}-{partition} has no checkpoint yet", None
        _flip_json(path, lambda body: body.update(recovery_point=body["recovery_point"] + 1))
    elif kind == "snapshot_flipped":
        path = data_dir / f"{TOPIC}-{partition}" / "producer_state.json"
        if not path.exists():
            return f"{kind}: {TOPIC}-{partition} has no producer snapshot yet", None
        _flip_json(path, lambda body: body.update(offset=body["offset"] ^ 1))
    elif kind == "producer_ids_flipped":
        path = data_dir / "producer_ids.json"
        _flip_json(path, lambda body: body.update(next_block_start=0))
    elif kind == "side_record_cut":
        path = data_dir / "topics" / f"{FENCED_SIDE}.json"
        path.write_bytes(path.read_bytes()[: rnd.randint(0, 40)])
    else:  # side_dir_deleted: only a clean stop records the log end the deleted directory had reached
        path = data_dir / f"{VANISHING_SIDE}-0"
        shutil.rmtree(path)
        if not clean:
            return f"{kind}: {path.name} (after a kill -9: its old end may be unknown)", None
    return f"{kind}: {path.relative_to(data_dir)}", REPORTED_BY[kind]


def damage_benign(data_dir: Path, kind: str, rnd: random.Random) -> str:
    if rnd.random() < 0.3:  # the committed offsets' log, where the groups' commits live
        topic, partition = "__consumer_offsets", partition_for(f"chaos-g{rnd.randrange(GROUPS)}", 50)
    else:
        topic, partition = TOPIC, rnd.randrange(PARTITIONS)
    files = segments(data_dir, topic, partition)
    file = rnd.choice(files)
    if kind.startswith("tail_"):
        file = files[-1]  # past the end of the active segment: what a torn write leaves
        batches = stored_batches(file)
        if kind == "tail_garbage":
            extra = os.urandom(rnd.randint(1, 3000))
        elif kind == "tail_zeros":
            extra = b"\0" * rnd.choice([8, 512, 4096])
        else:
            whole = file.read_bytes()
            b = batches[-1] if batches else None
            extra = whole[b.position: b.position + b.size // 2] if b else os.urandom(40)
        with open(file, "ab") as f:
            f.write(extra)
        return f"{kind}: {len(extra)} bytes after {file.name} of {topic}-{partition}"
    index = file.with_suffix(".index")
    if kind == "index_deleted":
        index.unlink(missing_ok=True)
    elif kind == "index_truncated":
        if index.exists():
            os.truncate(index, index.stat().st_size // 2 + 3)
    elif kind == "index_garbage":
        index.write_bytes(os.urandom(64))
    elif kind == "timeindex_garbage":
        file.with_suffix(".timeindex").write_bytes(os.urandom(36))
    elif kind == "checkpoint_garbage":
        (file.parent / "checkpoint.json").write_bytes(b"{not json")
    elif kind == "stale_cleaned":
        (file.parent / (file.name + ".cleaned")).write_bytes(os.urandom(500))
    elif kind == "lying_marker":
        (data_dir / ".kbroker_clean_shutdown").write_bytes(b"")
    return f"{kind}: {file.name} of {topic}-{partition}"


INDEX_INTERVAL_BYTES = 4096  # the broker's default index.interval.bytes


def damage_destructive(data_dir: Path, ledger: Ledger, rnd: random.Random) -> str:
    """Damage a stored batch: its records are destroyed by us and must come back as CORRUPT_MESSAGE, never
    served. A flipped byte (rot) destroys that batch; a damaged length or magic byte also makes the
    batches up to the next index entry unreachable, so those count as destroyed too (not as lost)."""
    partition = rnd.randrange(PARTITIONS)
    candidates = [(f, b) for f in segments(data_dir, TOPIC, partition) for b in stored_batches(f)[:-1]]
    if not candidates:
        return "damage: no batch to damage"
    file, batch = rnd.choice(candidates)
    layout = stored_batches(file)  # before the damage: afterwards a walk stops there
    kind = rnd.choice(["rot", "rot", "length", "magic"])
    if kind == "rot":
        rot(file, batch)
        reach = [batch]
    else:
        (damage_length if kind == "length" else damage_magic)(file, batch)
        limit = batch.position + batch.size + INDEX_INTERVAL_BYTES + max(b.size for b in layout)
        reach = [b for b in layout if batch.position <= b.position <= limit]
    with ledger.lock:
        for b in reach:
            ledger.destroyed[partition].update(range(b.base_offset, b.last_offset + 1))
    return (f"{kind}: batch {batch.base_offset}..{batch.last_offset} at {batch.position} in {file.name} of "
            f"{TOPIC}-{partition} (up to {sum(b.last_offset - b.base_offset + 1 for b in reach)} offsets destroyed)")


def malformed_frames(broker: BrokerProcess, rnd: random.Random, count: int = 200) -> str:
    host, port = broker.bootstrap.rsplit(":", 1)
    sent = 0
    for _ in range(count):
        try:
            with socket.create_connection((host, int(port)), timeout=2) as s:
                kind = rnd.randrange(4)
                if kind == 0:
                    body = os.urandom(rnd.randint(0, 200))
                elif kind == 1:  # a plausible header (random api key/version) and a garbage body
                    body = struct.pack(">hhi", rnd.randint(-5, 80), rnd.randint(-1, 20), 7) + os.urandom(30)
                elif kind == 2:  # a size prefix claiming more than will ever come
                    s.sendall(struct.pack(">i", rnd.randint(1, 2**31 - 1)) + os.urandom(10))
                    sent += 1
                    continue
                else:  # a negative size
                    s.sendall(struct.pack(">i", -rnd.randint(1, 100)))
                    sent += 1
                    continue
                s.sendall(struct.pack(">i", len(body)) + body)
                sent += 1
        except OSError:
            pass
    return f"malformed frames: {sent} sent"


def verify(broker: BrokerProcess, ledger: Ledger) -> tuple[int, int, int, list[str]]:
    """(acknowledged records checked, lost, destroyed-and-answered-corrupt, problems)."""
    problems: list[str] = []
    wire = Wire(broker.bootstrap, client_id="chaos-verify")
    checked = lost = corrupt_answered = 0
    try:
        for p in range(PARTITIONS):
            records, corrupt = read_partition(wire, TOPIC, p)
            served = dict(records)
            with ledger.lock:
                acked = dict(ledger.acked[p])
                destroyed = set(ledger.destroyed[p])
            wrong = [o for o, v in served.items() if o in acked and acked[o] != v]
            if wrong:
                problems.append(f"partition {p}: offsets served with other values than acknowledged: {wrong[:5]}")
            corrupt_answered += len(destroyed & set(corrupt))
            missing = [o for o in acked if o not in served]
            unexplained = [o for o in missing if o not in destroyed or o not in corrupt]
            checked += len(acked)
            if unexplained:
                lost += len(unexplained)
                problems.append(f"partition {p}: {len(unexplained)} acknowledged records missing "
                                f"(e.g. offsets {sorted(unexplained)[:5]})")
        for group, offset in sorted(ledger.commits.items()):
            error, got = committed(wire, group, TOPIC, 0)
            if error != 0 or got < offset:
                lost += 1
                problems.append(f"group {group}: committed {offset} acknowledged, OffsetFetch answers {got} (error {error})")
    finally:
        wire.close()
    return checked, lost, corrupt_answered, problems


# A fault may name its kind of damage: "clean+files:side_dir_deleted", "clean+state:acls_flipped".
FAULTS = ("kill", "clean+benign", "kill+benign", "clean+damage", "clean+files", "kill+files", "frames",
          "clean+txnlog", "kill+txnlog", "clean+state", "kill+state")


def campaign(seed: int, rounds: int, root: Path, out=sys.stdout, faults: list[str] | None = None) -> int:
    """Run the campaign; `faults` fixes the fault of each round (else the seed picks them)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    rnd = random.Random(seed)
    ledger = Ledger()
    txn_ledger = TxnLedger()
    state = StateFiles(root, TOPIC)
    broker = BrokerProcess(root / "data", *state.broker_args(), port=state.port, listen_flag=False, start=False)
    state.add_users()
    broker.start()
    print(f"chaos: seed {seed}, {rounds} rounds, data in {broker.data_dir}", file=out, flush=True)
    tried: dict[str, int] = {}
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": str(1024 * 1024)})])[TOPIC].result(30)
        for side in admin.create_topics([NewTopic(FENCED_SIDE, 1, 1), NewTopic(VANISHING_SIDE, 1, 1)]).values():
            side.result(30)
        admin.create_topics([NewTopic(TXN_TOPIC, 1, 1)])[TXN_TOPIC].result(30)
        del admin  # destroyed now, so it does not reconnect (and log) through every restart
        _fill_side_topics(broker)
        state.fill(broker)
        if faults is not None:
            rounds = len(faults)
        for round_no in range(1, rounds + 1):
            load = Load(broker, ledger, rnd, round_no)
            txn_load = TxnLoad(broker, txn_ledger, round_no)
            time.sleep(rnd.uniform(0.5, 2.5))
            fault = faults[round_no - 1] if faults is not None else rnd.choice(FAULTS)
            tried[fault.partition(":")[0]] = tried.get(fault.partition(":")[0], 0) + 1
            if fault == "frames":
                what = malformed_frames(broker, rnd)
                load.stop(drain=True)
                txn_load.stop()
                assert broker.running, f"the broker died on malformed frames:\n{broker.dump_log()}"
            elif fault == "kill":
                broker.kill()
                load.stop(drain=False)
                txn_load.stop()
                what = "kill -9 under load"
                broker.start()
            else:
                clean = fault.startswith("clean")
                if clean:
                    load.stop(drain=True)
                    txn_load.stop()
                    broker.stop()
                else:
                    broker.kill()
                    load.stop(drain=False)
                    txn_load.stop()
                expected = state_kind = None
                if fault.endswith("txnlog"):
                    what = damage_txn_log(broker.data_dir, rnd, clean=clean)
                    with txn_ledger.lock:
                        txn_ledger.exposed |= txn_ledger.committed
                elif fault.endswith("damage"):
                    what = damage_destructive(broker.data_dir, ledger, rnd)
                elif "+files" in fault:
                    kind = fault.partition(":")[2] or rnd.choice(FILE_DAMAGE)
                    what, expected = damage_files(broker.data_dir, kind, rnd, clean)
                elif "+state" in fault:
                    state_kind = fault.partition(":")[2] or rnd.choice(STATE_DAMAGE)
                    what, expected = state.damage(state_kind, rnd)
                else:
                    what = damage_benign(broker.data_dir, rnd.choice(BENIGN), rnd)
                what = f"{'clean stop' if clean else 'kill -9'}, then {what}"
                broker.start()
                if expected is not None and not broker.events(expected, start=broker.starts):
                    print(f"round {round_no:3d}: {what}; NOT REPORTED: no {expected} event", file=out, flush=True)
                    print(f"chaos: FAILED in round {round_no} (seed {seed})", file=out)
                    return 1
                if expected is not None:
                    what += f" (reported: {expected})"
                if state_kind is not None:
                    for problem in state.problems(broker, state_kind):
                        print(f"round {round_no:3d}: {what}; NOT CONTAINED: {problem}", file=out, flush=True)
                        print(f"chaos: FAILED in round {round_no} (seed {seed})", file=out)
                        return 1
            checked, lost, corrupt, problems = verify(broker, ledger)
            txn_read, txn_missing, txn_problems = verify_txn(broker, txn_ledger)
            problems += txn_problems
            lost += len(txn_problems)
            print(f"round {round_no:3d}: {what}; {checked:,} acknowledged records and {len(ledger.commits)} "
                  f"commits checked, {corrupt} destroyed by the test answered CORRUPT_MESSAGE, lost {lost}; "
                  f"{txn_read:,} committed transactional records read"
                  + (f" ({txn_missing} exposed by the damage missing)" if txn_missing else ""),
                  file=out, flush=True)
            for problem in problems:
                print(f"    LOST: {problem}", file=out, flush=True)
            if lost or problems:
                print(f"chaos: FAILED in round {round_no} (seed {seed})", file=out)
                return 1
            if fault.partition(":")[0].endswith("+state"):  # the files back as they were, for later rounds
                broker.stop()
                state.restore()
                broker.start()
        total = sum(len(v) for v in ledger.acked.values())
        print(f"chaos: {rounds} rounds ({', '.join(f'{k} x{v}' for k, v in sorted(tried.items()))}); "
              f"{total:,} acknowledged records and {len(ledger.commits)} groups' commits: nothing acknowledged lost",
              file=out)
        return 0
    finally:
        broker.kill()


def _fill_side_topics(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "logger": _QUIET})
    for side in (FENCED_SIDE, VANISHING_SIDE):
        for i in range(20):
            producer.produce(side, b"side-%d" % i, partition=0)
    producer.flush(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.tests.faults.chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if args.keep:
        root = Path(args.keep)
        root.mkdir(parents=True, exist_ok=True)
        return campaign(args.seed, args.rounds, root)
    root = Path(tempfile.mkdtemp(prefix="kbroker-chaos-"))
    try:
        return campaign(args.seed, args.rounds, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
