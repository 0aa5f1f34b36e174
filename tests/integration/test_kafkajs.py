"""kafkajs (npm, tests/clients/kafkajs, installed by `make test`): a consumer group that commits and
resumes, and the admin calls fetchOffsets, deleteTopicRecords and describeGroups."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

CLIENT_DIR = Path(__file__).resolve().parent.parent / "clients" / "kafkajs"


@pytest.fixture(scope="module")
def node() -> str:
    path = shutil.which("node")
    if path is None or not (CLIENT_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.skip("node or kafkajs is missing (make kafkajs installs it)")
    return path


def run(node: str, *args: str):
    r = subprocess.run([node, "run.js", *args], cwd=CLIENT_DIR, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "KAFKAJS_NO_PARTITIONER_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_kafkajs_group_commits_resumes_and_admin_calls(tmp_path, node):
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as broker:
        run(node, "produce", broker.bootstrap, "kjs-topic", "10")
        first = run(node, "consume", broker.bootstrap, "kjs-topic", "kjs-group", "6")
        assert [m["value"] for m in first] == [f"v-{i}" for i in range(6)]
        broker.restart()
        second = run(node, "consume", broker.bootstrap, "kjs-topic", "kjs-group", "4")
        assert [m["value"] for m in second] == [f"v-{i}" for i in range(6, 10)]

        result = run(node, "admin", broker.bootstrap, "kjs-topic", "kjs-group", "4")
        assert result["offsets"] == [{"topic": "kjs-topic",
                                      "partitions": [{"partition": 0, "offset": "10", "metadata": None}]}]
        (group,) = result["groups"]["groups"]
        assert (group["groupId"], group["errorCode"], group["state"], group["protocolType"]) == (
            "kjs-group", 0, "Empty", "consumer")
        (earliest,) = result["earliest"]
        assert (earliest["low"], earliest["high"]) == ("4", "10")
        assert not broker.events("request_rejected")
