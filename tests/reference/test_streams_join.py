"""Issue 46's join of two co-partitioned topics on the streams rebalance protocol (KIP-1071), on kbroker and on
Apache Kafka 4.4 alike: StreamsScenario.joinTopology (a windowed KStream-KStream join of `left` and `right`,
four partitions each: one subtopology reading both, so four tasks whose two window stores have changelogs)
under exactly-once v2, run by one instance (tests/clients/java/StreamsInstance.java, its own JVM), then by
three. Lines are produced to both sides before and while they run.

Observed on each broker: the active tasks per instance once one runs and once three run (settled: the
instances report them and the broker describes the group Stable with them, streams_instances.wait_settled), the
internal topics the broker created, and the read_committed output: every (left, right) pair of a key
exactly once (the join's output is a set of pairs, whatever the order in which the records meet), none
else. Both brokers must observe the same, and the right output."""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from kbroker.tests.reference.streams_instances import WAIT_S, Instance, on_both_brokers, wait_settled

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402 (after the skip)

PARTITIONS = 4
TASKS = frozenset(f"0_{p}" for p in range(PARTITIONS))  # one subtopology reads both topics
KEYS = 8


def produce(bootstrap: str, left: str, right: str, first: int, n: int, pairs: Counter, sides: dict) -> None:
    """n records to each side, keys k0..k7; the expected output gains every new pair of a key."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(first, first + n):
        key = f"k{i % KEYS}"
        for topic, side, value in ((left, "left", f"L{i}"), (right, "right", f"R{i}")):
            producer.produce(topic, key=key, value=value)
            other = sides["right" if side == "left" else "left"].get(key, [])
            for o in other:
                pairs[(key, f"{value}+{o}" if side == "left" else f"{o}+{value}")] += 1
            sides[side].setdefault(key, []).append(value)
    assert producer.flush(60) == 0


def read_output(bootstrap: str, topic: str, expected: Counter) -> Counter:
    """The output as a read_committed consumer reads it, until it holds as many records as expected and a
    few seconds more (a duplicate would show) or the wait ends."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: Counter = Counter()
    deadline, full_since = time.monotonic() + WAIT_S, None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen[(msg.key().decode(), msg.value().decode())] += 1
            if sum(seen.values()) >= sum(expected.values()):
                full_since = full_since or time.monotonic()
                if time.monotonic() - full_since >= 3:
                    break
    finally:
        consumer.close()
    return seen


def internal_topics(bootstrap: str, app: str) -> dict[str, int]:
    """The topics the broker created for the application (its two window stores' changelogs), by name less
    the application id, with their partition counts."""
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    return {name.removeprefix(app + "-"): len(t.partitions) for name, t in sorted(topics.items())
            if name.startswith(app + "-") and name.endswith("-changelog")}


def scenario(bootstrap: str, java: list[str], work: Path) -> dict:
    app = f"sjn-{uuid.uuid4().hex[:6]}"
    left, right, sink = f"{app}-left", f"{app}-right", f"{app}-out"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (left, right, sink)]).values():
        f.result(60)
    pairs: Counter = Counter()
    sides: dict = {"left": {}, "right": {}}
    produce(bootstrap, left, right, 0, 24, pairs, sides)
    instances = [Instance([*java, bootstrap, app, f"{left},{right}", sink], work / f"state-{i}",
                          work / f"instance-{i}.log") for i in range(3)]
    observed: dict = {}
    try:
        instances[0].start()
        observed["one_instance"], _ = wait_settled(instances[:1], "one instance", bootstrap, app, standbys=False,
                                                    tasks=TASKS)
        produce(bootstrap, left, right, 24, 16, pairs, sides)
        for i in instances[1:]:
            i.start()
        observed["three_instances"], _ = wait_settled(instances, "three instances", bootstrap, app, standbys=False,
                                                      tasks=TASKS)
        produce(bootstrap, left, right, 40, 16, pairs, sides)
        output = read_output(bootstrap, sink, pairs)
        observed["changelogs"] = internal_topics(bootstrap, app)
    finally:
        for i in instances:
            i.stop()
    observed["every_pair_once_none_else"] = output == pairs
    observed["missing"] = sum((pairs - output).values())
    observed["unexpected"] = sum((output - pairs).values())
    observed["pairs"] = sum(pairs.values())
    return observed


@pytest.mark.timeout(1200)
def test_a_copartitioned_join_by_one_then_three_instances_as_on_kafka(tmp_path) -> None:
    if shutil.which("javac") is None:
        pytest.skip("javac is missing (a JDK: Java 17 or later)")
    results = on_both_brokers(tmp_path, scenario)
    assert results["kafka"]["every_pair_once_none_else"], results  # else the scenario, not kbroker, is wrong
    assert results["kbroker"] == results["kafka"]
