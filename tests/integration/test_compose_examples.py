"""The apache/kafka image's documented single-node compose example and Confluent's cp-kafka one
(docker/examples/, verbatim), run with kbroker in the image's place: exactly their environment, no
port moved, and real clients on each advertised listener, from the host and from another container
on the compose network (tests/integration/compose_netns.py: network namespaces stand in for Docker).
"""

from __future__ import annotations

import json
import sys
import uuid

import pytest
import yaml

from kbroker.tests.integration import compose_netns
from kbroker.tests.integration.dockerfile import DOCKER, healthcheck_command, image_files
from kbroker.tests.integration.dockerfile import env as image_env

pytest.importorskip("confluent_kafka")

EXAMPLES = {"apache-kafka": DOCKER / "examples" / "apache-kafka" / "docker-compose.yml",
            "cp-kafka": DOCKER / "examples" / "cp-kafka" / "docker-compose.yml"}


def _service(example: str) -> dict:
    return yaml.safe_load(EXAMPLES[example].read_text())["services"]["broker"]


def _advertised(service: dict) -> dict[str, tuple[str, int]]:
    out = {}
    for item in service["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(","):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        out[name] = (host, int(port))
    return out


@pytest.fixture(scope="module")
def netns() -> None:
    why = compose_netns.available()
    if why is not None:
        pytest.skip(f"the compose examples run in network namespaces: {why}")


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_compose_example_serves_both_listeners_unchanged(netns, tmp_path, example) -> None:
    service = _service(example)
    advertised = _advertised(service)
    topic, group = f"compose-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with compose_netns.ComposeService(tmp_path, service, image_env(), image_files()) as svc:
        # each advertised listener, from where its address works: localhost from the host (through
        # `ports:`), the service's name from another container
        clients = []
        for name, (host, port) in sorted(advertised.items()):
            role = "host" if host == "localhost" else "app"
            clients.append((role, f"{host}:{port}", (host, port)))
        (host_role, host_bootstrap, host_told), (app_role, app_bootstrap, app_told) = sorted(
            clients, key=lambda c: c[0] != "host")
        assert (host_role, app_role) == ("host", "app")
        produced = svc.client("host", host_bootstrap, topic, group, "produce", "5")
        assert produced["brokers"] == [list(host_told)] and produced["produced"] == 5
        consumed = svc.client("app", app_bootstrap, topic, group, "consume", "5")
        assert consumed["brokers"] == [list(app_told)]  # told the name that works on the compose network
        assert consumed["consumed"] == [f"{host_bootstrap} {i}" for i in range(5)]
        again = svc.client("host", host_bootstrap, topic, group + "-host", "consume", "5")
        assert again["consumed"] == consumed["consumed"]
        # what the broker made of the environment: Kafka's names read, KRaft's said to be unneeded
        (started,) = svc.events("broker_started")
        env = service["environment"]
        assert started["cluster_id"] == env["CLUSTER_ID"] and started["node_id"] == int(env["KAFKA_NODE_ID"])
        assert started["data_dir"] == env["KAFKA_LOG_DIRS"]
        assert "CONTROLLER" not in started["listeners"]
        not_needed = {e["setting"] for e in svc.events("config_not_needed")}
        assert {"process.roles", "controller.quorum.voters", "controller.listener.names",
                "inter.broker.listener.name", "offsets.topic.replication.factor"} <= not_needed
        assert svc.events("config_unknown") == []
        # the image's health check, run in the container, finds the broker's first client listener
        health = svc.exec([sys.executable, "-m", "kbroker", *healthcheck_command()[1:]])
        assert health.returncode == 0 and "answered ApiVersions" in health.stdout, health.stderr
        assert svc.events("config_file_read") == []  # the image's default file: not with KAFKA_* settings
    assert svc.proc is not None and svc.proc.returncode == 0


def test_the_cluster_example_advertises_three_brokers_to_host_and_containers(netns, tmp_path) -> None:
    """docker/examples/kbroker-cluster: `KBROKER_NODES: 3` with Kafka's listener settings; the host is told
    localhost:9092-9094 (each through its `ports:` mapping), the other containers broker:19092-19094, and
    records written from the host with acks=all (3 replicas, min.insync.replicas 2) are read in a container."""
    service = yaml.safe_load((DOCKER / "examples" / "kbroker-cluster" / "docker-compose.yml").read_text())[
        "services"]["broker"]
    assert [str(p) for p in service["ports"]] == ["9092:9092", "9093:9093", "9094:9094"]
    topic, group = f"cluster-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with compose_netns.ComposeService(tmp_path, service, image_env(), image_files()) as svc:
        produced = svc.client("host", "localhost:9092", topic, group, "produce", "5")
        assert produced["brokers"] == [["localhost", 9092], ["localhost", 9093], ["localhost", 9094]]
        for port in (9093, 9094):  # every node is reachable from the host through its own mapping
            assert svc.client("host", f"localhost:{port}", topic, group + "-h", "produce", "1")["produced"] == 1
        consumed = svc.client("app", "broker:19093", topic, group, "consume", "7")
        assert consumed["brokers"] == [["broker", 19092], ["broker", 19093], ["broker", 19094]]
        assert sorted(consumed["consumed"]) == sorted(
            [f"localhost:9092 {i}" for i in range(5)] + ["localhost:9093 0", "localhost:9094 0"])
        (started,) = svc.events("broker_started")
        assert started["node_id"] == 1
        assert svc.events("config_unknown") == []
        described = svc.run("host", [sys.executable, "-m", "kbroker", "topic", "describe", topic,
                                     "--bootstrap-server", "localhost:9092", "--json"])
        assert described.returncode == 0, described.stderr
        partitions = json.loads(described.stdout)["partitions"]
        assert partitions and all(sorted(p["replicas"]) == [1, 2, 3] for p in partitions)
    assert svc.proc is not None and svc.proc.returncode == 0
