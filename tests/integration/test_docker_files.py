"""docker/: no Docker engine runs here, so parse the files, check them against the broker, start a
broker with exactly a compose service's environment, and run the health-check command against it.
(The image's wheel is built from exactly what the Dockerfile copies in test_wheel.py.)"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
import yaml

from kbroker.broker.config import BrokerConfig, load_config
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.dockerfile import (
    DOCKER,
    ROOT,
    as_test_environment,
    container_env,
    env,
    healthcheck_command,
    instructions,
)
from kbroker.tests.integration.wire import Wire


def test_dockerfile_shape() -> None:
    ins = instructions()
    words = [w for w, _ in ins]
    assert ins[0] == ("FROM", "python:3.11-slim")
    users = [a for w, a in ins if w == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("EXPOSE", "9092") in ins
    assert ("VOLUME", "/data") in ins
    assert words.index("USER") > words.index("RUN")  # installs as root, runs as the service user
    run = next(a for w, a in ins if w == "RUN")
    assert "pip install --no-cache-dir /tmp/wheels/kbroker-*.whl" in run  # the wheel, not the source tree
    for word, args in ins:
        if word == "COPY":
            for src in args.split()[:-1]:
                assert (ROOT / src).exists(), f"COPY source {src} missing"


def test_dockerfile_environment_is_valid_broker_configuration() -> None:
    image_env = env()
    assert image_env["KBROKER_DATA_DIR"] == "/data"
    known = {"KBROKER_" + f.name.upper() for f in dataclasses.fields(BrokerConfig)}
    for key in image_env:
        if key.startswith("KBROKER_"):
            assert key in known, key
    listeners = load_config({}, None, env=image_env).listener_set()
    assert [(e.host, e.port) for e in listeners.bind] == [("0.0.0.0", 9092)]
    assert listeners.describe("advertised") == "PLAINTEXT://localhost:9092"


def _compose(name: str) -> dict:
    return yaml.safe_load((DOCKER / name).read_text())


def test_compose_file_matches_the_image() -> None:
    svc = _compose("docker-compose.yml")["services"]["kbroker"]
    assert svc["build"]["dockerfile"] == "docker/Dockerfile"
    assert (DOCKER / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve().exists()
    assert "9092:9092" in svc["ports"]
    assert svc["healthcheck"]["test"] == ["CMD", *healthcheck_command()]
    load_config({}, None, env=container_env(svc["environment"]))
    assert any(v.endswith(":/data") for v in svc["volumes"])


def test_compose_example_wiring() -> None:
    """The app beside kbroker: it waits for the health check, bootstraps from the INTERNAL listener
    that advertises kbroker:29092, and the host's port 9092 is the PLAINTEXT listener's."""
    services = _compose("compose.example.yml")["services"]
    for broker_name, app_name in (("kbroker", "app"), ("kbroker-ci", "app-ci")):
        broker, app = services[broker_name], services[app_name]
        assert app["depends_on"] == {broker_name: {"condition": "service_healthy"}}
        assert broker["healthcheck"]["test"] == ["CMD", *healthcheck_command()]
        assert broker["build"]["dockerfile"] == "docker/Dockerfile"
        cfg = load_config({}, None, env=container_env(broker["environment"]))
        listeners = cfg.listener_set()
        assert {e.name: f"{e.host}:{e.port}" for e in listeners.advertised.values()} == {
            "PLAINTEXT": "localhost:9092", "INTERNAL": "kbroker:29092"}
        assert [(e.host, e.port) for e in listeners.bind] == [("0.0.0.0", 9092), ("0.0.0.0", 29092)]
        assert broker["ports"] == ["9092:9092"]
        assert app["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kbroker:29092"
        assert "orders" in cfg.create_topics and cfg.data_dir == "/data"
    assert "ci" not in services["kbroker"].get("profiles", []) and services["kbroker"]["volumes"] == ["kbroker-data:/data"]
    ci = services["kbroker-ci"]
    assert ci["profiles"] == ["ci"] and services["app-ci"]["profiles"] == ["ci"]
    assert ci["tmpfs"] == ["/data"] and ci["environment"]["KBROKER_FLUSH"] == "never"
    assert "volumes" not in ci
    assert ci["networks"]["default"]["aliases"] == ["kbroker"]  # the app's settings work unchanged


@pytest.mark.parametrize("service", ["kbroker", "kbroker-ci"])
def test_compose_example_broker_tells_each_listener_its_address(tmp_path, service) -> None:
    services = _compose("compose.example.yml")["services"]
    test_env, ports = as_test_environment(services[service]["environment"], tmp_path / "data")
    with BrokerProcess(tmp_path / "data", port=ports[9092], listen_flag=False, env=test_env) as broker:
        for listener_port, told in ((ports[9092], ("localhost", ports[9092])),
                                    (ports[29092], ("kbroker", ports[29092]))):
            wire = Wire(f"127.0.0.1:{listener_port}")
            md = wire.call(3, 12, MetadataRequest(topics=None))
            assert [(b.host, b.port) for b in md.brokers] == [told]
            assert {t.name: len(t.partitions) for t in md.topics if t.name in ("orders", "payments")} == {
                "orders": 3, "payments": 6}
            fc = wire.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["app"]))
            assert [(c.host, c.port) for c in fc.coordinators] == [told]
            wire.close()
        # the image's health check, run with the service's environment, finds the configured port
        probe_env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBROKER_")}, **test_env}
        cmd = healthcheck_command()
        argv = [sys.executable, "-m", "kbroker", *cmd[1:]]
        ok = subprocess.run(argv, capture_output=True, text=True, env=probe_env)
        assert ok.returncode == 0, ok.stderr
        assert f"127.0.0.1:{ports[9092]}" in ok.stdout
        expect_flush = "never" if service == "kbroker-ci" else "always"
        assert load_config({}, None, env=test_env).flush == expect_flush
    gone = subprocess.run(argv, capture_output=True, env=probe_env)
    assert gone.returncode == 1  # and it fails once the broker is gone


def test_health_check_follows_a_moved_port(tmp_path) -> None:
    """The Dockerfile's own environment with the port moved by KBROKER_LISTENERS alone."""
    cmd = healthcheck_command()
    assert cmd == ["kbroker", "probe"]
    port = free_port()
    moved = {**env(), "KBROKER_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
             "KBROKER_ADVERTISED_LISTENERS": f"PLAINTEXT://localhost:{port}", "KBROKER_DATA_DIR": str(tmp_path / "d")}
    probe_env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBROKER_")}, **moved}
    with BrokerProcess(tmp_path / "d", port=port, listen_flag=False, env=moved):
        argv = [sys.executable, "-m", "kbroker", *cmd[1:]]
        assert subprocess.run(argv, capture_output=True, env=probe_env).returncode == 0
