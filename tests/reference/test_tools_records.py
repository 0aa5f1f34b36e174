"""The record tools against kbroker as an operator uses them: kafka-console-producer (keys, headers,
partitions) and kafka-console-consumer (every print option, offsets, groups, read_committed),
kafka-get-offsets (latest, earliest, max timestamp, by time), kafka-delete-records, kafka-log-dirs,
and the performance tools kafka-producer-perf-test and kafka-consumer-perf-test. Each runs against
Apache Kafka 4.4 too and the outputs are compared (level "tools"); the perf tools' figures differ by
nature, so their lines are compared with the numbers masked, and the record counts checked."""

from __future__ import annotations

import json
import re

import pytest

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import (
    CONSOLE_CONSUMER, CONSOLE_PRODUCER, CONSUMER_PERF, DELETE_RECORDS, GET_OFFSETS, LOG_DIRS, PRODUCER_PERF, TOPICS,
    Side, ToolPair, await_topic,
)

LINES = [f"k{i}\tv{i}" for i in range(12)]
NUMBER = (r"\b\d+(\.\d+)?\b", "N")


@pytest.fixture(scope="module")
def pair(kafka_reference, kbroker, run_id):
    level = Level("tools", part="records", prefixes=["kafka-console-", "kafka-get-offsets", "kafka-delete-records",
                                                       "kafka-log-dirs", "kafka-producer-perf-test",
                                                       "kafka-consumer-perf-test"])
    sides = (Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker))
    for side in sides:
        side.tool(TOPICS, "--create", "--topic", f"records-{run_id}", "--partitions", "3").check()
        await_topic(side.bootstrap, f"records-{run_id}")
    yield ToolPair(*sides, level, replace=[(run_id, "RUN")])
    level.settle()


def test_console_producer_and_consumer(pair, run_id):
    topic = f"records-{run_id}"
    kafka, kbroker = pair.run("kafka-console-producer (keys, headers, partition)", CONSOLE_PRODUCER, "--topic", topic,
                              "--reader-property", "parse.key=true", "--reader-property", "key.separator=\t",
                              "--reader-property", "parse.headers=true", "--reader-property", "headers.delimiter=|",
                              input="".join(f"h:x{i}|{line}\n" for i, line in enumerate(LINES)))
    assert kbroker.returncode == 0
    pair.run("kafka-console-producer (one partition)", CONSOLE_PRODUCER, "--topic", topic, "--reader-property",
             "parse.key=true", "--reader-property", "key.separator=:", "--producer-property", "acks=all",
             input="a:1\nb:2\nc:3\n")
    printed = ["--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
               "--formatter-property", "print.offset=true", "--formatter-property", "print.headers=true",
               "--formatter-property", "print.value=true", "--formatter-property", "key.separator= | "]
    kafka, kbroker = pair.run("kafka-console-consumer --from-beginning (printed fields)", CONSOLE_CONSUMER, "--topic",
                              topic, "--from-beginning", "--max-messages", "15", "--timeout-ms", "20000", *printed,
                              unordered=True)
    assert len(kbroker.lines) == 15
    pair.run("kafka-console-consumer --partition --offset", CONSOLE_CONSUMER, "--topic", topic, "--partition", "1",
             "--offset", "2", "--max-messages", "2", "--timeout-ms", "20000", *printed)
    pair.run("kafka-console-consumer --group", CONSOLE_CONSUMER, "--topic", topic, "--group", f"console-{run_id}",
             "--from-beginning", "--max-messages", "15", "--timeout-ms", "20000", unordered=True)
    pair.run("kafka-console-consumer --group (nothing left)", CONSOLE_CONSUMER, "--topic", topic, "--group",
             f"console-{run_id}", "--max-messages", "1", "--timeout-ms", "3000")
    pair.run("kafka-console-consumer --isolation-level read_committed", CONSOLE_CONSUMER, "--topic", topic,
             "--partition", "0", "--offset", "earliest", "--isolation-level", "read_committed", "--max-messages", "3",
             "--timeout-ms", "20000", "--formatter-property", "print.offset=true")
    pair.run("kafka-console-consumer (unknown partition)", CONSOLE_CONSUMER, "--topic", topic, "--partition", "9",
             "--max-messages", "1", "--timeout-ms", "3000")


