"""docker/compose.monitoring.yml, the Prometheus config and the Grafana dashboard: no Docker engine
runs here, so parse them, check the broker accepts the compose settings, and lint every dashboard
query against the metric names a real broker exports after a workload."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from kbroker.broker.config import load_config
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.dockerfile import as_test_environment, container_env

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.monitoring.yml"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "kbroker.json"
PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "le", "max", "min", "avg", "without"}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_settings_are_ones_the_broker_accepts() -> None:
    services = _compose()["services"]
    broker = services["kbroker"]
    cfg = load_config({}, None, container_env(broker["environment"]))
    assert cfg.metrics_listen == "0.0.0.0:9644" and "9644:9644" in broker["ports"]
    assert not cfg.test_controls  # never in a compose file people copy
    assert broker["healthcheck"]["test"][1:5] == ["kbroker", "probe", "127.0.0.1:9092", "--ready"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
    for svc in services.values():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DOCKER / source).exists(), f"{COMPOSE.name} mounts missing {source}"


def test_prometheus_scrapes_the_brokers_metrics_port() -> None:
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["kbroker:9644"]


def test_grafana_provisioning_points_at_the_dashboard_and_datasource() -> None:
    datasources = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = datasources["datasources"][0]["uid"]
    providers = yaml.safe_load((DOCKER / "grafana/provisioning/dashboards/kbroker.yml").read_text())
    grafana = _compose()["services"]["grafana"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    assert mounted[providers["providers"][0]["options"]["path"]] == "./grafana/dashboards"
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"] and dash["timezone"] == "utc"
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == uid and panel["targets"], panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}


def _metric_names(expr: str) -> set[str]:
    without_labels = re.sub(r"\{[^}]*\}", "", re.sub(r"\[[^\]]*\]", "", expr))
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_labels))
    inside_by = set(re.findall(r"by \(([^)]*)\)", expr))
    labels = {w.strip() for group in inside_by for w in group.split(",")}
    return {w for w in words if w not in PROMQL_WORDS and w not in labels}


def test_every_dashboard_query_uses_metrics_a_running_broker_exports(tmp_path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from prometheus_client.parser import text_string_to_metric_families

    port = free_port()
    with BrokerProcess(tmp_path / "d", "--metrics-listen", f"127.0.0.1:{port}", "--profile", "test") as b:
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        producer.produce("dash", b"x")
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dash",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["dash"])
        message = None
        for _ in range(300):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                break
        consumer.commit(message=message, asynchronous=False)
        consumer.close()
        import socket
        import struct

        from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
        from kbroker.tests.integration.wire import Wire

        wire = Wire(b.bootstrap)  # a heartbeat from nobody: an answer with an error code
        assert wire.call(12, 4, HeartbeatRequest("dash", 1, "nobody")).error_code != 0
        wire.close()
        with socket.create_connection(("127.0.0.1", b.port)) as bad:  # an unknown API: a failed request
            bad.sendall(struct.pack(">ihhih", 10, 9999, 0, 1, -1))
            bad.settimeout(10)
            assert bad.recv(10) == b""
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    exported = set()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            exported.add(sample.name)
            labels.setdefault(sample.name, set()).update(sample.labels)
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            names = _metric_names(target["expr"])
            assert names, target["expr"]
            missing = names - exported
            assert not missing, f"panel {panel['title']!r}: {sorted(missing)} not exported"
            for group in re.findall(r"by \(([^)]*)\)", target["expr"]):
                for label in (w.strip() for w in group.split(",")):
                    assert any(label in labels[n] for n in names), f"{panel['title']!r}: no label {label}"
            for legend_label in re.findall(r"\{\{(\w+)\}\}", target["legendFormat"]):
                assert any(legend_label in labels[n] for n in names), f"{panel['title']!r}: legend {legend_label}"


def test_the_compose_health_check_command_passes_against_a_ready_broker(tmp_path) -> None:
    """The broker started with the service's container environment (the image's ENV under the
    compose file's: both listener forms at once once stopped it starting) passes its health check."""
    test_env, ports = as_test_environment(_compose()["services"]["kbroker"]["environment"], tmp_path / "d")
    with BrokerProcess(tmp_path / "d", port=ports[9092], listen_flag=False, env=test_env) as b:
        argv = _compose()["services"]["kbroker"]["healthcheck"]["test"][1:]
        argv = [a.replace("127.0.0.1:9092", b.bootstrap).replace("127.0.0.1:9644", f"127.0.0.1:{ports[9644]}")
                for a in argv]
        result = subprocess.run([sys.executable, "-m", "kbroker", *argv[1:]], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr + shlex.join(argv)
