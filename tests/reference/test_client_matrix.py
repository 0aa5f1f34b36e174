"""The client matrix: the Java client and Kafka Streams 4.4, franz-go and sarama each run the same scenarios
against Apache Kafka 4.4 (`kafka_reference`) and kbroker, and everything they observe must be equal, except
the differences listed with their reasons in tests/reference/differences/clients.toml (docs/clients.md).
Writes build/differential/clients.json. The harness is tests/reference/client_matrix.py."""

from __future__ import annotations

import json
import shutil

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.reference import client_matrix as cm
from kbroker.tests.reference.kafka import kafka_libs

JAVA_SCENARIOS = [
    "producer-idempotent", "producer-transactional",
    "classic-range", "classic-roundrobin", "classic-sticky", "classic-cooperative-sticky",
    "consumer-uniform", "consumer-range", "regex-classic", "regex-consumer", "admin", "streams-wordcount",
    "streams-protocol",
]
FRANZ_SCENARIOS = [
    "producer-idempotent", "producer-transactional",
    "classic-range", "classic-roundrobin", "classic-sticky", "classic-cooperative-sticky",
    "consumer-uniform", "consumer-range", "regex-classic", "admin",
]
SARAMA_SCENARIOS = ["producer-idempotent", "classic-range", "classic-roundrobin", "classic-sticky", "admin"]

# What each scenario promises, whichever broker it runs on: KEY (the last part of a check) -> value. Held
# on Apache Kafka always (else the scenario, not kbroker, is wrong), on kbroker unless the check is listed.
PROMISES = {
    "acked_offsets_contiguous": True, "read_back_in_send_order": True,
    "read_committed_is_exactly_the_committed": True, "read_uncommitted_aborted": 5, "group_lag": 0,
    "records_consumed": 60, "duplicates": 0, "lag": 0, "described_members": 2,
    "output_is_the_counts": True, "store_is_the_counts": True, "group_lag_on_input": 0,
    "one_instance_output_is_the_counts": True, "three_instances_output_is_the_counts": True,
    "one_instance_tasks": 4, "three_instances_tasks": [1, 1, 2],
}


@pytest.fixture(scope="module")
def matrix():
    m = cm.Matrix()
    yield m
    if m.kafka:
        m.write(cm.listed_differences())


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("client-matrix") / "data",
                           "--group-initial-rebalance-delay-ms", "0")
    yield broker
    broker.stop()


def run_and_compare(matrix: cm.Matrix, client: str, command: list[str], scenarios: list[str], kafka, kbroker,
                    logs) -> None:
    results = matrix.run(client, command, scenarios, {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}, logs)
    errors = {f"{label}: {scenario}": result["error"] for label, per in results.items()
              for scenario, result in per.items() if "error" in result}
    assert not errors, "\n\n".join(f"{where}\n{error[-2500:]}" for where, error in errors.items())
    listed = {k: v for k, v in cm.listed_differences().items() if k.startswith(client + "/")}
    broken = []
    for label, observed in (("kafka", matrix.kafka), ("kbroker", matrix.kbroker)):
        for check, value in observed.items():
            key = check.rsplit("/", 1)[1]
            if check.startswith(client + "/") and key in PROMISES and value != PROMISES[key]:
                if label == "kafka" or check not in listed:
                    broken.append(f"{label}: {check} = {value!r}, the scenario promises {PROMISES[key]!r}")
    assert not broken, "\n".join(broken)
    differences = matrix.differences(client)
    unlisted = {k: v for k, v in differences.items() if k not in listed}
    gone = sorted(set(listed) - set(differences))
    assert not unlisted and not gone, (
        "differences not listed in clients.toml (Kafka, kbroker):\n"
        + "\n".join(f"  {k}: {json.dumps(a)} | {json.dumps(b)}" for k, (a, b) in unlisted.items())
        + "\nlisted but not seen: " + ", ".join(gone))


@pytest.mark.timeout(1200)
def test_java_client_and_streams(matrix, kafka_reference, kbroker, tmp_path):
    libs = kafka_libs()
    assert libs is not None  # kafka_reference skipped or failed otherwise
    if shutil.which("javac") is None:
        pytest.skip("javac is missing (a JDK: Java 17 or later)")
    classes = cm.java_classes(libs)
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(cm.LOG4J_STDERR)
    java = shutil.which("java") or "java"
    command = [java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{classes}:{libs}/*", "Matrix"]
    run_and_compare(matrix, "java", command, JAVA_SCENARIOS, kafka_reference, kbroker, tmp_path)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("client,scenarios", [("franz", FRANZ_SCENARIOS), ("sarama", SARAMA_SCENARIOS)])
def test_go_client(matrix, kafka_reference, kbroker, tmp_path, client, scenarios):
    cm.require_go()
    binary = cm.go_binary(client)
    run_and_compare(matrix, client, [str(binary), "matrix"], scenarios, kafka_reference, kbroker, tmp_path)


def test_listed_differences_are_well_formed():
    listed = cm.listed_differences()
    clients = {"java", "franz", "sarama"}
    for check, item in listed.items():
        client, scenario, key = check.split("/", 2)
        assert client in clients, check
        assert scenario in {"java": JAVA_SCENARIOS, "franz": FRANZ_SCENARIOS, "sarama": SARAMA_SCENARIOS}[client], check
        assert item.issue.isdigit(), check
