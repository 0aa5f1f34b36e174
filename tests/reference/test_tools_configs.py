"""kafka-configs.sh (ConfigCommand) against kbroker as an operator uses it: topic configs (describe the
overrides and --all, add and delete, mistakes), the broker's (describe, the cluster-wide default, a
dynamic change), client quotas and SCRAM users. Each command runs against Apache Kafka 4.4 too and the
outputs are compared (level "tools"); the entry-by-entry comparison of DescribeConfigs is the config
level's (test_differential_config.py)."""

from __future__ import annotations

import time

import pytest

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import CONFIGS, TOPICS, Side, ToolPair


def scram_in_order(line: str) -> str:
    """A user's SCRAM credentials sorted: Kafka lists them in hash order, which varies with their iterations."""
    head, sep, tail = line.partition(" are ")
    return head + sep + ", ".join(sorted(tail.split(", "))) if sep and "SCRAM credential configs" in head else line


@pytest.fixture(scope="module")
def pair(kafka_reference, kbroker, run_id):
    level = Level("tools", part="kafka-configs", prefixes=["kafka-configs"])
    yield ToolPair(Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker), level, replace=[(run_id, "RUN"), scram_in_order])
    level.settle()


def test_topic_configs(pair, run_id):
    topic = f"configs-{run_id}"
    for side in pair.sides:
        side.tool(TOPICS, "--create", "--topic", topic, "--partitions", "1", "--config", "retention.ms=3600000").check()
    entity = ["--entity-type", "topics", "--entity-name", topic]
    _, kbroker = pair.run("kafka-configs --describe (topic)", CONFIGS, "--describe", *entity)
    assert kbroker.lines[1].strip().startswith("retention.ms=3600000 sensitive=false")
    pair.run("kafka-configs --describe --all (topic)", CONFIGS, "--describe", *entity, "--all")
    pair.run("kafka-configs --alter --add-config (topic)", CONFIGS, "--alter", *entity, "--add-config",
             "max.message.bytes=2000000,cleanup.policy=[compact,delete],retention.ms=7200000")
    _, kbroker = pair.run("kafka-configs --describe (topic, after add)", CONFIGS, "--describe", *entity)
    assert any(line.strip().startswith("cleanup.policy=compact,delete") for line in kbroker.lines)
    pair.run("kafka-configs --alter --delete-config (topic)", CONFIGS, "--alter", *entity, "--delete-config",
             "retention.ms,cleanup.policy")
    pair.run("kafka-configs --describe (topic, after delete)", CONFIGS, "--describe", *entity)
    pair.run("kafka-configs --alter --add-config (unknown config)", CONFIGS, "--alter", *entity, "--add-config",
             "no.such.config=1")
    pair.run("kafka-configs --alter --add-config (bad value)", CONFIGS, "--alter", *entity, "--add-config",
             "retention.ms=soon")
    pair.run("kafka-configs --alter --delete-config (not set)", CONFIGS, "--alter", *entity, "--delete-config",
             "segment.ms")
    pair.run("kafka-configs --describe (unknown topic)", CONFIGS, "--describe", "--entity-type", "topics",
             "--entity-name", f"nosuch-{run_id}")
    pair.run("kafka-configs --describe (topics, by --topic)", CONFIGS, "--describe", "--topic", topic)


