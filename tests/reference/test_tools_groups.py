"""kafka-consumer-groups.sh (ConsumerGroupCommand) and kafka-groups.sh (GroupsCommand) against kbroker as an
operator uses them: list (with states and types), describe (offsets, members, state, verbose), reset
offsets (every way of naming the new offsets, dry run, execute, export and from a file), delete offsets,
delete groups, and the refusals (a live group, an unknown group). The same steps run against Apache
Kafka 4.4 and the outputs are compared (level "tools").

Both brokers get the same records with fixed timestamps, so offsets by time are the same on both; the
groups are made by a real client (confluent-kafka), classic and KIP-848 consumer protocol."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import CONSUMER_GROUPS, GROUPS, Side, ToolPair

BASE_MS = 1_700_000_000_000  # record i of partition p has timestamp BASE_MS + i * 60 s
RECORDS = 10  # per partition
# classic member ids (client id and a UUID), KIP-848 ones (22 characters of base64, standard or URL-safe)
MEMBER = (r"\S*-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![\w+/-])[\w+/-]{22}(?![\w+/-])",
          "<member>")
HOST = (r"/127\.0\.0\.1", "/<host>")


def _produce(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(3):
        for i in range(RECORDS):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{p}-{i}".encode(), partition=p,
                             timestamp=BASE_MS + i * 60_000)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, group: str, topic: str, count: int, protocol: str = "classic", close: bool = True):
    """A group member that reads `count` records and commits them; closed unless asked to stay."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "client.id": "reference-consumer"}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 30000
    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 120  # a wait bound: the session's one Kafka JVM serves every file
    while seen < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen += 1
    assert seen == count, f"{group} read {seen} of {count}"
    consumer.commit(asynchronous=False)
    if close:
        consumer.close()
        return None
    return consumer


@pytest.fixture(scope="module")
def pair(kafka_reference, kbroker, run_id):
    level = Level("tools", part="kafka-consumer-groups", prefixes=["kafka-consumer-groups", "kafka-groups"])
    sides = (Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker))
    for side in sides:
        _produce(side.bootstrap, f"orders-{run_id}")
    yield ToolPair(*sides, level, replace=[(run_id, "RUN"), MEMBER, HOST])
    level.settle()


def test_list_and_describe_groups(pair, run_id):
    topic, done, live, kip848 = f"orders-{run_id}", f"done-{run_id}", f"live-{run_id}", f"kip848-{run_id}"
    members = []
    try:
        for side in pair.sides:
            _consume(side.bootstrap, done, topic, 3 * RECORDS)
            members.append(_consume(side.bootstrap, live, topic, 3 * RECORDS, close=False))
            members.append(_consume(side.bootstrap, kip848, topic, 3 * RECORDS, protocol="consumer", close=False))
        ours = ["--describe", "--group", done, "--group", live, "--group", kip848]
        _, kbroker = pair.run("kafka-consumer-groups --describe", CONSUMER_GROUPS, "--describe", "--group", done)
        assert kbroker.returncode == 0 and any(f"{done} {topic} 0 10 10 0" in " ".join(line.split())
                                               for line in kbroker.lines)
        pair.run("kafka-consumer-groups --describe (three groups)", CONSUMER_GROUPS, *ours)
        pair.run("kafka-consumer-groups --describe --offsets --verbose", CONSUMER_GROUPS, *ours, "--offsets", "--verbose")
        pair.run("kafka-consumer-groups --describe --members", CONSUMER_GROUPS, *ours, "--members")
        pair.run("kafka-consumer-groups --describe --members --verbose", CONSUMER_GROUPS, *ours, "--members",
                 "--verbose")
        _, kbroker = pair.run("kafka-consumer-groups --describe --state", CONSUMER_GROUPS, *ours, "--state")
        assert any(live in line and "Stable" in line for line in kbroker.lines)
        pair.run("kafka-consumer-groups --describe --state --verbose", CONSUMER_GROUPS, *ours, "--state", "--verbose")
        runs = [side.tool(CONSUMER_GROUPS, "--list") for side in pair.sides]
        for run in runs:  # the shared reference broker has other files' groups too: ours are there
            assert {done, live, kip848} <= set(run.lines)
        pair.compare("kafka-consumer-groups --list", *(_only(run, run_id) for run in runs), unordered=True)
        pair.compare("kafka-consumer-groups --list --state", *(
            _only(side.tool(CONSUMER_GROUPS, "--list", "--state"), run_id) for side in pair.sides))
        pair.compare("kafka-consumer-groups --list --type", *(
            _only(side.tool(CONSUMER_GROUPS, "--list", "--type"), run_id) for side in pair.sides))
        pair.compare("kafka-consumer-groups --list --state Stable", *(
            _only(side.tool(CONSUMER_GROUPS, "--list", "--state", "Stable"), run_id) for side in pair.sides))
        pair.compare("kafka-groups --list", *(_only(side.tool(GROUPS, "--list"), run_id) for side in pair.sides))
        pair.compare("kafka-groups --list --consumer", *(
            _only(side.tool(GROUPS, "--list", "--consumer"), run_id) for side in pair.sides))
        pair.compare("kafka-groups --list --group-type classic", *(
            _only(side.tool(GROUPS, "--list", "--group-type", "classic"), run_id) for side in pair.sides))
        pair.run("kafka-consumer-groups --reset-offsets (live group)", CONSUMER_GROUPS, "--reset-offsets",
                 "--group", live, "--topic", topic, "--to-earliest", "--execute")
        pair.run("kafka-consumer-groups --delete (live group)", CONSUMER_GROUPS, "--delete", "--group", live)
        pair.run("kafka-consumer-groups --delete-offsets (live group)", CONSUMER_GROUPS, "--delete-offsets",
                 "--group", live, "--topic", topic)
    finally:
        for member in members:
            member.close()
    pair.run("kafka-consumer-groups --describe (unknown group)", CONSUMER_GROUPS, "--describe", "--group",
             f"nosuch-{run_id}")
    pair.run("kafka-consumer-groups --describe --state (after leaving)", CONSUMER_GROUPS, "--describe", "--group",
             live, "--state")


