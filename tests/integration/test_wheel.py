"""The package as users get it: `pip install .` (what the Docker image does) must give a broker that
starts, with every runtime module in the wheel and no tests, tools or benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
import uuid
import zipfile

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.dockerfile import ROOT

RUNTIME_TREES = ("broker", "protocol", "coordinator", "purgatory", "pipeline", "admin")
# Data a runtime module reads, outside Kafka's verbatim definitions (protocol/schema/): the Kafka
# releases' ApiVersions tables that protocol/kafka_releases.py loads when the broker starts.
RUNTIME_DATA = {"protocol/kafka_releases.json"}


def _source_files() -> set[str]:
    out = {"kbroker/__init__.py", "kbroker/__main__.py"}
    for top in RUNTIME_TREES:
        for path in (ROOT / top).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            rel = path.relative_to(ROOT).as_posix()
            if path.suffix == ".py" or rel.startswith("protocol/schema/") or rel in RUNTIME_DATA:
                out.add("kbroker/" + rel)
    return out


def test_the_wheel_holds_exactly_the_runtime_tree(docker_wheel) -> None:
    names = {n for n in zipfile.ZipFile(docker_wheel.path).namelist() if ".dist-info/" not in n}
    expected = _source_files()
    assert sorted(expected - names) == [], "missing from the wheel"
    assert sorted(names - expected) == [], "in the wheel but not part of the runtime tree"
    assert "kbroker/broker/apis/metadata.py" in names  # the package the hand-written list forgot
    assert not any(n.startswith(("kbroker/tests/", "kbroker/tools/", "kbroker/bench/")) for n in names)


def test_building_gives_no_setuptools_warnings(docker_wheel) -> None:
    output = docker_wheel.build_output
    for marker in ("Warning:", "Warning ", "absent from", "deprecated"):
        assert marker not in output, [line for line in output.splitlines() if marker in line][:5]


@pytest.mark.timeout(300)
def test_installed_wheel_serves_produces_and_consumes(wheel_venv, tmp_path) -> None:
    from confluent_kafka import Consumer, Producer

    kbroker = str(wheel_venv / "bin" / "kbroker")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("KBROKER_")}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = subprocess.run([kbroker, "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert (out.returncode, out.stdout.strip()) == (0, f"kbroker {version}")
    # The installed copy is used, not this checkout, and it carries no test or tool code.
    where = subprocess.run([str(wheel_venv / "bin" / "python"), "-c",
                            "import importlib.util as u, kbroker.broker.apis.metadata as m; print(m.__file__); "
                            "print(u.find_spec('kbroker.tests'), u.find_spec('kbroker.tools'))"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    path, missing = where.stdout.splitlines()
    assert path.startswith(str(wheel_venv)) and missing == "None None"

    with BrokerProcess(tmp_path / "data", kbroker=[kbroker]) as broker:
        topic = f"wheel-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for i in range(100):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wheel",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
        consumer.close()
        assert got == [b"v%d" % i for i in range(100)]
        assert broker.events("broker_started")
