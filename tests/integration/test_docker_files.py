"""docker/: no Docker engine runs here, so parse the files, check them against the broker, and run the
health-check command against a broker this test started."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbroker.broker.config import BrokerConfig, load_config
from kbroker.tests.integration.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    text = (DOCKER / "Dockerfile").read_text()
    joined = text.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def _env(instructions) -> dict[str, str]:
    env = {}
    for word, args in instructions:
        if word == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def test_dockerfile_shape() -> None:
    ins = _dockerfile()
    words = [w for w, _ in ins]
    assert ins[0] == ("FROM", "python:3.11-slim")
    users = [a for w, a in ins if w == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("EXPOSE", "9092") in ins
    assert ("VOLUME", "/data") in ins
    assert words.index("USER") > words.index("RUN")  # installs as root, runs as the service user
    for word, args in ins:
        if word == "COPY":
            for src in shlex.split(args)[:-1]:
                assert (ROOT / src).exists(), f"COPY source {src} missing"


def test_dockerfile_environment_is_valid_broker_configuration() -> None:
    env = _env(_dockerfile())
    assert env["KBROKER_DATA_DIR"] == "/data"
    known = {"KBROKER_" + f.name.upper() for f in dataclasses.fields(BrokerConfig)}
    for key in env:
        if key.startswith("KBROKER_"):
            assert key in known, key
    cfg = load_config({}, None, env=env)
    assert cfg.listen_address == ("0.0.0.0", 9092)


def _healthcheck_command() -> list[str]:
    args = next(a for w, a in _dockerfile() if w == "HEALTHCHECK")
    cmd = args.split(" CMD ", 1)[1]
    return json.loads(cmd)


def test_compose_file_matches_the_image() -> None:
    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    svc = compose["services"]["kbroker"]
    assert svc["build"]["dockerfile"] == "docker/Dockerfile"
    assert (DOCKER / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve().exists()
    assert "9092:9092" in svc["ports"]
    assert svc["healthcheck"]["test"] == ["CMD", *_healthcheck_command()]
    load_config({}, None, env={k: str(v) for k, v in svc["environment"].items()})
    assert any(v.endswith(":/data") for v in svc["volumes"])


@pytest.mark.timeout(120)
def test_health_check_command_against_a_running_broker(tmp_path) -> None:
    cmd = _healthcheck_command()
    assert cmd[:2] == ["kbroker", "probe"]
    with BrokerProcess(tmp_path / "data") as broker:
        # Inside the container the broker listens on 9092; here on a free port.
        argv = [sys.executable, "-m", "kbroker", *cmd[1:-1], broker.bootstrap]
        assert subprocess.run(argv, capture_output=True).returncode == 0
    assert subprocess.run(argv, capture_output=True).returncode == 1  # and it fails once the broker is gone


@pytest.mark.timeout(300)
def test_the_files_the_dockerfile_copies_build_the_package(tmp_path) -> None:
    """The image's `pip install .` step, run here on exactly what its COPY lines bring in."""
    context = tmp_path / "context"
    context.mkdir()
    import shutil

    for word, args in _dockerfile():
        if word != "COPY":
            continue
        *sources, dest = shlex.split(args)
        for src in sources:
            target = context / (dest if dest.rstrip("/") not in (".", "./") else Path(src).name)
            if (ROOT / src).is_dir():
                shutil.copytree(ROOT / src, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / src, target)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path / "wheel"), str(context)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    import zipfile

    (wheel,) = (tmp_path / "wheel").glob("kbroker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("kbroker/broker/app.py", "kbroker/protocol/messages/join_group_request.py",
                   "kbroker/protocol/schema/clients/JoinGroupRequest.json", "kbroker/coordinator/actor.py",
                   "kbroker/purgatory/timing_wheel.py", "kbroker/pipeline/job.py"):
        assert module in names, module
    assert not any(n.startswith(("kbroker/tests/", "kbroker/bench/")) for n in names)
