"""A compose file's broker service run as Docker runs it, without Docker: its process in a network
namespace of its own, with exactly the service's environment, and clients where Docker puts them.

    with ComposeService(tmp_path, service, image_env, image_files) as svc:
        svc.client("host", "localhost:9092", ...)      # a program on the host, through `ports:`
        svc.client("app", "broker:19092", ...)         # another container on the compose network

Three namespaces, linked by veth pairs made inside them (nothing is added to the machine's own
network, and every address is private to them, so parallel tests never meet):

    host 10.9.0.1 ---- 10.9.0.2 broker 10.9.0.6 ---- 10.9.0.5 app

- broker: `kbroker serve` with the image's ENV, the service's `environment:` and HOSTNAME, nothing
  else, in a mount namespace of its own where /etc/hosts names the container (`hostname:`) and /tmp
  is an empty tmpfs, as a container's are; the image's own files (its default config) are placed
  where the image has them, on a tmpfs over /opt;
- host: `ports:` are forwarded as docker-proxy forwards them, from 127.0.0.1:HOST_PORT to the
  container's port, so a client there bootstraps from localhost:9092 as the compose file's users do;
- app: /etc/hosts resolves the service name, as the compose network's DNS does.

Needs root (`ip netns`, mounts), as `make test` has in CI; `available()` says whether it can run.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kbroker.broker.logging import read_events

_IDS = itertools.count()
HOST, BROKER_TO_HOST, BROKER_TO_APP, APP = "10.9.0.1", "10.9.0.2", "10.9.0.6", "10.9.0.5"


def available() -> str | None:
    """None when network namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is missing"
    name = f"kbc-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


def _in(ns: str, hosts: Path, argv: list[str], *, setup: str = "") -> list[str]:
    """`argv` run in namespace `ns` with `hosts` as its /etc/hosts (and `setup` shell commands first)."""
    script = f'mount --bind "$0" /etc/hosts && {setup + " && " if setup else ""}exec "$@"'
    return ["ip", "netns", "exec", ns, "sh", "-c", script, str(hosts), *argv]


class ComposeService:
    def __init__(self, base: Path, service: dict, image_env: dict[str, str],
                 image_files: dict[str, Path] | None = None) -> None:
        self.base = base
        self.base.mkdir(parents=True, exist_ok=True)
        self.service = service
        self.hostname = service.get("hostname") or service.get("container_name") or "broker"
        env = {**image_env, **{k: str(v) for k, v in (service.get("environment") or {}).items()}}
        # what a container's process sees besides: its host name and the image's PATH
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": self.hostname, **env}
        self.image_files = image_files or {}
        n = f"{os.getpid()}-{next(_IDS)}"
        self.ns = {role: f"kbc-{n}-{role}" for role in ("host", "broker", "app")}
        self.proc: subprocess.Popen | None = None
        self.forwarders: list[subprocess.Popen] = []
        self.log_path = base / "broker.log"

    # --- the network ------------------------------------------------------------------------------------

    def _network(self) -> None:
        for ns in self.ns.values():
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        pairs = (("host", "eh", HOST, "broker", "bh", BROKER_TO_HOST),
                 ("app", "ea", APP, "broker", "ba", BROKER_TO_APP))
        for left, lname, laddr, right, rname, raddr in pairs:
            _ip("link", "add", lname, "netns", self.ns[left], "type", "veth", "peer", "name", rname,
                "netns", self.ns[right])
            for ns, dev, addr in ((self.ns[left], lname, laddr), (self.ns[right], rname, raddr)):
                _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
        names = {self.hostname, self.service.get("container_name") or self.hostname}
        self.hosts = {
            # the container names itself by its address on the compose network
            "broker": f"127.0.0.1 localhost\n{BROKER_TO_APP} {' '.join(sorted(names))}\n",
            "app": f"127.0.0.1 localhost\n{BROKER_TO_APP} {' '.join(sorted(names))}\n",
            "host": "127.0.0.1 localhost\n",
        }
        for role, text in self.hosts.items():
            (self.base / f"hosts-{role}").write_text(text)

    def _hosts(self, role: str) -> Path:
        return self.base / f"hosts-{role}"

    # --- the container ------------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        self._network()
        setup = ["mount -t tmpfs tmpfs /tmp"]
        if self.image_files:
            setup.append("mount -t tmpfs tmpfs /opt")
            for target, source in self.image_files.items():
                setup.append(f'mkdir -p "{os.path.dirname(target)}" && cp "{source}" "{target}"')
        argv = _in(self.ns["broker"], self._hosts("broker"), [sys.executable, "-m", "kbroker", "serve"],
                   setup=" && ".join(setup))
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.base)
        for mapping in self.service.get("ports") or ():
            host_port, _, container_port = str(mapping).rpartition(":")
            self.forwarders.append(subprocess.Popen(
                ["ip", "netns", "exec", self.ns["host"], sys.executable, "-m", "kbroker.tests.integration.port_forward",
                 f"127.0.0.1:{host_port}", f"{BROKER_TO_HOST}:{container_port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout
        first_port = str((self.service.get("ports") or ["9092:9092"])[0]).rpartition(":")[0]
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kbroker exited with {self.proc.returncode}:\n{self.log()}")
            probe = self.run("host", [sys.executable, "-m", "kbroker", "probe", f"127.0.0.1:{first_port}",
                                      "--timeout", "1"], timeout=10)
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"kbroker did not answer through the host's port {first_port}:\n{self.log()}")
            time.sleep(0.2)

    def run(self, role: str, argv: list[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """A program in the host's or the app container's namespace."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KBROKER_"))}
        return subprocess.run(_in(self.ns[role], self._hosts(role), argv), capture_output=True, text=True,
                              timeout=timeout, env=env)

    def exec(self, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """`docker compose exec`: a program in the container, with its environment (the health check)."""
        return subprocess.run(_in(self.ns["broker"], self._hosts("broker"), argv), capture_output=True, text=True,
                              timeout=timeout, env=self.env, cwd=self.base)

    def client(self, role: str, bootstrap: str, *args: str) -> dict[str, Any]:
        """tests/integration/compose_client.py run there; its JSON report."""
        out = self.run(role, [sys.executable, "-m", "kbroker.tests.integration.compose_client", bootstrap, *args])
        assert out.returncode == 0, f"client in {role} on {bootstrap}:\n{out.stdout}\n{out.stderr}\n{self.log()}"
        return json.loads(out.stdout.strip().splitlines()[-1])

    def log(self, tail: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-tail:])
        except FileNotFoundError:
            return ""

    def events(self, name: str) -> list[dict[str, Any]]:
        return read_events(self.log_path, name)

    def stop(self) -> int | None:
        code = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        elif self.proc is not None:
            code = self.proc.returncode
        for fwd in self.forwarders:
            fwd.kill()
            fwd.wait()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        return code

    def __enter__(self) -> ComposeService:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()
