"""Kafka Streams 4.4 on the streams rebalance protocol (KIP-1071) through a kill -9, on kbroker and on Apache
Kafka 4.4 alike (issue 46's verification): StreamsScenario's word count under exactly-once v2, the record
cache off (every input word is one count on the output), standby replicas on (the group config
streams.num.standby.replicas=1, set with IncrementalAlterConfigs before the group exists), run by three
instances, each its own JVM (tests/clients/java/StreamsInstance.java). Lines are produced while they run;
one instance is killed with SIGKILL while it processes them and restarted on its state
directory. Observed on each broker:

- the assignment once three instances run, and again after the restart (both settled: every instance
  RUNNING, every task active on exactly one instance, every stateful task's one standby on another
  instance than its active): the active tasks per instance, the tasks that have standbys (the stateful
  ones only), none beside its active. Which instance gets a standby is not compared (see wait_settled);
- the output read with read_committed: for every word, the counts 1, 2, ..., its number of occurrences,
  each once and in order (a duplicate or a lost update under exactly-once would show), the last one right.

Both brokers must observe the same (and the right counts). The sessions are shortened on both
(10 s, Kafka's floor for them lowered to 6 s) so the dead instance's member is fenced in seconds."""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from kbroker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.streams_instances import WAIT_S, Instance, on_both_brokers, wait_settled

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402 (after the skip)

LINES = ("the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "a fox is quick",
         "over and over again", "the end")  # StreamsScenario.LINES
KAFKA_CONFIG = {"group.streams.min.session.timeout.ms": "6000", "group.streams.session.timeout.ms": "10000",
                "group.streams.min.heartbeat.interval.ms": "1000", "group.streams.heartbeat.interval.ms": "2000"}
KBROKER_ARGS = ("--group-streams-session-timeout-ms", "10000", "--group-streams-heartbeat-interval-ms", "2000")


def produce(bootstrap: str, topic: str, rounds: int, expected: Counter, first: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    n = first
    for _ in range(rounds):
        for line in LINES:
            producer.produce(topic, key=f"line{n % 5}", value=line)
            expected.update(line.split(" "))
            n += 1
    assert producer.flush(60) == 0


def committed_counts(bootstrap: str, topic: str, expected: Counter) -> dict[str, list[int]]:
    """Every count on the output, per word, in order, as a read_committed consumer reads them; it reads
    until every word's last count is what was produced (or the wait ends)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: dict[str, list[int]] = {}
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.setdefault(msg.key().decode(), []).append(int.from_bytes(msg.value(), "big", signed=True))
            elif msg is None and {w: c[-1] for w, c in seen.items()} == dict(expected):
                break
    finally:
        consumer.close()
    return seen


def scenario(bootstrap: str, java: list[str], work: Path) -> dict:
    app = f"sfo-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app}-in", f"{app}-out"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in (source, sink)]).values():
        f.result(60)
    wire = Wire(bootstrap)
    try:
        answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=32, resource_name=app, configs=[AlterableConfig(
                name="streams.num.standby.replicas", config_operation=0, value="1")])], validate_only=False))
        assert answer.responses[0].error_code == 0, answer.responses[0].error_message
    finally:
        wire.close()
    expected: Counter = Counter()
    produce(bootstrap, source, 3, expected, 0)
    instances = [Instance([*java, bootstrap, app, source, sink], work / f"state-{i}", work / f"instance-{i}.log")
                 for i in range(3)]
    observed: dict = {}
    try:
        for i in instances:
            i.start()
        observed["three_instances"], _ = wait_settled(instances, "three instances", bootstrap, app)
        produce(bootstrap, source, 3, expected, 100)
        instances[1].kill()  # in the middle of its transactions
        produce(bootstrap, source, 2, expected, 200)
        instances[1].start()  # on its state directory, as a restarted instance
        observed["after_kill_and_restart"], _ = wait_settled(instances, "after the kill -9 and the restart",
                                                             bootstrap, app)
        produce(bootstrap, source, 2, expected, 300)
        counts = committed_counts(bootstrap, sink, expected)
    finally:
        for i in instances:
            i.stop()
    observed["every_count_once_in_order"] = all(counts.get(w) == list(range(1, n + 1)) for w, n in expected.items())
    observed["wrong_words"] = sorted(w for w, n in expected.items() if counts.get(w) != list(range(1, n + 1)))
    observed["words"] = len(counts)
    return observed


@pytest.mark.timeout(1500)
def test_three_instances_through_a_kill_are_exactly_once_with_the_same_assignments_as_kafka(tmp_path) -> None:
    if shutil.which("javac") is None:
        pytest.skip("javac is missing (a JDK: Java 17 or later)")
    results = on_both_brokers(tmp_path, scenario, KAFKA_CONFIG, KBROKER_ARGS)
    assert results["kafka"]["every_count_once_in_order"], results  # else the scenario, not kbroker, is wrong
    assert results["kbroker"] == results["kafka"]
