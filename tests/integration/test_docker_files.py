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

from kbroker.broker.config import BrokerConfig, load_config, load_config_with_sources
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
    image_files,
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
    # the wheel, not the source tree, with asyncpg for --cluster (docker/compose.cluster.yml)
    assert 'pip install --no-cache-dir "$(ls /tmp/wheels/kbroker-*.whl)[cluster]"' in run
    for word, args in ins:
        if word == "COPY":
            for src in args.split()[:-1]:
                assert (ROOT / src).exists(), f"COPY source {src} missing"


def test_dockerfile_environment_is_valid_broker_configuration() -> None:
    """The image's defaults are its default server.properties, at apache/kafka's path, under the
    variables: read alone they listen on 9092 everywhere, advertise localhost and keep data in /data;
    KAFKA_* variables replace the file, as in the apache/kafka image."""
    image_env = env()
    known = {"KBROKER_" + f.name.upper() for f in dataclasses.fields(BrokerConfig)}
    for key in image_env:
        if key.startswith("KBROKER_"):
            assert key in known, key
    files = image_files()
    assert set(files) == {"/opt/kafka/config/server.properties"}
    paths = [str(files["/opt/kafka/config/server.properties"])]
    cfg, sources = load_config_with_sources({}, None, image_env, paths)
    listeners = cfg.listener_set(sources)
    assert [(e.host, e.port) for e in listeners.bind] == [("0.0.0.0", 9092)]
    assert listeners.describe("advertised") == "PLAINTEXT://localhost:9092"
    assert cfg.data_dir == "/data" and cfg.log_format == "json"
    # with a KAFKA_* setting the image's default file is not read (the apache/kafka image writes its
    # final file from the variables alone); a file mounted at /mnt/shared/config is
    from kbroker.broker.kafka_names import IMAGE_CONFIG, MOUNTED_CONFIG

    assert IMAGE_CONFIG in files
    kafka_env = {**image_env, "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka:9093"}
    moved = load_config({}, None, kafka_env, ["/nonexistent/mounted", *paths])
    assert moved.listener_set().describe("listeners") == "PLAINTEXT://0.0.0.0:9093" and moved.data_dir == "./data"
    assert load_config({}, None, kafka_env, [*paths, "/nonexistent"]).data_dir == "/data"  # as if mounted
    assert MOUNTED_CONFIG != IMAGE_CONFIG


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
