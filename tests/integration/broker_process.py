"""A real `kbroker serve` in a subprocess, for integration tests.

    from kbroker.tests.integration.broker_process import BrokerProcess

    with BrokerProcess(tmp_path / "data", "--num-partitions", "3") as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        ...
        broker.restart()          # same port, same data dir
        broker.kill()             # SIGKILL; then broker.start() again
        broker.events("topic_created")   # parsed JSON log lines with that event name

`stop()` sends SIGTERM and asserts a clean exit (code 0). The log is written to `<data dir>/../
broker-<n>.log` per start, parsed lazily, and printed on failure by `dump_log()`.

(Tests import it as `kbroker.tests.integration.broker_process`: the repository root is the `kbroker`
package, and pytest runs with --import-mode=importlib, so a bare `tests.` import is not on sys.path.)
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


# Each pytest-xdist worker hands out ports from its own block below the kernel's ephemeral range
# (32768 and up, where clients' own sockets land): a broker stopped and restarted on its port can
# then never find it taken by another worker's new broker, as it could when every worker asked the
# kernel for "any free port".
_PORT_BLOCK = 1500
_FIRST_PORT = 20000
_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_worker_index = int(_worker[2:]) if _worker.startswith("gw") and _worker[2:].isdigit() else 0
_block_start = _FIRST_PORT + (_worker_index % 8) * _PORT_BLOCK
# Each process starts at its own place in the block: test sessions running side by side (each a "gw0")
# all walked the block from its first port and kept taking the ports the others had just found free.
_next_port = itertools.count(random.randrange(_PORT_BLOCK))


def free_port(host: str = "127.0.0.1") -> int:
    """A port this test worker has not handed out yet, free now, in the worker's own block."""
    for _ in range(_PORT_BLOCK):
        port = _block_start + next(_next_port) % _PORT_BLOCK
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_block_start}-{_block_start + _PORT_BLOCK - 1}")


