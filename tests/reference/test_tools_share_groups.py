"""kafka-share-groups.sh (Kafka 4.4's ShareGroupCommand) against kbroker as an operator uses it, and the
same steps against Apache Kafka 4.4, the outputs compared (level "tools"): --list (with states),
--describe (offsets, --members, --state, --verbose, an unknown group), --reset-offsets (each way of naming
the new start, dry run, execute, export), --delete-offsets, --delete, and the refusals while the group has
members. The share groups are made by a real client, confluent-kafka's ShareConsumer, reading every
record (share.auto.offset.reset earliest, set through IncrementalAlterConfigs) and acknowledging it
implicitly; both brokers get the same records with fixed timestamps."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.kafka import KafkaProcess, require_kafka_libs
from kbroker.tests.reference.pair import TOOLS, Side, ToolPair
from kbroker.tests.reference.test_tools_groups import HOST, MEMBER, _only

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer", allow_module_level=True)

SHARE_GROUPS = TOOLS + "consumer.group.ShareGroupCommand"
BASE_MS = 1_700_000_000_000  # record i of a partition has timestamp BASE_MS + i * 60 s
RECORDS = 5  # per partition
PARTITIONS = 2
# The epochs: Kafka's group coordinator assigns a share-partition once its share coordinator has
# initialized the partition's state (InitializeShareGroupState, after the heartbeat that subscribed),
# the group epoch moving with the steps that took; on Kafka 4.4 the same scenario printed 1 in one run
# and 3 in the next (timing, not behaviour). kbroker's share coordinator is in the process and assigns at
# once, in epoch 1 (docs/share-groups.md, "One difference on one node"). The columns are masked, not listed.
MEMBER_EPOCH = (r"(reference-share\s+\d+\s+)\d+", r"\1<epoch>")  # --members --verbose: #PARTITIONS, MEMBER-EPOCH
GROUP_EPOCHS = (r"((?:Stable|Empty)\s+)\d+(\s+)\d+", r"\1<epoch>\2<epoch>")  # --state --verbose: GROUP-, ASSIGNMENT-EPOCH


def _produce(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{p}-{i}".encode(), partition=p,
                             timestamp=BASE_MS + i * 60_000)
    assert producer.flush(30) == 0


def _earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (the GROUP config resource, 32), as librdkafka's
    share tests set it."""
    w = Wire(bootstrap)
    try:
        answer = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))
        assert answer.responses[0].error_code == 0, answer
    finally:
        w.close()


def _rows(side: Side, group: str) -> list[str]:
    run = side.tool(SHARE_GROUPS, "--describe", "--group", group)
    return sorted(" ".join(line.split()) for line in run.lines if line.startswith(group))


def _share_consume(side: Side, group: str, topic: str):
    """A ShareConsumer of `group` that reads every record and stays until the group's start offsets show
    them all acknowledged (implicit acknowledgement: each poll acknowledges what the last one gave)."""
    _earliest(side.bootstrap, group)
    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": side.bootstrap, "group.id": group,
                                              "client.id": "reference-share"})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 120  # a wait bound: the session's one Kafka JVM serves every file
    while len(seen) < PARTITIONS * RECORDS and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            if message.error() is None:
                seen.add(message.value())
    rows: list[str] = []
    while len(seen) == PARTITIONS * RECORDS and time.monotonic() < deadline:
        consumer.poll(0.5)  # acknowledges what the last poll gave
        rows = _rows(side, group)
        if len(rows) == PARTITIONS and all(row.endswith(" 0") and not row.endswith("- 0") for row in rows):
            return consumer  # every record acknowledged (lag 0) and durable
    consumer.close()
    raise AssertionError(f"{side.name}: {group} read {len(seen)} records; described {rows}")


@pytest.fixture(scope="module")
def own_kafka(tmp_path_factory):
    """A Kafka 4.4 of this file's own: on the worker's shared one, in loaded full runs, a new share group's
    ShareConsumer sometimes got no record in 120 s (3 of 7 runs, never alone, never on kbroker); with its
    own broker the share coordinator serves only this file's groups."""
    require_kafka_libs()
    kafka = KafkaProcess(tmp_path_factory.mktemp("kafka-share-tools"))
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def pair(own_kafka, kbroker, run_id):
    level = Level("tools", part="kafka-share-groups", prefixes=["kafka-share-groups"])
    sides = (Side.of_kafka(own_kafka), Side.of_kbroker(kbroker))
    for side in sides:
        _produce(side.bootstrap, f"queue-{run_id}")
    yield ToolPair(*sides, level, replace=[(run_id, "RUN"), MEMBER, HOST])
    level.settle()


