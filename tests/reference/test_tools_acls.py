"""kafka-acls.sh (AclCommand) against a kbroker with an authorizer, as an operator uses it: add (by
operation, the --producer and --consumer shortcuts, deny, hosts, prefixed patterns, the cluster,
transactional ids), list (all, by resource, by principal, matching a name), remove, and the mistakes.
The same commands run against an Apache Kafka 4.4 node with its StandardAuthorizer (its own, started
for this file: the session's reference broker has none), and the outputs are compared (level "tools").

On both the tools connect as User:ANONYMOUS (PLAINTEXT), a super user, as an operator's admin would."""

from __future__ import annotations

import pytest

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.kafka import KafkaProcess, require_kafka_libs
from kbroker.tests.reference.pair import ACLS, Side, ToolPair, kbroker_like_kafka

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def kafka_with_acls(tmp_path_factory):
    require_kafka_libs()
    kafka = KafkaProcess(tmp_path_factory.mktemp("kafka-acls"), {
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def kbroker_with_acls(tmp_path_factory):
    broker = kbroker_like_kafka(tmp_path_factory.mktemp("kbroker-acls") / "data", "--authorizer-class-name",
                                AUTHORIZER, "--super-users", "User:ANONYMOUS")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def pair(kafka_with_acls, kbroker_with_acls):
    level = Level("tools", part="kafka-acls", prefixes=["kafka-acls"])
    yield ToolPair(Side.of_kafka(kafka_with_acls), Side.of_kbroker(kbroker_with_acls), level)
    level.settle()


def add(pair: ToolPair, check: str, *args: str):
    return pair.run(f"kafka-acls --add {check}", ACLS, "--add", *args, unordered=True)


def test_add_list_remove(pair):
    _, kbroker = add(pair, "(operations on a topic)", "--allow-principal", "User:alice", "--operation", "Read",
                     "--operation", "Describe", "--topic", "orders")
    assert kbroker.returncode == 0 and any("principal=User:alice" in line and "operation=READ" in line
                                           for line in kbroker.lines), kbroker.stdout
    add(pair, "--producer", "--allow-principal", "User:bob", "--producer", "--topic", "orders")
    add(pair, "--producer --idempotent --transactional-id", "--allow-principal", "User:bob", "--producer",
        "--idempotent", "--topic", "orders", "--transactional-id", "orders-tx")
    add(pair, "--consumer", "--allow-principal", "User:carol", "--consumer", "--topic", "orders", "--group",
        "billing")
    add(pair, "(deny from a host)", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.1", "--operation",
        "All", "--topic", "orders")
    add(pair, "(allow from hosts)", "--allow-principal", "User:dave", "--allow-host", "10.0.0.2", "--allow-host",
        "10.0.0.3", "--operation", "Write", "--topic", "orders")
    add(pair, "(prefixed)", "--allow-principal", "User:erin", "--operation", "Read", "--topic", "logs-",
        "--resource-pattern-type", "prefixed")
    add(pair, "(cluster)", "--allow-principal", "User:ops", "--operation", "Alter", "--operation",
        "DescribeConfigs", "--cluster")
    add(pair, "(all topics)", "--allow-principal", "User:auditor", "--operation", "Describe", "--topic", "*")
    pair.run("kafka-acls --list", ACLS, "--list", unordered=True)
    pair.run("kafka-acls --list --topic", ACLS, "--list", "--topic", "orders", unordered=True)
    pair.run("kafka-acls --list --principal", ACLS, "--list", "--principal", "User:bob", unordered=True)
    pair.run("kafka-acls --list --resource-pattern-type match", ACLS, "--list", "--topic", "logs-2024",
             "--resource-pattern-type", "match", unordered=True)
    pair.run("kafka-acls --list --resource-pattern-type any", ACLS, "--list", "--resource-pattern-type", "any",
             unordered=True)
    pair.run("kafka-acls --list --cluster", ACLS, "--list", "--cluster", unordered=True)
    pair.run("kafka-acls --list --group", ACLS, "--list", "--group", "billing", unordered=True)
    pair.run("kafka-acls --remove (one operation)", ACLS, "--remove", "--force", "--allow-principal", "User:alice",
             "--operation", "Read", "--topic", "orders", unordered=True)
    pair.run("kafka-acls --remove (a principal's, prefixed)", ACLS, "--remove", "--force", "--allow-principal",
             "User:erin", "--operation", "Read", "--topic", "logs-", "--resource-pattern-type", "prefixed",
             unordered=True)
    pair.run("kafka-acls --remove (a whole topic)", ACLS, "--remove", "--force", "--topic", "orders", unordered=True)
    _, kbroker = pair.run("kafka-acls --list (after remove)", ACLS, "--list", unordered=True)
    assert not any("ResourcePattern(resourceType=TOPIC, name=orders," in line for line in kbroker.lines)
    pair.run("kafka-acls --remove (nothing matches)", ACLS, "--remove", "--force", "--topic", "nosuch",
             unordered=True)


def test_mistakes(pair):
    pair.run("kafka-acls --add (no principal)", ACLS, "--add", "--operation", "Read", "--topic", "orders")
    pair.run("kafka-acls --add (operation the resource has not)", ACLS, "--add", "--allow-principal", "User:x",
             "--operation", "IdempotentWrite", "--topic", "orders")
    pair.run("kafka-acls --add (bad principal)", ACLS, "--add", "--allow-principal", "alice", "--operation", "Read",
             "--topic", "orders")
    pair.run("kafka-acls --add (match pattern)", ACLS, "--add", "--allow-principal", "User:x", "--operation", "Read",
             "--topic", "orders", "--resource-pattern-type", "match")
    pair.run("kafka-acls --add (no resource)", ACLS, "--add", "--allow-principal", "User:x", "--operation", "Read")
