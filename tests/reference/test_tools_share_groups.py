"""kafka-share-groups.sh (Kafka 4.4's ShareGroupCommand) against kbroker: --list and --describe (offsets,
members, state) of a share group that confluent-kafka's ShareConsumer made and read from. kbroker only:
the comparison with Kafka 4.4's own output (tests/reference/differential's "tools" level) is not made
yet (docs/share-groups.md)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.tests.reference.tool_runner import run_tool

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer", allow_module_level=True)

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def test_share_groups_tool_lists_and_describes_a_share_group(kbroker):
    topic, group = f"share-tool-{uuid.uuid4().hex[:6]}", f"share-tool-g-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": kbroker.bootstrap})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group,
                                              "client.id": "share-tool"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the share-partition starts at the log end (latest): nothing to read
            consumer.poll(0.5)
            out = run_tool(SHARE_GROUPS, "--bootstrap-server", kbroker.bootstrap, "--describe", "--group", group)
            if f"{group} {topic} 0 3 0" in " ".join(out.stdout.split()):
                break
        assert out.returncode == 0 and f"{group} {topic} 0 3 0" in " ".join(out.stdout.split()), out
        assert out.stdout.split()[:5] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        listed = run_tool(SHARE_GROUPS, "--bootstrap-server", kbroker.bootstrap, "--list")
        assert listed.returncode == 0 and group in listed.stdout.split(), listed
        members = run_tool(SHARE_GROUPS, "--bootstrap-server", kbroker.bootstrap, "--describe", "--group", group,
                           "--members")
        row = next(line.split() for line in members.stdout.splitlines() if line.startswith(group))
        assert row[2:] == ["/127.0.0.1", "share-tool", "1", f"{topic}:0"], members.stdout
        state = run_tool(SHARE_GROUPS, "--bootstrap-server", kbroker.bootstrap, "--describe", "--group", group,
                         "--state")
        row = next(line.split() for line in state.stdout.splitlines() if line.startswith(group))
        assert row[-2:] == ["Stable", "1"], state.stdout
    finally:
        consumer.close()
    missing = f"nosuch-{uuid.uuid4().hex[:6]}"
    unknown = run_tool(SHARE_GROUPS, "--bootstrap-server", kbroker.bootstrap, "--describe", "--group", missing)
    assert f"GroupIdNotFoundException: Share group {missing} not found." in unknown.stdout, unknown