def test_list_and_describe_a_share_group(pair, run_id):
    topic, live = f"queue-{run_id}", f"live-{run_id}"
    consumers = []
    try:
        for side in pair.sides:
            consumers.append(_share_consume(side, live, topic))
        _, kbroker = pair.run("kafka-share-groups --describe", SHARE_GROUPS, "--describe", "--group", live)
        assert kbroker.returncode == 0 and f"{live} {topic} 0 0 0" in [" ".join(line.split())
                                                                       for line in kbroker.lines], kbroker.lines
        pair.run("kafka-share-groups --describe --offsets --verbose", SHARE_GROUPS, "--describe", "--group", live,
                 "--offsets", "--verbose")
        pair.run("kafka-share-groups --describe --members", SHARE_GROUPS, "--describe", "--group", live, "--members")
        pair.run("kafka-share-groups --describe --members --verbose", SHARE_GROUPS, "--describe", "--group", live,
                 "--members", "--verbose", replace=[MEMBER_EPOCH])
        _, kbroker = pair.run("kafka-share-groups --describe --state", SHARE_GROUPS, "--describe", "--group", live,
                              "--state")
        assert any(live in line and "Stable" in line for line in kbroker.lines), kbroker.lines
        pair.run("kafka-share-groups --describe --state --verbose", SHARE_GROUPS, "--describe", "--group", live,
                 "--state", "--verbose", replace=[GROUP_EPOCHS])
        pair.compare("kafka-share-groups --list", *(
            _only(side.tool(SHARE_GROUPS, "--list"), run_id) for side in pair.sides))
        pair.compare("kafka-share-groups --list --state", *(
            _only(side.tool(SHARE_GROUPS, "--list", "--state"), run_id) for side in pair.sides))
        pair.compare("kafka-share-groups --list --state Stable", *(
            _only(side.tool(SHARE_GROUPS, "--list", "--state", "Stable"), run_id) for side in pair.sides))
        pair.run("kafka-share-groups --reset-offsets (live group)", SHARE_GROUPS, "--reset-offsets", "--group", live,
                 "--topic", topic, "--to-earliest", "--execute")
        pair.run("kafka-share-groups --delete-offsets (live group)", SHARE_GROUPS, "--delete-offsets", "--group",
                 live, "--topic", topic)
        pair.run("kafka-share-groups --delete (live group)", SHARE_GROUPS, "--delete", "--group", live)
    finally:
        for consumer in consumers:
            consumer.close()
    pair.run("kafka-share-groups --describe (unknown group)", SHARE_GROUPS, "--describe", "--group",
             f"nosuch-{run_id}")
    for side in pair.sides:  # the member's leave is seen by the coordinator
        deadline = time.monotonic() + 60
        while "Empty" not in side.tool(SHARE_GROUPS, "--describe", "--group", live, "--state").stdout:
            assert time.monotonic() < deadline, side.name
            time.sleep(0.5)
    pair.run("kafka-share-groups --describe --state (after leaving)", SHARE_GROUPS, "--describe", "--group", live,
             "--state")
    pair.run("kafka-share-groups --describe --members (after leaving)", SHARE_GROUPS, "--describe", "--group", live,
             "--members")


def test_reset_delete_offsets_and_delete(pair, run_id, tmp_path):
    topic, group, gone = f"queue-{run_id}", f"resets-{run_id}", f"gone-{run_id}"
    for side in pair.sides:
        _share_consume(side, group, topic).close()
        _share_consume(side, gone, topic).close()
    at = time.strftime("%Y-%m-%dT%H:%M:%S.000", time.gmtime((BASE_MS + 2 * 60_000) / 1000))
    ways = {
        "--to-earliest": ["--to-earliest"],
        "--to-latest": ["--to-latest"],
        "--to-offset": ["--to-offset", "2"],
        "--to-datetime": ["--to-datetime", at],
        "--to-current": ["--to-current"],
    }
    for label, spec in ways.items():
        pair.run(f"kafka-share-groups --reset-offsets {label} --dry-run", SHARE_GROUPS, "--reset-offsets", "--group",
                 group, "--topic", topic, *spec, "--dry-run")
    _, kbroker = pair.run("kafka-share-groups --reset-offsets --to-offset --execute", SHARE_GROUPS,
                          "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-offset", "2",
                          "--execute")
    assert kbroker.returncode == 0, kbroker
    _, kbroker = pair.run("kafka-share-groups --describe (after reset)", SHARE_GROUPS, "--describe", "--group", group)
    assert f"{group} {topic} 0 2 3" in [" ".join(line.split()) for line in kbroker.lines], kbroker.lines
    pair.run("kafka-share-groups --reset-offsets --to-earliest --execute (all topics)", SHARE_GROUPS,
             "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    pair.run("kafka-share-groups --reset-offsets --export", SHARE_GROUPS, "--reset-offsets", "--group", group,
             "--topic", topic, "--to-latest", "--dry-run", "--export")
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,1\n{topic},1,3\n")
    pair.run("kafka-share-groups --reset-offsets --from-file --execute", SHARE_GROUPS, "--reset-offsets", "--group",
             group, "--from-file", str(plan), "--execute")
    pair.run("kafka-share-groups --describe (after the file's reset)", SHARE_GROUPS, "--describe", "--group", group)
    pair.run("kafka-share-groups --reset-offsets (no spec)", SHARE_GROUPS, "--reset-offsets", "--group", group,
             "--topic", topic, "--execute")
    pair.run("kafka-share-groups --reset-offsets (unknown topic)", SHARE_GROUPS, "--reset-offsets", "--group", group,
             "--topic", f"nosuch-{run_id}", "--to-earliest", "--execute")
    pair.run("kafka-share-groups --delete-offsets", SHARE_GROUPS, "--delete-offsets", "--group", group, "--topic",
             topic)
    pair.run("kafka-share-groups --delete-offsets (unknown topic)", SHARE_GROUPS, "--delete-offsets", "--group",
             group, "--topic", f"nosuch-{run_id}")
    pair.run("kafka-share-groups --describe (after delete-offsets)", SHARE_GROUPS, "--describe", "--group", group)
    pair.run("kafka-share-groups --delete-offsets (unknown group)", SHARE_GROUPS, "--delete-offsets", "--group",
             f"nosuch-{run_id}", "--topic", topic)
    _, kbroker = pair.run("kafka-share-groups --delete", SHARE_GROUPS, "--delete", "--group", gone, "--group", group)
    assert kbroker.returncode == 0, kbroker
    pair.run("kafka-share-groups --delete (again)", SHARE_GROUPS, "--delete", "--group", gone)
    pair.run("kafka-share-groups --describe (deleted group)", SHARE_GROUPS, "--describe", "--group", gone)