def test_offsets_delete_records_and_log_dirs(pair, run_id):
    topic = f"records-{run_id}"
    _, kbroker = pair.run("kafka-get-offsets (latest)", GET_OFFSETS, "--topic", topic, unordered=True)
    # the keys place the 15 records (murmur2, the same client on both)
    assert sorted(line.rsplit(":", 2)[1] for line in kbroker.lines) == ["0", "1", "2"]
    assert sum(int(line.rsplit(":", 1)[1]) for line in kbroker.lines) == 15
    for label, time in (("earliest", "-2"), ("max timestamp", "-3"), ("earliest local", "-4"),
                        ("latest tiered", "-5"), ("by time, far future", "9999999999999"), ("by time, zero", "0")):
        # the max timestamp's offset depends on when each record was produced: its offset is masked
        pair.run(f"kafka-get-offsets ({label})", GET_OFFSETS, "--topic", topic, "--time", time, unordered=True,
                 replace=[(r":\d+$", ":<offset>")] if time == "-3" else [])
    pair.run("kafka-get-offsets --topic-partitions", GET_OFFSETS, "--topic-partitions", f"{topic}:0,{topic}:2")
    pair.run("kafka-get-offsets (unknown topic)", GET_OFFSETS, "--topic", f"nosuch-{run_id}")
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 2},
                                          {"topic": topic, "partition": 1, "offset": -1}]}
    path = f"/tmp/kbroker-delete-records-{run_id}.json"
    with open(path, "w") as fh:
        json.dump(plan, fh)
    _, kbroker = pair.run("kafka-delete-records", DELETE_RECORDS, "--offset-json-file", path)
    assert "partition: " + topic + "-0\tlow_watermark: 2" in kbroker.stdout
    pair.run("kafka-get-offsets (earliest, after delete-records)", GET_OFFSETS, "--topic", topic, "--time", "-2")
    with open(path, "w") as fh:
        json.dump({"version": 1, "partitions": [{"topic": topic, "partition": 2, "offset": 99}]}, fh)
    pair.run("kafka-delete-records (beyond the end)", DELETE_RECORDS, "--offset-json-file", path)
    _, kbroker = pair.run("kafka-log-dirs --describe", LOG_DIRS, "--describe", "--topic-list", topic,
                          replace=[_log_dirs_in_order, (r'"size":\d+', '"size":N')])
    described = json.loads(kbroker.lines[-1])
    assert sorted(p["partition"] for p in described["brokers"][0]["logDirs"][0]["partitions"]) == \
        [f"{topic}-{i}" for i in range(3)]
    pair.run("kafka-log-dirs --describe --broker-list", LOG_DIRS, "--describe", "--broker-list", "1", "--topic-list",
             f"nosuch-{run_id}")


def _log_dirs_in_order(line: str) -> str:
    """kafka-log-dirs' JSON with each directory's partitions sorted (both brokers list them in hash order)."""
    if not line.startswith('{"brokers"'):
        return line
    described = json.loads(line)
    for broker in described["brokers"]:
        for log_dir in broker["logDirs"]:
            log_dir["partitions"].sort(key=lambda p: p["partition"])
    return json.dumps(described, separators=(",", ":"))


def test_performance_tools(pair, run_id):
    topic = f"perf-{run_id}"
    for side in pair.sides:
        side.tool(TOPICS, "--create", "--topic", topic, "--partitions", "2").check()
        await_topic(side.bootstrap, topic)
    kafka, kbroker = pair.run("kafka-producer-perf-test", PRODUCER_PERF, "--topic", topic, "--num-records", "2000",
                              "--record-size", "100", "--throughput", "-1", "--producer-props", "acks=all",
                              "linger.ms=5", replace=[NUMBER])
    assert re.search(r"^2000 records sent", kbroker.stdout, re.MULTILINE), kbroker.stdout
    kafka, kbroker = pair.run("kafka-consumer-perf-test", CONSUMER_PERF, "--topic", topic, "--messages", "2000",
                              "--timeout", "30000", replace=[NUMBER, (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d+", "<time>")])
    header, row = kbroker.lines[-2], kbroker.lines[-1]
    assert header.startswith("start.time, end.time, data.consumed.in.MB") and row.split(", ")[4] == "2000", \
        kbroker.stdout
