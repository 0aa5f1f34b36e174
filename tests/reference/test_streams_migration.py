"""Offline migration between a Kafka Streams application's streams group and a classic consumer group,
both ways, with real clients, on kbroker and on Apache Kafka 4.4 alike (issue 46: "offline migration
between classic and streams as Kafka 4.2.1 allows"; Kafka 4.4's classicGroupJoin deletes an empty
streams group, its getOrCreateStreamsGroup an empty classic group; the committed offsets stay):

1. StreamsInstance (tests/clients/java: the word count on group.protocol=streams, exactly-once v2)
   consumes the input and is stopped: its streams group is empty, its offsets committed;
2. a classic consumer (confluent-kafka, the classic protocol) with the application id as group id joins:
   it starts where the application stopped (reads none of the old lines), reads the new ones, commits
   and closes;
3. the application starts again: its streams group takes the empty classic group over and goes on from
   the classic consumer's offsets: the lines the classic consumer read are not counted.

Observed on each broker: whether each side joined, what the classic consumer read, and the word counts on
the read_committed output (each word's counts 1, 2, ..., n once and in order, n its occurrences in the
lines the application read). Both brokers must observe the same, and the right counts."""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from kbroker.tests.reference.streams_instances import WAIT_S, Instance, on_both_brokers, wait_settled
from kbroker.tests.reference.test_streams_failover import LINES, committed_counts

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402 (after the skip)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """The group's committed offsets on `topic` are at its end (every line consumed and committed)."""
    probe = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p) for p in range(2)]
        committed = probe.committed(parts, timeout=10)
        ends = [probe.get_watermark_offsets(tp, timeout=10)[1] for tp in parts]
        return [tp.offset for tp in committed] == ends
    finally:
        probe.close()


def wait_caught_up(bootstrap: str, group: str, topic: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not caught_up(bootstrap, group, topic):
        if time.monotonic() > deadline:
            raise AssertionError(f"{group} did not commit the end of {topic} in {WAIT_S} s")
        time.sleep(0.5)


def classic_consumer(bootstrap: str, group: str, topic: str, new_lines: int, produce_new) -> dict:
    """A classic member of `group` joins, reads until it has the lines produced after it joined, commits
    and leaves. What it read: the old lines (there should be none) and the new ones."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "session.timeout.ms": 10_000})
    seen = {"joined": False, "old_lines_read": 0, "new_lines_read": 0}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(0.5)
        seen["joined"] = bool(consumer.assignment())
        if not seen["joined"]:
            return seen
        produce_new()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and seen["new_lines_read"] < new_lines:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen["new_lines_read" if int(msg.headers()[0][1]) >= 100 else "old_lines_read"] += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def produce_numbered(bootstrap: str, topic: str, rounds: int, first: int, expected: Counter | None) -> None:
    """StreamsScenario's lines, each with its number in a header (the classic consumer tells old from new)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    n = first
    for _ in range(rounds):
        for line in LINES:
            producer.produce(topic, key=f"line{n % 5}", value=line, headers=[("n", str(n).encode())])
            if expected is not None:
                expected.update(line.split(" "))
            n += 1
    assert producer.flush(60) == 0


def scenario(bootstrap: str, java: list[str], work: Path) -> dict:
    app = f"smg-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app}-in", f"{app}-out"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in (source, sink)]).values():
        f.result(60)
    expected: Counter = Counter()  # the words of the lines the application reads
    produce_numbered(bootstrap, source, 2, 0, expected)
    instance = Instance([*java, bootstrap, app, source, sink], work / "state", work / "instance.log")
    observed: dict = {}
    try:
        instance.start()
        observed["streams_first"], _ = wait_settled([instance], "the application", bootstrap, app, standbys=False)
        wait_caught_up(bootstrap, app, source)
        instance.stop()  # leaves: the streams group is empty
        new = len(LINES)
        observed["classic"] = classic_consumer(bootstrap, app, source, new,
                                               lambda: produce_numbered(bootstrap, source, 1, 100, None))
        produce_numbered(bootstrap, source, 2, 200, expected)
        instance.start()  # the empty classic group gives way to the application's streams group again
        observed["streams_again"], _ = wait_settled([instance], "the application again", bootstrap, app, standbys=False)
        counts = committed_counts(bootstrap, sink, expected)
    finally:
        instance.stop()
    observed["every_count_once_in_order"] = all(counts.get(w) == list(range(1, n + 1)) for w, n in expected.items())
    observed["wrong_words"] = sorted(w for w, n in expected.items() if counts.get(w) != list(range(1, n + 1)))
    observed["words"] = len(counts)
    return observed


@pytest.mark.timeout(900)
def test_a_streams_group_and_a_classic_group_take_over_each_other_as_on_kafka(tmp_path) -> None:
    if shutil.which("javac") is None:
        pytest.skip("javac is missing (a JDK: Java 17 or later)")
    results = on_both_brokers(tmp_path, scenario)
    kafka_result = results["kafka"]
    assert kafka_result["every_count_once_in_order"], results  # else the scenario, not kbroker, is wrong
    assert kafka_result["classic"] == {"joined": True, "old_lines_read": 0, "new_lines_read": len(LINES)}, results
    assert results["kbroker"] == kafka_result
