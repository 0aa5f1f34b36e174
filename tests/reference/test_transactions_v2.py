"""Transactions v2 (KIP-890 part 2) with real clients: the Java producer 4.4 and franz-go run the client
matrix's transactional scenario (consume-transform-produce with offsets in the transaction, an aborted
and a committed transaction, then a zombie fenced by a successor) against Apache Kafka 4.4 and kbroker
at once. Both must observe the same, and kbroker's request counters (/metrics, per API and version)
must show that the clients spoke transactions v2 to it: EndTxn v5, Produce v12+, TxnOffsetCommit v5+,
and no AddPartitionsToTxn nor AddOffsetsToTxn (the partitions are added by the broker)."""

from __future__ import annotations

import shutil
import urllib.request

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.reference import client_matrix as cm
from kbroker.tests.reference.kafka import kafka_libs

SCENARIO = "producer-transactional"
# What a fenced zombie hears from Kafka 4.4 under transactions v2 (its Produce is refused)
ZOMBIE = {"java": "InvalidProducerEpochException", "franz": "INVALID_PRODUCER_EPOCH"}


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    port = free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("txn-v2") / "data", "--group-initial-rebalance-delay-ms", "0",
                           "--metrics-listen", f"127.0.0.1:{port}")
    broker.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield broker
    broker.stop()


def requests_by_version(broker) -> dict[tuple[str, int], float]:
    """kbroker_requests_total{api, version} from the broker's /metrics."""
    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    out: dict[tuple[str, int], float] = {}
    for line in text.splitlines():
        if line.startswith("kbroker_requests_total{"):
            labels, value = line[len("kbroker_requests_total{"):].split("} ")
            fields = dict(part.split("=", 1) for part in labels.split(","))
            out[(fields["api"].strip('"'), int(fields["version"].strip('"')))] = float(value)
    return out


def versions_of(counts: dict[tuple[str, int], float], api: str) -> set[int]:
    return {version for (name, version), n in counts.items() if name == api and n > 0}


def run_on_both(client: str, command: list[str], kafka_reference, kbroker, tmp_path) -> dict[str, object]:
    matrix = cm.Matrix()
    before = requests_by_version(kbroker)
    results = matrix.run(client, command, [SCENARIO], {"kafka": kafka_reference.bootstrap,
                                                       "kbroker": kbroker.bootstrap}, tmp_path)
    errors = {label: per[SCENARIO]["error"] for label, per in results.items() if "error" in per[SCENARIO]}
    assert not errors, "\n\n".join(f"{label}\n{error[-2500:]}" for label, error in errors.items())
    assert matrix.differences(client) == {}, "Kafka 4.4 and kbroker differ (Kafka, kbroker)"
    observed = {key.rsplit("/", 1)[1]: value for key, value in matrix.kbroker.items()}
    assert observed["read_committed_is_exactly_the_committed"] is True
    assert observed["read_uncommitted_aborted"] == 5
    assert observed["zombie_producer"] == ZOMBIE[client]
    after = requests_by_version(kbroker)
    return {"counts": {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}}


def assert_spoke_transactions_v2(counts: dict[tuple[str, int], float]) -> None:
    assert versions_of(counts, "EndTxn") == {5}, counts
    assert versions_of(counts, "TxnOffsetCommit") and min(versions_of(counts, "TxnOffsetCommit")) >= 5, counts
    assert versions_of(counts, "Produce") and min(versions_of(counts, "Produce")) >= 12, counts
    assert not versions_of(counts, "AddPartitionsToTxn") and not versions_of(counts, "AddOffsetsToTxn"), counts


@pytest.mark.timeout(900)
def test_java_producer_uses_transactions_v2(kafka_reference, kbroker, tmp_path):
    libs = kafka_libs()
    assert libs is not None  # kafka_reference skipped or failed otherwise
    if shutil.which("javac") is None:
        pytest.skip("javac is missing (a JDK: Java 17 or later)")
    classes = cm.java_classes(libs)
    java = shutil.which("java") or "java"
    command = [java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-cp", f"{classes}:{libs}/*", "Matrix"]
    assert_spoke_transactions_v2(run_on_both("java", command, kafka_reference, kbroker, tmp_path)["counts"])


@pytest.mark.timeout(900)
def test_franz_go_uses_transactions_v2(kafka_reference, kbroker, tmp_path):
    cm.require_go()
    command = [str(cm.go_binary("franz")), "matrix"]
    assert_spoke_transactions_v2(run_on_both("franz", command, kafka_reference, kbroker, tmp_path)["counts"])