def _only(run, run_id: str):
    """A --list run's header and this file's groups (the reference broker is shared by the session), each
    line's columns joined by one space and the lines sorted: the tools pad every column to the longest name
    of *all* groups listed and print them in the coordinator's map order, and the shared broker's other
    groups (other files', other runs') decide both; what is compared is which groups and what they say."""
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()
             if run_id in line or line.startswith(("GROUP", "Group"))]
    header = [line for line in lines if line.startswith(("GROUP", "Group"))]
    run.stdout = "\n".join(header + sorted(line for line in lines if line not in header)) + "\n"
    return run


def test_reset_offsets_every_way(pair, run_id, tmp_path):
    topic, group = f"orders-{run_id}", f"resets-{run_id}"
    for side in pair.sides:
        _consume(side.bootstrap, group, topic, 3 * RECORDS)
    at = time.strftime("%Y-%m-%dT%H:%M:%S.000", time.gmtime((BASE_MS + 4 * 60_000) / 1000))
    ways = {
        "--to-earliest": ["--to-earliest"],
        "--to-latest": ["--to-latest"],
        "--to-offset": ["--to-offset", "5"],
        "--to-offset (beyond the end)": ["--to-offset", "50"],
        "--shift-by": ["--shift-by", "-3"],
        "--shift-by (before the start)": ["--shift-by", "-30"],
        "--to-datetime": ["--to-datetime", at],
        "--by-duration": ["--by-duration", "PT1H"],
        "--to-current": ["--to-current"],
    }
    for label, spec in ways.items():
        pair.run(f"kafka-consumer-groups --reset-offsets {label} --dry-run", CONSUMER_GROUPS, "--reset-offsets",
                 "--group", group, "--topic", topic, *spec, "--dry-run")
    _, kbroker = pair.run("kafka-consumer-groups --reset-offsets --to-offset --execute", CONSUMER_GROUPS,
                          "--reset-offsets", "--group", group, "--topic", f"{topic}:0,2", "--to-offset", "4",
                          "--execute")
    assert kbroker.returncode == 0
    _, kbroker = pair.run("kafka-consumer-groups --describe (after reset)", CONSUMER_GROUPS, "--describe", "--group",
                          group)
    assert any(" ".join(line.split()).startswith(f"{group} {topic} 0 4 10 6") for line in kbroker.lines)
    pair.run("kafka-consumer-groups --reset-offsets --shift-by --execute (all topics)", CONSUMER_GROUPS,
             "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "2", "--execute")
    exports = []
    for side in pair.sides:
        exported = side.tool(CONSUMER_GROUPS, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest",
                             "--dry-run", "--export")
        exports.append(exported)
    pair.compare("kafka-consumer-groups --reset-offsets --export", *exports)
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,1\n{topic},1,2\n{topic},2,3\n")
    pair.run("kafka-consumer-groups --reset-offsets --from-file --execute", CONSUMER_GROUPS, "--reset-offsets",
             "--group", group, "--from-file", str(plan), "--execute")
    pair.run("kafka-consumer-groups --reset-offsets (no spec)", CONSUMER_GROUPS, "--reset-offsets", "--group", group,
             "--topic", topic, "--execute")
    pair.run("kafka-consumer-groups --reset-offsets (unknown topic)", CONSUMER_GROUPS, "--reset-offsets", "--group",
             group, "--topic", f"nosuch-{run_id}", "--to-earliest", "--execute")


def test_delete_offsets_and_groups(pair, run_id):
    topic, group, gone = f"orders-{run_id}", f"deletes-{run_id}", f"gone-{run_id}"
    for side in pair.sides:
        _consume(side.bootstrap, group, topic, 3 * RECORDS)
        _consume(side.bootstrap, gone, topic, 3 * RECORDS)
    pair.run("kafka-consumer-groups --delete-offsets (one partition)", CONSUMER_GROUPS, "--delete-offsets", "--group",
             group, "--topic", f"{topic}:1")
    pair.run("kafka-consumer-groups --delete-offsets (unknown topic)", CONSUMER_GROUPS, "--delete-offsets", "--group",
             group, "--topic", f"nosuch-{run_id}")
    _, kbroker = pair.run("kafka-consumer-groups --describe (after delete-offsets)", CONSUMER_GROUPS, "--describe",
                          "--group", group)
    rows = [" ".join(line.split()) for line in kbroker.lines if line.startswith(group)]
    # an inactive group shows the partitions it has offsets for: 0 and 2, no longer 1
    assert [row.split()[2] for row in rows] == ["0", "2"], kbroker.lines
    pair.run("kafka-consumer-groups --delete-offsets (whole topic)", CONSUMER_GROUPS, "--delete-offsets", "--group",
             group, "--topic", topic)
    pair.run("kafka-consumer-groups --delete-offsets (unknown group)", CONSUMER_GROUPS, "--delete-offsets", "--group",
             f"nosuch-{run_id}", "--topic", topic)
    _, kbroker = pair.run("kafka-consumer-groups --delete", CONSUMER_GROUPS, "--delete", "--group", gone,
                          "--group", group)
    assert kbroker.returncode == 0
    pair.run("kafka-consumer-groups --delete (again)", CONSUMER_GROUPS, "--delete", "--group", gone)
    pair.run("kafka-consumer-groups --describe (deleted group)", CONSUMER_GROUPS, "--describe", "--group", gone)
