"""The cluster failover scenarios (issue 41) with more clients than confluent-kafka (test_cluster_failover.py):
the Java client 4.4 (tests/clients/java/Failover.java), franz-go and sarama (failover.go in
tests/clients/franz and tests/clients/sarama), kafkajs (tests/clients/kafkajs/failover.js), kafka-python
and aiokafka (tests/clients/failover/), each an idempotent producer and a committing consumer
group on an RF=3 topic of `kbroker serve --nodes 3` while a leader moves, the node leading a partition and
coordinating the group stops and starts, and every leader shuffles (tests/integration/cluster_scenarios.py):
no acknowledged record lost or duplicated, every record consumed, committed offsets kept; the recovery time
and the errors each client saw are printed (docs/cluster.md's table), never asserted.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kbroker.tests.integration.cluster_scenarios import (
    SCENARIOS,
    KbrokerTarget,
    ProgramWorkload,
    run,
    start_cluster,
)

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ("java", "franz-go", "sarama", "kafkajs", "kafka-python", "aiokafka")


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    broker, controls, port = start_cluster(tmp_path_factory.mktemp("cluster-clients"))
    try:
        yield KbrokerTarget(controls, port)
    finally:
        broker.stop()


def workload_factory(client: str, logs: Path):
    """A function (bootstrap, topic, group) -> ProgramWorkload for `client`; skips when it cannot run here."""
    if client == "java":
        from kbroker.tests.reference.client_matrix import java_classes
        from kbroker.tests.reference.kafka import java_command, require_kafka_libs

        libs = require_kafka_libs()
        classes = java_classes(libs)
        log4j = logs / "log4j2-java-client.properties"
        log4j.write_text("status = error\nappender.err.type = Console\nappender.err.name = err\n"
                         "appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n"
                         "appender.err.layout.pattern = %p %m (%c)%n\nrootLogger.level = WARN\n"
                         "rootLogger.appenderRef.err.ref = err\n")
        base = java_command("Failover", heap="256m", log4j=log4j)
        cp = base.index("-cp") + 1
        base[cp] = f"{classes}:{base[cp]}"

        def command(*args: str) -> list[str]:
            return [*base, *args]
    elif client in ("franz-go", "sarama"):
        from kbroker.tests.reference.client_matrix import go_binary, require_go

        require_go()
        binary = go_binary("franz" if client == "franz-go" else "sarama")

        def command(*args: str) -> list[str]:
            return [str(binary), "failover", *args]
    elif client == "kafkajs":
        node, module = shutil.which("node"), ROOT / "tests" / "clients" / "kafkajs"
        if node is None or not (module / "node_modules" / "kafkajs").is_dir():
            pytest.skip("kafkajs is not installed: run `make kafkajs`")

        def command(*args: str) -> list[str]:
            return [str(node), str(module / "failover.js"), *args]
    else:
        script = ROOT / "tests" / "clients" / "failover" / ("kafka_python.py" if client == "kafka-python"
                                                            else "aiokafka_client.py")

        def command(*args: str) -> list[str]:
            return [sys.executable, str(script), *args]

    def make(bootstrap: str, topic: str, group: str) -> ProgramWorkload:
        return ProgramWorkload(client, command(bootstrap, topic, group), logs / f"{client}-{topic}.log")

    return make


# kafkajs 2.2.4's defect (docs/cluster.md): a send() retried after NOT_LEADER_OR_FOLLOWER re-sends only to the
# brokers without a response yet (producer/sendMessages.js, responsePerBroker keyed by broker), so when the moved
# partition's new leader already answered for another partition of that send, its messages are never sent again
# and send() resolves: acknowledged records lost, their sequence numbers reused by the next batch.
KAFKAJS_LOSES_ON_MOVES = pytest.mark.xfail(
    reason="kafkajs 2.2.4 does not re-send a moved partition's batch to a broker that already answered the send",
    strict=False)


def _cases():
    for client in CLIENTS:
        for scenario in SCENARIOS:
            # a node's stop moves leaders too: kafkajs loses records there as well, on Kafka 4.4 alike
            marks = [KAFKAJS_LOSES_ON_MOVES] if client == "kafkajs" else []
            yield pytest.param(client, scenario, marks=marks, id=f"{client}-{scenario}")


def check_joined_knowing_the_topic(client: str, logs: Path) -> None:
    """kafka-python's workload joins once it knows the topic's partitions (tests/clients/failover/kafka_python.py):
    a join before them assigns nothing (its range assignor warns) and risks kafka-python 3.0.12 never finishing
    the rejoin that follows (docs/cluster.md). Without the wait 17 of 20 runs joined that early."""
    if client == "kafka-python":
        for log in logs.glob("kafka-python-*.log"):
            assert "No partition metadata for topic" not in log.read_text(errors="replace"), log


@pytest.mark.parametrize(("client", "scenario"), list(_cases()))
def test_clients_ride_through(target, client, scenario, tmp_path, capsys) -> None:
    run(target, workload_factory(client, tmp_path), scenario, capsys)
    check_joined_knowing_the_topic(client, tmp_path)
