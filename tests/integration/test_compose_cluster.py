"""docker/compose.cluster.yml: PostgreSQL and three kbroker nodes (issue 44). No Docker engine runs here,
so the file is parsed and checked against the broker's configuration and the image, then PostgreSQL is
made as the `postgres` service makes it (its user, password and database) and the three nodes are started
with exactly their services' environments (only the ports, the data directories and the database's
host changed: as_test_environment), and the app's commands run against them by the services' names
(mapped to the nodes' loopback listeners in a mount namespace of the app's own: run_with_names)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from kbroker.broker.config import load_config
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.dockerfile import DOCKER, as_test_environment, container_env, healthcheck_command, instructions
from kbroker.tests.integration.wire import Wire

NODES = ("kbroker-1", "kbroker-2", "kbroker-3")


def _services() -> dict:
    return yaml.safe_load((DOCKER / "compose.cluster.yml").read_text())["services"]


def _listeners(service: dict) -> tuple[dict[str, str], int]:
    """(advertised address by listener name, the PLAINTEXT listener's port in the container)."""
    listeners = load_config({}, None, env=container_env(service["environment"])).listener_set()
    bound = {e.name: e.port for e in listeners.bind}
    return {e.name: f"{e.host}:{e.port}" for e in listeners.advertised.values()}, bound["PLAINTEXT"]


def test_compose_cluster_wiring() -> None:
    services = _services()
    pg = services["postgres"]
    assert pg["image"].startswith("postgres:") and "pg_isready" in pg["healthcheck"]["test"][1]
    urls = set()
    for k, name in enumerate(NODES, 1):
        svc = services[name]
        assert svc["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert svc["healthcheck"]["test"] == ["CMD", *healthcheck_command()]
        assert svc["build"]["dockerfile"] == "docker/Dockerfile"
        cfg = load_config({}, None, env=container_env(svc["environment"]))
        assert cfg.node_id == k and cfg.data_dir == "/data" and svc["volumes"] == [f"{name}-data:/data"]
        urls.add(cfg.cluster)
        advertised, port = _listeners(svc)
        assert advertised == {"PLAINTEXT": f"localhost:{port}", "INTERNAL": f"{name}:29092"}
        assert svc["ports"] == [f"{port}:{port}"]  # the host reaches each node where it is told to
        # a controlled shutdown hands the partitions over within two leases (10 s) before the listeners close
        assert int(svc["stop_grace_period"].rstrip("s")) > 10
    assert len(urls) == 1
    url = urlsplit(urls.pop())
    env = pg["environment"]
    assert (url.scheme, url.hostname, url.port) == ("postgresql", "postgres", 5432)
    assert (url.username, url.password, url.path) == (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"],
                                                      "/" + env["POSTGRES_DB"])
    assert len({_listeners(services[n])[1] for n in NODES}) == 3  # one host port each
    app = services["app"]
    assert app["depends_on"] == {n: {"condition": "service_healthy"} for n in NODES}
    assert app["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == ",".join(f"{n}:29092" for n in NODES)
    run = next(a for w, a in instructions() if w == "RUN")
    assert "[cluster]" in run  # the image has asyncpg, which --cluster needs


def run_with_names(script: str, names: dict[str, str], tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`sh -c script` where each of `names` resolves to its address, as a compose network's DNS resolves
    the services' names: in a mount namespace of its own (unshare), /etc/hosts is a copy of the
    machine's with those names added, bound over it for that process alone. Skips where no mount
    namespace can be made (root, or unprivileged user namespaces, is needed; CI runs as root)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is missing: the app's commands not run by the services' names")
    hosts = tmp_path / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + "".join(f"{addr} {name}\n" for name, addr in names.items()))
    unshare = ["unshare", "--mount", *([] if os.geteuid() == 0 else ["--map-root-user"])]
    probe = subprocess.run([*unshare, "sh", "-c", 'mount --bind "$1" /etc/hosts && getent hosts "$2"', "sh",
                            str(hosts), next(iter(names))], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here ({probe.stderr.strip()[:200]}): the app's commands not run by the "
                    f"services' names")
    assert subprocess.run(["getent", "hosts", next(iter(names))], capture_output=True).returncode != 0, \
        "the services' names resolve outside the namespace: the check would prove nothing"
    return subprocess.run([*unshare, "sh", "-c", 'mount --bind "$1" /etc/hosts && exec sh -c "$2"', "sh",
                           str(hosts), script], capture_output=True, text=True, timeout=120, env=env)


def test_compose_cluster_serves_each_listener_and_runs_the_app(postgres, tmp_path) -> None:
    services = _services()
    env = services["postgres"]["environment"]
    postgres.create_role(env["POSTGRES_USER"], env["POSTGRES_PASSWORD"])
    postgres.create_database(env["POSTGRES_DB"], owner=env["POSTGRES_USER"])
    nodes: dict[str, tuple[BrokerProcess, dict[int, int], dict[str, str]]] = {}
    try:
        for name in NODES:
            svc = services[name]
            test_env, ports = as_test_environment(svc["environment"], tmp_path / name / "data")
            url = urlsplit(test_env["KBROKER_CLUSTER"])
            test_env["KBROKER_CLUSTER"] = url._replace(netloc=url.netloc.replace("postgres:5432",
                                                                                 f"127.0.0.1:{postgres.port}")).geturl()
            port = ports[_listeners(svc)[1]]
            broker = BrokerProcess(tmp_path / name / "data", port=port, listen_flag=False, env=test_env)
            nodes[name] = (broker, ports, test_env)
        host_side = {k: ("localhost", ports[_listeners(services[n])[1]]) for k, (n, (_, ports, _)) in
                     enumerate(nodes.items(), 1)}
        containers = {k: (n, ports[29092]) for k, (n, (_, ports, _)) in enumerate(nodes.items(), 1)}
        deadline = time.monotonic() + 60
        for name, (broker, ports, test_env) in nodes.items():
            for listener_port, told in ((broker.port, host_side), (ports[29092], containers)):
                while True:  # every node registered, as each node's Metadata lists them
                    wire = Wire(f"127.0.0.1:{listener_port}")
                    try:
                        md = wire.call(3, 12, MetadataRequest(topics=None))
                    finally:
                        wire.close()
                    seen = {b.node_id: (b.host, b.port) for b in md.brokers}
                    if seen == told or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                assert seen == told
            # the image's health check, with the service's environment, finds the node
            probe_env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBROKER_")},
                         **test_env}
            probe = subprocess.run([sys.executable, "-m", "kbroker", *healthcheck_command()[1:]], capture_output=True,
                                   text=True, env=probe_env)
            assert probe.returncode == 0, probe.stderr
        if shutil.which("kcat") is None:
            pytest.skip("kcat is not installed (make system-deps): the app's commands not run")
        app = services["app"]
        script = app["command"][0].replace("$$", "$")  # compose's escape of a literal $
        # The app as a container runs it: its bootstrap servers are the services' names, and the nodes tell
        # it their INTERNAL listeners by those names. The names resolve to the nodes' loopback listeners
        # in a mount namespace of the app's own, whose /etc/hosts maps them (the machine's is untouched);
        # only the port each container listens on became the free port the test gave that node.
        bootstrap = re.sub(r"(kbroker-\d+):29092", lambda m: f"{m[1]}:{nodes[m[1]][1][29092]}",
                           app["environment"]["KAFKA_BOOTSTRAP_SERVERS"])
        assert bootstrap.split(",") == [f"{n}:{containers[k][1]}" for k, n in enumerate(NODES, 1)]
        out = run_with_names(script, {name: "127.0.0.1" for name in NODES}, tmp_path,
                             {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap})
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["a:1", "b:2", "c:3"]
    finally:
        for broker, _, _ in nodes.values():
            broker.kill()