def test_broker_configs(pair):
    pair.run("kafka-configs --describe (broker)", CONFIGS, "--describe", "--entity-type", "brokers",
             "--entity-name", "1")
    pair.run("kafka-configs --describe (broker default)", CONFIGS, "--describe", "--entity-type", "brokers",
             "--entity-default")
    pair.run("kafka-configs --describe (unknown broker)", CONFIGS, "--describe", "--entity-type", "brokers",
             "--entity-name", "7")
    kbroker = pair.kbroker.tool(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all")
    # every broker config kbroker has a Kafka name for, with its synonyms (the values are the config level's)
    assert kbroker.returncode == 0 and kbroker.lines[0] == "All configs for broker 1 are:"
    shown = {line.split("=", 1)[0].strip() for line in kbroker.lines[1:]}
    assert {"connections.max.reauth.ms", "group.consumer.session.timeout.ms", "log.retention.hours",
            "num.partitions", "offsets.retention.minutes", "transaction.max.timeout.ms"} <= shown
    node, default = ["--entity-type", "brokers", "--entity-name", "1"], ["--entity-type", "brokers", "--entity-default"]
    try:  # dynamic broker configs (issue 43): this broker's own, then the cluster-wide default
        pair.run("kafka-configs --alter --add-config (broker)", CONFIGS, "--alter", *node, "--add-config",
                 "log.cleaner.threads=2,log.retention.ms=86400000")
        pair.run("kafka-configs --alter --add-config (broker default)", CONFIGS, "--alter", *default, "--add-config",
                 "log.retention.ms=43200000,log.cleaner.backoff.ms=20000")
        _kafka_settled(pair, node, shown="DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=43200000")
        pair.run("kafka-configs --describe (broker, dynamic)", CONFIGS, "--describe", *node)
        pair.run("kafka-configs --describe (broker default, dynamic)", CONFIGS, "--describe", *default)
        pair.run("kafka-configs --alter --add-config (per-broker config at the default)", CONFIGS, "--alter",
                 *default, "--add-config", "sasl.kerberos.min.time.before.relogin=58000")
        pair.run("kafka-configs --alter --add-config (bad value, broker)", CONFIGS, "--alter", *node, "--add-config",
                 "log.retention.ms=soon")
        pair.run("kafka-configs --alter --delete-config (broker)", CONFIGS, "--alter", *node, "--delete-config",
                 "log.cleaner.threads,log.retention.ms")
    finally:  # the brokers are the whole session's: put them back
        for side in pair.sides:
            side.tool(CONFIGS, "--alter", *node, "--delete-config", "log.cleaner.threads,log.retention.ms")
            side.tool(CONFIGS, "--alter", *default, "--delete-config", "log.retention.ms,log.cleaner.backoff.ms")
    pair.run("kafka-configs --alter --add-config (read-only broker config)", CONFIGS, "--alter", "--entity-type",
             "brokers", "--entity-name", "1", "--add-config", "node.id=2")


def test_client_quotas_and_scram_users(pair, run_id):
    client, user = f"client-{run_id}", f"user-{run_id}"
    clients = ["--entity-type", "clients", "--entity-name", client]
    users = ["--entity-type", "users", "--entity-name", user]
    pair.run("kafka-configs --alter --add-config (client quota)", CONFIGS, "--alter", *clients, "--add-config",
             "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    _, kbroker = pair.run("kafka-configs --describe (client quota)", CONFIGS, "--describe", *clients)
    assert "producer_byte_rate=1048576.0" in kbroker.stdout
    pair.run("kafka-configs --alter --add-config (user and client quota)", CONFIGS, "--alter", *users, *clients,
             "--add-config", "request_percentage=50")
    pair.run("kafka-configs --describe (user and client quota)", CONFIGS, "--describe", *users, *clients)
    pair.run("kafka-configs --alter --delete-config (client quota)", CONFIGS, "--alter", *clients, "--delete-config",
             "consumer_byte_rate")
    _kafka_settled(pair, clients, gone="consumer_byte_rate")
    pair.run("kafka-configs --describe (client quota, after delete)", CONFIGS, "--describe", *clients)
    pair.run("kafka-configs --alter --add-config (unknown quota)", CONFIGS, "--alter", *clients, "--add-config",
             "no_such_rate=5")
    # one request may not name a user twice, even for two mechanisms (DUPLICATE_RESOURCE)
    pair.run("kafka-configs --alter --add-config (SCRAM user, two mechanisms)", CONFIGS, "--alter", *users,
             "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")
    pair.run("kafka-configs --alter --add-config (SCRAM user)", CONFIGS, "--alter", *users, "--add-config",
             "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    pair.run("kafka-configs --alter --add-config (SCRAM user, second mechanism)", CONFIGS, "--alter", *users,
             "--add-config", "SCRAM-SHA-512=[password=alice-secret]")
    _, kbroker = pair.run("kafka-configs --describe (SCRAM user)", CONFIGS, "--describe", *users)
    assert "SCRAM-SHA-256=iterations=8192" in kbroker.stdout
    pair.run("kafka-configs --alter --delete-config (SCRAM user)", CONFIGS, "--alter", *users, "--delete-config",
             "SCRAM-SHA-512")
    _kafka_settled(pair, users, gone="SCRAM-SHA-512")
    pair.run("kafka-configs --describe (SCRAM user, after delete)", CONFIGS, "--describe", *users)
    pair.run("kafka-configs --alter --add-config (SCRAM, too few iterations)", CONFIGS, "--alter", *users,
             "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")


def _kafka_settled(pair: ToolPair, entity: list[str], gone: str | None = None, shown: str | None = None,
                   bound_s: float = 30.0) -> None:
    """Wait (bounded) until Kafka's describe no longer shows `gone`: its quotas and SCRAM credentials
    change through the controller's metadata log, and the broker that answers the describe applies it
    a moment later (a loaded CI run described the user before the delete had reached it). kbroker
    answers the alter once the change is in place, so only Kafka's side is waited for."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:  # (a cluster-wide default reaches its brokers the same way)
        out = pair.kafka.tool(CONFIGS, "--describe", *entity).stdout
        if (gone is None or gone not in out) and (shown is None or shown in out):
            return
        time.sleep(0.5)
