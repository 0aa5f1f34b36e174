"""Consumer groups with real clients against a real broker process.

For confluent-kafka (eager `range` and `cooperative-sticky`), kafka-python and aiokafka: three
consumers of one group share a 6-partition topic and process MESSAGES messages exactly once,
committing after processing; one consumer closes mid-stream and its partitions move within one
rebalance; one is SIGKILLed (once everything read is committed) and its partitions move after the
session timeout. Then: a static member restarts within its session timeout without a rebalance and
gets the same assignment; the broker restarts and committed offsets and the generation survive while
the consumers carry on without re-reading; kafka-python and confluent-kafka share one `range` group.

Every consumer is a subprocess running this file (`python test_groups_clients.py worker <json>`),
so it can be closed (SIGTERM: the worker calls close()) or killed (SIGKILL). A worker processes a
batch, commits exactly the batch's offsets synchronously, and only then writes "R <partition>
<offset>" lines to its output file; a failed commit writes nothing and seeks back, so the union of
all outputs must hold every produced offset exactly once. "A <partitions>" lines record each
assignment the worker saw. Generations come from the broker's `rebalance_completed` log events.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

MESSAGES = 60_000          # per client in the three-consumer scenario
PARTITIONS = 6
SESSION_TIMEOUT_MS = 6_000  # the broker's minimum
STATIC_SESSION_TIMEOUT_MS = 12_000
RESTART_SESSION_TIMEOUT_MS = 15_000
SMALL_MESSAGES = 12_000     # static member, broker restart and mixed-group scenarios
POLL_TIMEOUT_S = 0.2
INITIAL_REBALANCE_DELAY_MS = 1_500
CLIENTS = ["confluent-range", "confluent-cooperative", "kafka-python", "aiokafka"]


# ----------------------------------------------------------------------------------------------------------------
# The worker (runs in its own process)
# ----------------------------------------------------------------------------------------------------------------


class _Confluent:
    def __init__(self, cfg: dict) -> None:
        from confluent_kafka import Consumer

        strategy = "cooperative-sticky" if cfg["client"] == "confluent-cooperative" else "range"
        conf = {
            "bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "client.id": cfg["client_id"],
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": cfg["session_timeout_ms"], "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": strategy,
        }
        if cfg.get("instance_id"):
            conf["group.instance.id"] = cfg["instance_id"]
        self.topic = cfg["topic"]
        self.c = Consumer(conf)
        self.c.subscribe([self.topic])

    async def poll(self) -> list[tuple[int, int]]:
        out = []
        for m in self.c.consume(num_messages=1000, timeout=POLL_TIMEOUT_S):
            if m.error() is None:
                out.append((m.partition(), m.offset()))
        return out

    async def commit(self, offsets: dict[int, int]) -> bool:
        from confluent_kafka import TopicPartition

        try:
            result = self.c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                   asynchronous=False)
        except Exception:  # noqa: BLE001 - any failure means: not committed
            return False
        return all(tp.error is None for tp in result or [])

    async def seek(self, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        try:
            self.c.seek(TopicPartition(self.topic, partition, offset))
        except Exception:  # noqa: BLE001 - no longer assigned: whoever owns it starts at the commit
            pass

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment())

    async def close(self) -> None:
        self.c.close()


class _KafkaPython:
    def __init__(self, cfg: dict) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        extra = {"group_instance_id": cfg["instance_id"]} if cfg.get("instance_id") else {}
        self.topic = cfg["topic"]
        self.c = KafkaConsumer(
            self.topic, bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["client_id"],
            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=cfg["session_timeout_ms"],
            heartbeat_interval_ms=1000, partition_assignment_strategy=[RangePartitionAssignor], **extra,
        )

    async def poll(self) -> list[tuple[int, int]]:
        batches = self.c.poll(timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=1000)
        return [(r.partition, r.offset) for records in batches.values() for r in records]

    async def commit(self, offsets: dict[int, int]) -> bool:
        from kafka import OffsetAndMetadata, TopicPartition

        try:
            self.c.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
            return True
        except Exception:  # noqa: BLE001
            return False

    async def seek(self, partition: int, offset: int) -> None:
        from kafka import TopicPartition

        try:
            self.c.seek(TopicPartition(self.topic, partition), offset)
        except Exception:  # noqa: BLE001
            pass

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment())

    async def close(self) -> None:
        self.c.close()


class _AioKafka:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.topic = cfg["topic"]
        self.c = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer

        extra = {"group_instance_id": self.cfg["instance_id"]} if self.cfg.get("instance_id") else {}
        self.c = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.cfg["bootstrap"], group_id=self.cfg["group"],
            client_id=self.cfg["client_id"], enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=self.cfg["session_timeout_ms"], heartbeat_interval_ms=1000, **extra,
        )
        await self.c.start()

    async def poll(self) -> list[tuple[int, int]]:
        batches = await self.c.getmany(timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=1000)
        return [(r.partition, r.offset) for records in batches.values() for r in records]

    async def commit(self, offsets: dict[int, int]) -> bool:
        from aiokafka import TopicPartition

        try:
            await self.c.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
            return True
        except Exception:  # noqa: BLE001
            return False

    async def seek(self, partition: int, offset: int) -> None:
        from aiokafka import TopicPartition

        try:
            self.c.seek(TopicPartition(self.topic, partition), offset)
        except Exception:  # noqa: BLE001
            pass

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment())

    async def close(self) -> None:
        await self.c.stop()


async def _worker(cfg: dict) -> None:
    # The client's own account of its joins, revocations and commit errors goes to the worker's log,
    # which a failure prints (Worker.dump) beside the broker's rebalance history.
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for name in ("kafka.coordinator", "aiokafka.consumer.group_coordinator"):
        logging.getLogger(name).setLevel(logging.INFO)
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    out = open(cfg["out"], "a", buffering=1)
    if cfg.get("go_file"):
        # Held (Worker(hold=True)): start the interpreter and import the client now, then wait for the
        # go, so that a "restart" in a test is only the client's own work, not a Python start-up that
        # takes seconds on a loaded machine.
        import importlib

        importlib.import_module({"kafka-python": "kafka", "aiokafka": "aiokafka"}.get(cfg["client"], "confluent_kafka"))
        out.write("HELD\n")
        while not Path(cfg["go_file"]).exists() and not stopping.is_set():
            await asyncio.sleep(0.01)
    if cfg["client"].startswith("confluent"):
        consumer = _Confluent(cfg)
    elif cfg["client"] == "kafka-python":
        consumer = _KafkaPython(cfg)
    else:
        consumer = _AioKafka(cfg)
        await consumer.start()
    last_assignment = None
    while not stopping.is_set():
        records = await consumer.poll()
        assignment = consumer.assignment()
        if assignment != last_assignment:
            out.write("A " + ",".join(map(str, assignment)) + "\n")
            last_assignment = assignment
        if not records:
            await asyncio.sleep(0)
            continue
        commit_at: dict[int, int] = {}
        first: dict[int, int] = {}
        for partition, offset in records:
            first.setdefault(partition, offset)
            commit_at[partition] = offset + 1
        if await consumer.commit(commit_at):
            out.write("".join(f"R {p} {o}\n" for p, o in records))
        else:
            out.write("F " + json.dumps(first) + "\n")
            for partition, offset in first.items():
                await consumer.seek(partition, offset)
    await consumer.close()
    out.write("CLOSED\n")
    out.close()


# ----------------------------------------------------------------------------------------------------------------
# The tests
# ----------------------------------------------------------------------------------------------------------------

if __name__ != "__main__":  # the worker process needs none of this
    from kbroker.protocol.messages.describe_groups_request import DescribeGroupsRequest
    from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
    from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest
    from kbroker.tests.integration.broker_process import BrokerProcess

    confluent_kafka = pytest.importorskip("confluent_kafka")
    pytest.importorskip("kafka")
    pytest.importorskip("aiokafka")
    from confluent_kafka import Producer  # noqa: E402
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

    pytestmark = pytest.mark.timeout(240)


class Worker:
    def __init__(self, broker, tmp: Path, client: str, group: str, topic: str, *, instance_id: str | None = None,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS, name: str | None = None, hold: bool = False) -> None:
        """`hold`: the process starts and imports its client, then waits for release() before it
        creates its consumer."""
        self.name = name or f"{client}-{uuid.uuid4().hex[:6]}"
        self.out = tmp / f"{self.name}.out"
        self.log = tmp / f"{self.name}.log"
        self.go_file = tmp / f"{self.name}.go"
        self.cfg = {"client": client, "bootstrap": broker.bootstrap, "group": group, "topic": topic,
                    "client_id": self.name, "instance_id": instance_id, "session_timeout_ms": session_timeout_ms,
                    "out": str(self.out), "go_file": str(self.go_file) if hold else None}
        self.start()
        if hold:
            wait_until(lambda: "HELD" in self.lines(), 60, f"{self.name} to start and import its client", [self])

    def release(self) -> None:
        self.go_file.touch()

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, __file__, "worker", json.dumps(self.cfg)],
                                         stdout=log, stderr=subprocess.STDOUT)

    def lines(self) -> list[str]:
        try:
            return self.out.read_text().splitlines()
        except FileNotFoundError:
            return []

    def records(self) -> list[tuple[int, int]]:
        out = []
        for line in self.lines():
            if line.startswith("R "):
                _, p, o = line.split()
                out.append((int(p), int(o)))
        return out

    def assignments(self) -> list[list[int]]:
        return [[int(x) for x in line[2:].split(",") if x] for line in self.lines() if line.startswith("A ")]

    @property
    def assignment(self) -> list[int]:
        seen = self.assignments()
        return seen[-1] if seen else []

    def close(self, timeout: float = 30) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout) == 0, self.dump()
        assert self.lines()[-1] == "CLOSED"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def dump(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} log ---\n{text[-3000:]}\n--- output tail ---\n" + "\n".join(self.lines()[-10:])


def wire_call(broker, api_key: int, version: int, body):
    from kbroker.tests.integration.wire import Wire

    w = Wire(broker.bootstrap, client_id="groups-test")
    try:
        return w.call(api_key, version, body)
    finally:
        w.close()


def describe(broker, group: str):
    return wire_call(broker, 15, 5, DescribeGroupsRequest([group])).groups[0]


def committed(broker, group: str, topic: str) -> dict[int, int]:
    r = wire_call(broker, 9, 7, OffsetFetchRequest(group_id=group, topics=None))
    assert r.error_code == 0
    return {p.partition_index: p.committed_offset for t in r.topics if t.name == topic for p in t.partitions}


def generations(broker, group: str, start: int | None = None) -> list[int]:
    """The generations the group's rebalances produced, in the log of one broker start or of all."""
    return [e["new_generation"] for e in broker.events("rebalance_completed", start) if e.get("group_id") == group]


