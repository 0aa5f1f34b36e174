"""The reference broker itself: Apache Kafka 4.4.0 starts from the jars `make kafka-jars` resolved, answers a
real client, and stops; the differential tests build on this."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_kafka_reference_produces_and_consumes(kafka_reference):
    topic = f"ref-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_reference.bootstrap})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_reference.bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_reference.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    try:
        for _ in range(120):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value())
            if len(seen) == 10:
                break
    finally:
        consumer.close()
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(10))
    metadata = admin.list_topics(timeout=10)
    assert list(metadata.brokers) == [1]
    assert kafka_reference.java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                                kafka_reference.bootstrap, "--list").stdout.split().count(topic) == 1


def test_tool_server_answers_as_a_fresh_jvm(kafka_reference):
    """The reference tests run Kafka's tools in one JVM (kafka.py ToolServer): what a tool prints and its
    exit code are those of a fresh JVM, as bin/kafka-*.sh starts one, for a success, a failure caught by
    the tool, usage errors (one ends in System.exit), and input on stdin."""
    import re

    from kbroker.tests.reference.tool_runner import run_tool

    topic = f"fidelity-{uuid.uuid4().hex[:8]}"
    bootstrap = ["--bootstrap-server", kafka_reference.bootstrap]
    assert run_tool("org.apache.kafka.tools.TopicCommand", *bootstrap, "--create", "--topic", topic).returncode == 0
    runs = [  # (tool, arguments, stdin); {new} is a topic of its own for each of the two runs
        ("org.apache.kafka.tools.TopicCommand", [*bootstrap, "--create", "--topic", "{new}"], None),
        ("org.apache.kafka.tools.TopicCommand", [*bootstrap, "--create", "--topic", topic], None),
        ("org.apache.kafka.tools.TopicCommand", [*bootstrap, "--describe", "--topic", f"{topic}-missing"], None),
        ("org.apache.kafka.tools.TopicCommand", [*bootstrap, "--no-such-option"], None),
        ("org.apache.kafka.tools.ClusterTool", ["cluster-id", *bootstrap, "--no-such-option"], None),
        ("org.apache.kafka.tools.ConsoleProducer", [*bootstrap, "--topic", topic], "a\nb\n"),
    ]

    def seen(out, new: str):  # log times, the stack frames below a tool's main() and the new topic's name
        err = re.sub(r"^\[[^\]]+\] ", "", out.stderr, flags=re.MULTILINE)
        err = re.sub(r"^\s+at (?!org\.apache\.kafka|joptsimple|net\.sourceforge).*\n", "", err, flags=re.MULTILINE)
        return out.returncode, out.stdout.replace(new, "{new}"), err.replace(new, "{new}")

    for main, args, stdin in runs:
        outcomes = []
        for fresh_jvm in (False, True):
            new = f"{topic}-{'fresh' if fresh_jvm else 'server'}"
            out = run_tool(main, *(arg.replace("{new}", new) for arg in args), input=stdin, fresh_jvm=fresh_jvm)
            outcomes.append(seen(out, new))
        assert outcomes[0] == outcomes[1], (main, args)
    # each producer run wrote its two records
    assert run_tool("org.apache.kafka.tools.GetOffsetShell", *bootstrap, "--topic", topic).stdout == f"{topic}:0:4\n"
