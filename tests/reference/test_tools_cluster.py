"""The cluster tools against kbroker as an operator uses them: kafka-features (describe, upgrade,
downgrade and disable as dry runs, and what is refused), kafka-metadata-quorum (describe --status and
--replication: DescribeQuorum), kafka-cluster (cluster-id, list-endpoints) and
kafka-broker-api-versions. Each runs against Apache Kafka 4.4 too and the outputs are compared
(level "tools"); numbers that differ by nature (the metadata offset, clock times, epochs of the
metadata log) are masked."""

from __future__ import annotations

import pytest

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import (
    BOOTSTRAP, BROKER_API_VERSIONS, CLUSTER, FEATURES, METADATA_QUORUM, Side, ToolPair,
)

CLUSTER_ID = (r"\b[A-Za-z0-9_-]{22}\b", "<cluster-id>")


@pytest.fixture(scope="module")
def pair(kafka_reference, kbroker):
    level = Level("tools", part="cluster", prefixes=["kafka-features", "kafka-metadata-quorum", "kafka-cluster",
                                                       "kafka-broker-api-versions"])
    yield ToolPair(Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker), level)
    level.settle()


def test_features(pair):
    epoch = (r"Epoch: \d+", "Epoch: <offset>")
    _, kbroker = pair.run("kafka-features describe", FEATURES, "describe", replace=[epoch])
    assert any(line.startswith("Feature: group.version") and "FinalizedVersionLevel: 1" in line
               for line in kbroker.lines), kbroker.stdout
    for label, args in (("upgrade (the finalized level)", ["upgrade", "--feature", "group.version=1"]),
                        ("upgrade (beyond the supported)", ["upgrade", "--feature", "group.version=5"]),
                        ("upgrade (unknown feature)", ["upgrade", "--feature", "no.such.version=1"]),
                        ("downgrade (metadata.version)", ["downgrade", "--metadata", "3.9"]),
                        ("downgrade --unsafe (metadata.version)", ["downgrade", "--unsafe", "--metadata", "3.9"]),
                        ("downgrade (group.version)", ["downgrade", "--feature", "group.version=0"]),
                        ("disable (group.version)", ["disable", "--feature", "group.version"]),
                        ("downgrade (share.version)", ["downgrade", "--feature", "share.version=1"]),
                        ("disable (share.version)", ["disable", "--feature", "share.version"]),
                        ("upgrade (kraft.version)", ["upgrade", "--feature", "kraft.version=1"])):
        pair.run(f"kafka-features {label} --dry-run", FEATURES, *args, "--dry-run")
    pair.run("kafka-features upgrade (no arguments)", FEATURES, "upgrade")


def test_metadata_quorum(pair):
    masked = [(r"(HighWatermark|LogEndOffset|MaxFollowerLag(TimeMs)?|LeaderEpoch):(\s+)\d+", r"\1:\3<n>"),
              (r"\b1\d{12}\b", "<ms>"), (r"ClusterId:(\s+)\S+", r"ClusterId:\1<cluster-id>")]
    _, kbroker = pair.run("kafka-metadata-quorum describe --status", METADATA_QUORUM, "describe", "--status",
                          replace=masked)
    assert kbroker.returncode == 0 and any(line.split() == ["LeaderId:", "1"] for line in kbroker.lines), kbroker.stdout
    _, kbroker = pair.run("kafka-metadata-quorum describe --replication", METADATA_QUORUM, "describe", "--replication",
                          replace=[*masked, _replication_row])
    assert kbroker.lines[1].split()[0] == "1" and kbroker.lines[1].split()[-1] == "Leader", kbroker.stdout
    pair.run("kafka-metadata-quorum describe --replication --human-readable", METADATA_QUORUM, "describe",
             "--replication", "--human-readable", replace=[*masked, _replication_row])


def _replication_row(line: str) -> str:
    """A --replication row with its offsets and times masked: NodeId, DirectoryId, offset, lag, times, status."""
    cells = [cell.strip() for cell in line.split("\t")]
    if len(cells) >= 7 and cells[0].isdigit():
        cells[2], cells[4], cells[5] = "<offset>", "<time>", "<time>"
    return "\t".join(cells)


def test_cluster_and_api_versions(pair):
    _, kbroker = pair.run("kafka-cluster cluster-id", CLUSTER, "cluster-id", "--bootstrap-server", BOOTSTRAP,
                          replace=[CLUSTER_ID])
    assert kbroker.lines[0].startswith("Cluster ID: ")
    pair.run("kafka-cluster list-endpoints", CLUSTER, "list-endpoints", "--bootstrap-server", BOOTSTRAP,
             replace=[(r"(127\.0\.0\.1\s+)\d+", r"\1<port>")])
    pair.run("kafka-cluster (no subcommand)", CLUSTER, "--bootstrap-server", BOOTSTRAP)
    pair.run("kafka-broker-api-versions", BROKER_API_VERSIONS, replace=[(r"\(id: 1 rack: null isFenced: false\)", "")])
