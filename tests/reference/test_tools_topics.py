"""kafka-topics.sh (TopicCommand) against kbroker, as an operator uses it: create, list, describe (and
its filters), alter, delete, and the mistakes; each command run against Apache Kafka 4.4 too and the
outputs compared (level "tools", tests/reference/differences/tools.toml)."""

from __future__ import annotations

import pytest

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import TOPICS, Side, ToolPair, await_offsets_topic

TOPIC_ID = (r"TopicId: [A-Za-z0-9_-]{22}", "TopicId: <id>")


@pytest.fixture(scope="module")
def pair(kafka_reference, kbroker, run_id):
    level = Level("tools", part="kafka-topics", prefixes=["kafka-topics"])
    yield ToolPair(Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker), level,
                   replace=[(run_id, "RUN"), TOPIC_ID])
    level.settle()


def test_create_list_describe_alter_delete(pair, run_id):
    orders, audit = f"orders-{run_id}", f"audit-{run_id}"
    pair.run("kafka-topics --create", TOPICS, "--create", "--topic", orders, "--partitions", "3",
             "--replication-factor", "1", "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
    pair.run("kafka-topics --create (defaults)", TOPICS, "--create", "--topic", audit)
    pair.run("kafka-topics --create (exists)", TOPICS, "--create", "--topic", orders, "--partitions", "1")
    pair.run("kafka-topics --create --if-not-exists", TOPICS, "--create", "--if-not-exists", "--topic", orders)
    pair.run("kafka-topics --create (replication factor 3)", TOPICS, "--create", "--topic", f"rf3-{run_id}",
             "--replication-factor", "3")
    pair.run("kafka-topics --create (bad config)", TOPICS, "--create", "--topic", f"bad-{run_id}",
             "--config", "retention.ms=soon")
    pair.run("kafka-topics --create (zero partitions)", TOPICS, "--create", "--topic", f"zero-{run_id}",
             "--partitions", "0")
    kafka, kbroker = pair.run("kafka-topics --list", TOPICS, "--list", "--topic", f".*{run_id}")
    assert kbroker.lines == [audit, orders] and kbroker.returncode == 0
    _, kbroker = pair.run("kafka-topics --describe", TOPICS, "--describe", "--topic", orders)
    assert kbroker.lines[0].startswith(f"Topic: {orders}\tTopicId: ") and "PartitionCount: 3" in kbroker.lines[0]
    assert len(kbroker.lines) == 4
    pair.run("kafka-topics --describe --topics-with-overrides", TOPICS, "--describe", "--topic", f".*{run_id}",
             "--topics-with-overrides")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions",
                 "--at-min-isr-partitions"):
        pair.run(f"kafka-topics --describe {flag}", TOPICS, "--describe", "--topic", f".*{run_id}", flag)
    pair.run("kafka-topics --describe --partition-size-limit-per-response", TOPICS, "--describe", "--topic", orders,
             "--partition-size-limit-per-response", "1")
    _, kbroker = pair.run("kafka-topics --alter --partitions", TOPICS, "--alter", "--topic", orders, "--partitions", "5")
    assert kbroker.returncode == 0
    _, kbroker = pair.run("kafka-topics --describe (after alter)", TOPICS, "--describe", "--topic", orders)
    assert "PartitionCount: 5" in kbroker.lines[0]
    pair.run("kafka-topics --alter (fewer partitions)", TOPICS, "--alter", "--topic", orders, "--partitions", "2")
    pair.run("kafka-topics --alter (unknown topic)", TOPICS, "--alter", "--topic", f"nosuch-{run_id}",
             "--partitions", "2")
    pair.run("kafka-topics --describe (unknown topic)", TOPICS, "--describe", "--topic", f"nosuch-{run_id}")
    pair.run("kafka-topics --delete", TOPICS, "--delete", "--topic", audit)
    pair.run("kafka-topics --delete (unknown topic)", TOPICS, "--delete", "--topic", audit)
    pair.run("kafka-topics --delete --if-exists", TOPICS, "--delete", "--if-exists", "--topic", audit)
    _, kbroker = pair.run("kafka-topics --list (after delete)", TOPICS, "--list", "--topic", f".*{run_id}")
    assert kbroker.lines == [orders]


def test_internal_topics_are_listed_as_kafka_lists_them(pair, run_id):
    await_offsets_topic(pair.kafka.bootstrap)
    kafka, kbroker = pair.run("kafka-topics --describe __consumer_offsets", TOPICS, "--describe", "--topic",
                              "__consumer_offsets")
    assert "PartitionCount: 50" in kbroker.lines[0] and "cleanup.policy=compact" in kbroker.lines[0]
    pair.run("kafka-topics --list --exclude-internal", TOPICS, "--list", "--exclude-internal", "--topic", "__.*")
