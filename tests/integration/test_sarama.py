"""sarama 1.22 (Debian's golang-github-shopify-sarama-dev): a consumer group consumes, commits with
OffsetCommit v1 (1.22 always sends v1), and resumes from its commits after a broker restart.

The Go program (tests/clients/sarama/main.go) is built here, offline, against Debian's
/usr/share/gocode; `make system-deps` installs golang-go and the sarama package."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

SOURCE = Path(__file__).resolve().parent.parent / "clients" / "sarama" / "main.go"
GOPATH = Path("/usr/share/gocode")
SARAMA = GOPATH / "src" / "github.com" / "Shopify" / "sarama"


@pytest.fixture(scope="module")
def sarama_client(tmp_path_factory) -> Path:
    if shutil.which("go") is None or not SARAMA.is_dir():
        pytest.skip("golang-go and golang-github-shopify-sarama-dev are not installed (make system-deps)")
    out = tmp_path_factory.mktemp("sarama") / "sarama-client"
    env = dict(os.environ, GO111MODULE="off", GOPATH=str(GOPATH), GOFLAGS="", GOPROXY="off",
               GOCACHE=str(out.parent / "gocache"))
    subprocess.run(["go", "build", "-o", str(out), str(SOURCE)], cwd=SOURCE.parent, env=env, check=True,
                   timeout=600, capture_output=True)
    return out


def run(client: Path, *args: str) -> list[tuple[int, int, str]]:
    r = subprocess.run([str(client), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = []
    for line in r.stdout.splitlines():
        partition, offset, value = line.split(" ", 2)
        rows.append((int(partition), int(offset), value))
    return rows


def test_sarama_group_commits_and_resumes_after_restart(tmp_path, sarama_client):
    with BrokerProcess(tmp_path / "data", "--num-partitions", "2") as broker:
        run(sarama_client, "produce", broker.bootstrap, "sarama-topic", "20", "m")
        first = run(sarama_client, "consume", broker.bootstrap, "sarama-topic", "sarama-group", "12")
        assert len(first) == 12
        broker.restart()
        second = run(sarama_client, "consume", broker.bootstrap, "sarama-topic", "sarama-group", "8")
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
