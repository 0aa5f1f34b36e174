"""sarama (IBM/sarama, a Go module in tests/clients/sarama built with Go 1.26) at the oldest protocol
versions it lets a consumer group use (SARAMA_VERSION 0.10.2.0: Produce v2 with message format v1, JoinGroup
v1, SyncGroup/Heartbeat/LeaveGroup v0, OffsetCommit v2): a group consumes, commits and resumes from its
commits after a broker restart. And OffsetCommit v1 (Kafka 0.8.2's protocol, which sarama 1.22 always sent
and Kafka 4 removed), committed outside any generation and read back with OffsetFetch v1. The client
matrix (tests/reference/test_client_matrix.py) runs sarama at its default version against Kafka too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.reference.client_matrix import go_binary, require_go


@pytest.fixture(scope="module")
def sarama_client() -> Path:
    require_go()
    return go_binary("sarama")


def run(client: Path, *args: str) -> str:
    r = subprocess.run([str(client), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def rows(out: str) -> list[tuple[int, int, str]]:
    parsed = []
    for line in out.splitlines():
        partition, offset, value = line.split(" ", 2)
        parsed.append((int(partition), int(offset), value))
    return parsed


def test_sarama_group_commits_and_resumes_after_restart(tmp_path, sarama_client):
    with BrokerProcess(tmp_path / "data", "--num-partitions", "2") as broker:
        run(sarama_client, "produce", broker.bootstrap, "sarama-topic", "20", "m")
        first = rows(run(sarama_client, "consume", broker.bootstrap, "sarama-topic", "sarama-group", "12"))
        assert len(first) == 12
        broker.restart()
        second = rows(run(sarama_client, "consume", broker.bootstrap, "sarama-topic", "sarama-group", "8"))
        values = [v for _, _, v in first + second]
        # every message once: the second run starts where the first one's commits left off
        assert sorted(values) == sorted(f"m-{i}" for i in range(20))
        assert not broker.events("request_rejected")
        # per partition, the second run continues at the offset after the first run's last one
        for partition in (0, 1):
            seen_first = [o for p, o, _ in first if p == partition]
            seen_second = [o for p, o, _ in second if p == partition]
            if seen_first and seen_second:
                assert seen_second[0] == seen_first[-1] + 1


def test_sarama_offset_commit_v1_outside_a_generation(tmp_path, sarama_client):
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as broker:
        run(sarama_client, "produce", broker.bootstrap, "v1-topic", "5", "m")
        # "v<OffsetFetch version> <offset> <metadata> <error code>"
        out = run(sarama_client, "commit-v1", broker.bootstrap, "v1-topic", "v1-group", "3")
        assert out.split() == ["v1", "3", "v1", "0"]
        assert not broker.events("request_rejected")