def rebalance_story(broker, group: str) -> str:
    """Why the group rebalanced, one line per completed rebalance, from the broker's rebalance_completed
    events (what `kbroker group history` shows): put in a failure message, a failure explains itself."""
    lines = []
    for e in broker.events("rebalance_completed"):
        if e.get("group_id") != group:
            continue
        client = f" (client: {e['client_reason']})" if e.get("client_reason") else ""
        lines.append(f"  {e.get('timestamp', '?')} generation {e['old_generation']} -> {e['new_generation']}: "
                     f"{e['reason']}{client}; in {e['members_in']}, out {e['members_out']}, "
                     f"{e['member_count']} members, {e['duration_ms']} ms")
    return f"rebalances of {group}:\n" + ("\n".join(lines) or "  none")


def leader_rejoin(event: dict) -> bool:
    """A rebalance the leader asked for with its own JoinGroup in Stable, membership unchanged. Kafka
    answers that with a rebalance too ("Leader re-joining group during Stable")."""
    return (event["reason"] == f"leader {event['trigger_member']} rejoined"
            and not event["members_in"] and not event["members_out"])


def assert_one_rebalance(broker, group: str, since: int, client: str, cause) -> None:
    """Exactly one rebalance since generation `since`, and `cause(event)` holds for it.

    kafka-python (3.0.12, the newest) also makes its leader rejoin right after a rebalance when the
    JoinGroup/SyncGroup it started completes after poll(timeout_ms) gave up waiting for it: the next
    poll finds the task done and sends a new JoinGroup (coordinator/base.py, join_group_async: "if
    self._join_task is None or self._join_task.is_done"), discarding the finished one. Its log shows
    "coordinator.poll: timeout in ensure_active_group", the SyncGroup response, then "(Re-)joining
    group" with no error; under load, every few runs. For that client only, such leader rejoins are the
    client's own requests, not the broker's doing, and are not counted; everything else is.
    """
    events = [e for e in broker.events("rebalance_completed") if e.get("group_id") == group
              and e["old_generation"] >= since]
    counted = [e for e in events if not (client == "kafka-python" and leader_rejoin(e))]
    assert len(counted) == 1 and cause(counted[0]), (
        f"expected one rebalance since generation {since}\n{rebalance_story(broker, group)}")