def free_ports(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports (`kbroker serve --nodes N`: node k on port P+k)."""
    for _ in range(_PORT_BLOCK):
        first = free_port(host)
        if first + count - 1 >= _block_start + _PORT_BLOCK:
            continue
        held = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                held.append(s)
                s.bind((host, port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports")


class PortTaken(RuntimeError):
    """The broker could not bind its port: another process holds it."""


class BrokerProcess:
    def __init__(self, data_dir: str | Path, *extra_args: str, port: int | None = None, host: str = "127.0.0.1",
                 env: dict[str, str] | None = None, start: bool = True, listen_flag: bool = True,
                 kbroker: list[str] | None = None, max_open_files: int | None = None) -> None:
        """`listen_flag=False` leaves `--listen` out (the listeners come from extra_args or env; `port`
        is then the one to probe); `kbroker` replaces `python -m kbroker` (e.g. an installed script);
        `max_open_files` sets the broker's soft RLIMIT_NOFILE (`ulimit -n`)."""
        self.data_dir = Path(data_dir)
        self.listen_flag = listen_flag
        self.kbroker = kbroker or [sys.executable, "-m", "kbroker"]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self._port_chosen = port is None  # another port may be taken if another session takes this one
        self.port = port or free_port(host)
        self.extra_args = list(extra_args)
        self.env = env
        self.max_open_files = max_open_files  # the broker's soft RLIMIT_NOFILE (`ulimit -n`), if set
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.log_paths: list[Path] = []
        if start:
            self.start()

    # --- lifecycle ------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        listen = ["--listen", self.bootstrap] if self.listen_flag else []
        return [*self.kbroker, "serve", *listen, "--data-dir", str(self.data_dir), "--log-format", "json",
                *self.extra_args]

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start and wait until this broker serves. At a first start on a port chosen here, a port taken
        meanwhile by another session's process (free_port's race) is changed for another, twice at
        most; a restart keeps its port, which clients know."""
        for attempt in range(3):
            try:
                return self._start(timeout)
            except PortTaken:
                if not (self._port_chosen and self.starts == 1 and self.listen_flag) or attempt == 2:
                    raise
                self.starts, self.log_paths = 0, []
                self.port = free_port(self.host)

    def _start(self, timeout: float) -> None:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.starts += 1
        log_path = self.data_dir.parent / f"{self.data_dir.name}-broker-{self.starts}.log"
        self.log_paths.append(log_path)
        env = dict(os.environ)
        env.pop("KBROKER_CONFIG", None)
        if self.env:
            env.update(self.env)
        with open(log_path, "wb") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env,
                                         preexec_fn=self._limit_files if self.max_open_files else None)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                error = PortTaken if f"port {self.port} is already in use" in self.dump_log() else RuntimeError
                raise error(f"broker exited with {self.proc.returncode} during start-up:\n{self.dump_log()}")
            if self.probe() and self._serving_here(deadline):
                self._await_internal_topics(deadline)
                return
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker did not answer within {timeout}s:\n{self.dump_log()}")
            time.sleep(0.05)

    def _serving_here(self, deadline: float) -> bool:
        """Whether the broker that answered the probe is this one: its log says `broker_started`. Other
        test sessions on the machine take ports from the same blocks; when one holds our port, the
        probe is answered by its broker while ours fails to bind and exits (then start() raises).
        Nothing to check when the log is not JSON (a --log-format given in extra_args)."""
        if "--log-format" in self.extra_args:
            return True
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            if self.events("broker_started", self.starts):
                return True
            time.sleep(0.02)
        return False

    def _await_internal_topics(self, deadline: float) -> None:
        """A first start creates `__consumer_offsets` while it already answers (Kafka too creates it after
        start-up); tests that touch it (or /ready) at once wait until it is made and loaded, as a client
        waiting for kbroker's /ready would. Nothing to wait for when the log cannot tell (no `logs_loaded`
        event: another log format or level) or on a restart. (`__transaction_state` comes with the first
        transactional request.)"""
        wanted = {"offsets_topic_created", "offsets_loaded"}
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            lines = self.log_lines(self.starts)
            loaded = next((line for line in lines if line.get("event") == "logs_loaded"), None)
            if loaded is None or not loaded.get("first_start") or wanted <= {line.get("event") for line in lines}:
                return
            time.sleep(0.02)

    def _limit_files(self) -> None:
        import resource

        assert self.max_open_files is not None  # only installed with a limit
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_open_files, hard))

    def open_files(self) -> int:
        """How many file descriptors the running broker holds."""
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def probe(self, timeout: float = 1.0) -> bool:
        result = subprocess.run([*self.kbroker, "probe", self.bootstrap, "--timeout", str(timeout)],
                                capture_output=True)
        return result.returncode == 0

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, wait, and assert the broker exited cleanly."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not stop within {timeout}s:\n{self.dump_log()}")
        assert code == 0, f"broker exited with {code}:\n{self.dump_log()}"
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown path runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, *, clean: bool = True) -> None:
        """Stop (SIGTERM, or SIGKILL with clean=False) and start again on the same port and data dir."""
        if clean:
            self.stop()
        else:
            self.kill()
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, exc_type, *_: Any) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.kill()

    # --- logs -----------------------------------------------------------------------------------------

    def log_lines(self, start: int | None = None) -> list[dict[str, Any]]:
        """Parsed JSON log lines, of one start (1-based) or of all starts; non-JSON lines are kept as
        {"event": "<raw>", "raw": True}."""
        paths = self.log_paths if start is None else [self.log_paths[start - 1]]
        out: list[dict[str, Any]] = []
        for path in paths:
            try:
                text = path.read_text(errors="replace")
            except FileNotFoundError:
                continue
            for line in text.splitlines():
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                    out.append(item if isinstance(item, dict) else {"event": line, "raw": True})
                except ValueError:
                    out.append({"event": line, "raw": True})
        return out

    def events(self, name: str, start: int | None = None) -> list[dict[str, Any]]:
        return [line for line in self.log_lines(start) if line.get("event") == name]

    def dump_log(self, tail: int = 80) -> str:
        lines: list[str] = []
        for path in self.log_paths:
            try:
                lines += path.read_text(errors="replace").splitlines()
            except FileNotFoundError:
                pass
        return "\n".join(lines[-tail:])


def post_control(broker: Any, path: str, body: dict | None = None) -> dict:
    """POST to a broker's test controls (`--test-controls`; the broker has `admin_url` and `token` set)."""
    import urllib.request

    request = urllib.request.Request(f"{broker.admin_url}/v1/test/{path}", data=json.dumps(body or {}).encode(),
                                     method="POST", headers={"Content-Type": "application/json",
                                                             "Authorization": f"Bearer {broker.token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())