def member_of(worker, member_ids) -> bool:
    """Every client names its member ids after its client id (the worker's name) plus a suffix."""
    return any(m.startswith(f"{worker.name}-") for m in member_ids)


def wait_until(condition, timeout: float, what: str, workers=()) -> float:
    start = time.monotonic()
    while not condition():
        for w in workers:
            assert w.alive(), f"worker died while waiting for {what}:\n{w.dump()}"
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n" + "\n".join(w.dump() for w in workers))
        time.sleep(0.1)
    return time.monotonic() - start


def create_topic(broker, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=15)


def produce(broker, topic: str, count: int, produced: Counter) -> None:
    """`count` messages spread evenly over the partitions; `produced` counts them per partition."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(count):
        partition = i % PARTITIONS
        while True:
            try:
                p.produce(topic, value=b"m%d" % i, partition=partition)
                break
            except BufferError:
                p.poll(0.05)
        produced[partition] += 1
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def wait_committed(broker, group: str, topic: str, produced: Counter, workers, timeout: float = 90) -> None:
    want = {p: produced[p] for p in range(PARTITIONS)}
    wait_until(lambda: committed(broker, group, topic) == want, timeout, f"commits reaching {want}", workers)


def wait_stable(broker, group: str, members: int, workers, timeout: float = 60) -> None:
    """Stable with `members` members, each live worker holding exactly the partitions the broker
    assigned to it in this generation, and those cover every partition once. (Comparing with the
    broker's assignment, not only checking coverage: a worker's "A" line lags its client, so right
    after a rebalance [0..5], [], [] from the previous generation also covers every partition.)"""
    from kbroker.admin.groups import decode_assignment

    def ready() -> bool:
        d = describe(broker, group)
        if d.group_state != "Stable" or len(d.members) != members:
            return False
        assigned = {m.client_id: sorted(p for _, p in decode_assignment(m.member_assignment)) for m in d.members}
        if any(assigned.get(w.name) != w.assignment for w in workers):
            return False
        owned = sorted(p for w in workers for p in w.assignment)
        return owned == list(range(PARTITIONS))

    wait_until(ready, timeout, f"{group} Stable with {members} members", workers)


def assert_exactly_once(workers, produced: Counter, catch_up_s: float = 10.0) -> None:
    # A worker writes what it processed just after its commit returns, so the test's OffsetFetch can
    # see a commit whose records are not in the worker's file yet: give the files a moment.
    deadline = time.monotonic() + catch_up_s
    while True:
        seen = Counter(r for w in workers for r in w.records())
        if sum(seen.values()) >= sum(produced.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    duplicates = [r for r, n in seen.items() if n > 1]
    assert not duplicates, f"{len(duplicates)} records processed twice, e.g. {sorted(duplicates)[:5]}"
    for partition in range(PARTITIONS):
        offsets = sorted(o for p, o in seen if p == partition)
        assert offsets == list(range(produced[partition])), (
            f"partition {partition}: {len(offsets)} processed of {produced[partition]}; gaps at "
            f"{sorted(set(range(produced[partition])) - set(offsets))[:5]}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("groups-clients") / "data",
                         "--group-initial-rebalance-delay-ms", str(INITIAL_REBALANCE_DELAY_MS))
    yield proc
    proc.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_three_consumers_close_and_kill(broker, tmp_path, client):
    topic, group = f"orders-{client}", f"group-{client}"
    create_topic(broker, topic)
    produced: Counter = Counter()
    phase = MESSAGES // 3
    produce(broker, topic, phase, produced)
    workers = [Worker(broker, tmp_path, client, group, topic, name=f"{client}-{i}") for i in range(3)]
    first, second, third = workers
    try:
        wait_stable(broker, group, 3, workers)
        assert all(len(w.assignment) == 2 for w in workers), [w.assignment for w in workers]
        wait_committed(broker, group, topic, produced, workers)

        # A graceful close while the next third is being consumed: its partitions move within one
        # rebalance, and nothing is lost or processed twice across it.
        before = generations(broker, group)[-1]
        produce(broker, topic, phase, produced)
        third.close()
        wait_stable(broker, group, 2, [first, second])
        time.sleep(1.5)  # a second rebalance, if one were coming, would have started by now
        wait_stable(broker, group, 2, [first, second])
        assert_one_rebalance(broker, group, before, client,
                             lambda e: e["reason"].endswith(" left") and member_of(third, e["members_out"])
                             and len(e["members_out"]) == 1 and not e["members_in"])
        wait_committed(broker, group, topic, produced, [first, second])

        # A crash: the partitions move once the session times out.
        before = generations(broker, group)[-1]
        second.kill()
        killed_at = time.monotonic()
        wait_until(lambda: len(describe(broker, group).members) == 1, 30, "the dead member's removal", [first])
        waited = time.monotonic() - killed_at
        assert SESSION_TIMEOUT_MS / 1000 - 1.5 <= waited <= SESSION_TIMEOUT_MS / 1000 + 8, waited
        wait_stable(broker, group, 1, [first])
        assert_one_rebalance(broker, group, before, client,
                             lambda e: e["reason"].startswith("session expired") and member_of(second, e["members_out"])
                             and len(e["members_out"]) == 1 and not e["members_in"])
        produce(broker, topic, MESSAGES - 2 * phase, produced)
        wait_committed(broker, group, topic, produced, [first])
        assert sum(produced.values()) == MESSAGES
        assert_exactly_once(workers, produced)
    finally:
        for w in workers:
            w.kill()


def test_static_member_restart_keeps_assignment_without_rebalance(broker, tmp_path):
    client, topic, group = "confluent-range", "orders-static", "group-static"
    create_topic(broker, topic)
    produced: Counter = Counter()
    produce(broker, topic, SMALL_MESSAGES // 2, produced)
    kw = {"session_timeout_ms": STATIC_SESSION_TIMEOUT_MS}
    a = Worker(broker, tmp_path, client, group, topic, instance_id="static-a", name="static-a", **kw)
    b = Worker(broker, tmp_path, client, group, topic, instance_id="static-b", name="static-b-1", **kw)
    restarted = None
    try:
        wait_stable(broker, group, 2, [a, b])
        wait_committed(broker, group, topic, produced, [a, b])
        gens, b_assignment = generations(broker, group), b.assignment
        members_before = {m.group_instance_id: m.member_id for m in describe(broker, group).members}
        restarted = Worker(broker, tmp_path, client, group, topic, instance_id="static-b", name="static-b-2",
                           hold=True, **kw)
        b.kill()
        killed_at = time.monotonic()
        restarted.release()
        wait_until(lambda: restarted.assignment != [], 60, "the static member's return", [a, restarted])
        back_after = time.monotonic() - killed_at
        assert restarted.assignment == b_assignment, (back_after, rebalance_story(broker, group))
        members_after = {m.group_instance_id: m.member_id for m in describe(broker, group).members}
        assert members_after["static-a"] == members_before["static-a"]
        assert members_after["static-b"] != members_before["static-b"]  # a new member id in the same slot
        produce(broker, topic, SMALL_MESSAGES - SMALL_MESSAGES // 2, produced)
        wait_committed(broker, group, topic, produced, [a, restarted])
        assert generations(broker, group) == gens, (
            f"the restart ({back_after:.1f} s after the kill) caused a rebalance\n{rebalance_story(broker, group)}")
        # The other static member never lost or changed its partitions.
        assert {tuple(x) for x in a.assignments() if x} == {tuple(a.assignment)}
        assert_exactly_once([a, b, restarted], produced)
    finally:
        for w in (a, b, restarted):
            if w is not None:
                w.kill()


def test_broker_restart_keeps_offsets_and_generation(broker, tmp_path):
    client, topic, group = "confluent-range", "orders-restart", "group-restart"
    create_topic(broker, topic)
    produced: Counter = Counter()
    produce(broker, topic, SMALL_MESSAGES // 2, produced)
    kw = {"session_timeout_ms": RESTART_SESSION_TIMEOUT_MS}
    workers = [Worker(broker, tmp_path, client, group, topic, name=f"restart-{i}", **kw) for i in range(2)]
    try:
        wait_stable(broker, group, 2, workers)
        wait_committed(broker, group, topic, produced, workers)
        offsets = committed(broker, group, topic)
        generation = generations(broker, group)[-1]
        members = sorted(m.member_id for m in describe(broker, group).members)

        broker.restart()

        wait_until(lambda: describe(broker, group).error_code == 0 and describe(broker, group).group_state != "Dead",
                   20, "the group to be loaded")
        assert committed(broker, group, topic) == offsets
        after = describe(broker, group)
        assert sorted(m.member_id for m in after.members) == members
        # The generation survived: the members' heartbeats at the old generation are accepted.
        for member in members:
            error = wire_call(broker, 12, 3, HeartbeatRequest(group, generation, member, None)).error_code
            assert error in (0, 27), error  # 27 only if a rebalance started meanwhile
        produce(broker, topic, SMALL_MESSAGES - SMALL_MESSAGES // 2, produced)
        wait_committed(broker, group, topic, produced, workers)
        assert_exactly_once(workers, produced)  # nothing was read twice
        # No rebalance since the restart (or, if the restart outlasted a session, one that continues the
        # generation count rather than starting over).
        since_restart = generations(broker, group, start=broker.starts)
        assert since_restart in ([], [generation + 1]), (since_restart, rebalance_story(broker, group))
    finally:
        for w in workers:
            w.kill()


def test_mixed_kafka_python_and_confluent_group(broker, tmp_path):
    topic, group = "orders-mixed", "group-mixed"
    create_topic(broker, topic)
    produced: Counter = Counter()
    produce(broker, topic, SMALL_MESSAGES, produced)
    workers = [Worker(broker, tmp_path, "kafka-python", group, topic, name="mixed-kafka-python"),
               Worker(broker, tmp_path, "confluent-range", group, topic, name="mixed-confluent")]
    try:
        wait_stable(broker, group, 2, workers)
        assert sorted(len(w.assignment) for w in workers) == [3, 3]
        wait_committed(broker, group, topic, produced, workers)
        d = describe(broker, group)
        assert (d.protocol_type, d.protocol_data) == ("consumer", "range")
        assert_exactly_once(workers, produced)
        for w in workers:
            w.close()
        assert describe(broker, group).group_state == "Empty"
    finally:
        for w in workers:
            w.kill()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        asyncio.run(_worker(json.loads(sys.argv[2])))
    else:
        sys.exit(f"usage: {sys.argv[0]} worker <json>")
