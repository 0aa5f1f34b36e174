"""Apache Kafka 4.4.0 itself, the reference broker: one KRaft node (broker and controller in one JVM) in
a subprocess on free loopback ports, formatted into a scratch log directory, for the tests that compare
kbroker with Kafka and for `make kafka`; KafkaCluster runs several such nodes as one cluster.

    from kbroker.tests.reference.kafka import KafkaProcess, kafka_libs

    with KafkaProcess(tmp_path / "kafka", {"num.partitions": "3"}) as kafka:
        producer = Producer({"bootstrap.servers": kafka.bootstrap})
        ...
        kafka.java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", kafka.bootstrap, "--list")

The jars come from Maven Central through `make kafka-jars` (tests/reference/pom.xml) into build/kafka/libs;
`kafka_libs()` is None when they are missing, and the tests that need them skip with a line that says so.
The interface follows tests/integration/broker_process.py's BrokerProcess (bootstrap, start, stop, kill,
restart, dump_log), so a test can run the same steps against either.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbroker.tests.integration.broker_process import free_port

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "build" / "kafka" / "libs"
START_TIMEOUT_S = 90.0  # a cold JVM on a loaded 2-core machine; about 7 s when quiet
STOP_TIMEOUT_S = 30.0
BIND_ATTEMPTS = 4

# Kafka's own defaults, except what one node needs (replication factors of 1) and what kbroker's tests
# assume of a broker they compare with (no initial rebalance delay). Anything else is set by the test.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


def kafka_libs() -> Path | None:
    """build/kafka/libs when `make kafka-jars` has filled it, else None."""
    return LIBS if (LIBS / ".resolved").exists() else None


# The tests' JVM: quick to start and small (the serial collector, C1 only, class data sharing), since a
# test times nothing. The benchmarks start Kafka with its own scripts' options instead (bench/brokers.py).
TEST_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


def require_kafka_libs() -> Path:
    """The jars, or the test skips, except under `make test` (KBROKER_REQUIRE_KAFKA=1, which resolves them
    first), where their absence fails it."""
    import pytest

    libs = kafka_libs()
    if libs is None:
        if os.environ.get("KBROKER_REQUIRE_KAFKA") == "1":
            pytest.fail("Apache Kafka's jars are missing (make kafka-jars)")
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    return libs


def java_command(main_class: str, *args: str, heap: str = "512m", log4j: Path | None = None,
                 classpath: Sequence[Path] = (), libs: Path | None = None,
                 jvm_options: Sequence[str] = TEST_JVM_OPTIONS) -> list[str]:
    """A `java` command line that runs one of Kafka's classes from the reference jars (a tool such as
    `org.apache.kafka.tools.TopicCommand`, or `kafka.Kafka` itself); `heap` is its -Xmx, `classpath`
    adds directories; `libs`, another release's jars."""
    libs = libs or kafka_libs()
    if libs is None:
        raise RuntimeError("Apache Kafka's jars are missing: run `make kafka-jars`")
    java = shutil.which("java") or "java"
    opts = [f"-Xmx{heap}", *jvm_options, "-Djava.awt.headless=true"]
    if log4j is not None:
        opts.append(f"-Dlog4j2.configurationFile={log4j}")
    return [java, *opts, "-cp", os.pathsep.join([f"{libs}/*", *map(str, classpath)]), main_class, *args]


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, never starting with "-"
    (as Kafka's Uuid.randomUuid() makes them: kafka-storage's argument parser takes "-..." for an option)."""
    while True:
        cluster_id = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaProcess:
    """One Apache Kafka node, combined broker and controller, on free loopback ports."""

    def __init__(self, base_dir: str | Path, config: dict[str, str] | None = None, *, start: bool = True,
                 host: str = "127.0.0.1", heap: str = "768m", log_level: str = "WARN", node_id: int = 1,
                 cluster_id: str | None = None, controller: KafkaProcess | None = None,
                 libs: Path | None = None, jvm_options: Sequence[str] = TEST_JVM_OPTIONS) -> None:
        """`controller`: this node is a broker only, of that node's cluster (KafkaCluster); without it the
        node is a cluster of its own, broker and controller. `libs`: the jars of another Kafka release than
        the reference's (tools/kafka_releases.py runs each release this way to ask it for its ApiVersions);
        `jvm_options`: the JVM's, the tests' quick-start ones unless given (the benchmarks give Kafka's
        scripts' own)."""
        self.libs = libs
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = free_port(host)
        self.controller = controller
        self.controller_port: int = free_port(host) if controller is None else controller.controller_port
        self.node_id = node_id
        self.cluster_id: str = cluster_id or (controller.cluster_id if controller else random_cluster_id())
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.log_level = log_level
        self.config = {**(SINGLE_NODE if controller is None and cluster_id is None else {}), **(config or {})}
        self.extra_listeners: dict[str, int] = {}  # listener (named as its security protocol) -> port
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._stdout_path = self.base_dir / "stdout-0.log"  # the last start's (`launch`), and where its
        self._log_start = 0                                   # part of server.log begins
        self.formatted = False
        if start:
            self.start()

    # --- files ------------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def properties_path(self) -> Path:
        return self.base_dir / "server.properties"

    @property
    def server_log(self) -> Path:
        return self.base_dir / "server.log"

    def add_listener(self, protocol: str, **config: str) -> int:
        """Another listener beside PLAINTEXT (SSL, SASL_PLAINTEXT, ...), named as its security protocol, on
        a free port, with the settings it needs (keys with dots as `**{"ssl.client.auth": ...}`); its port.
        Call before start()."""
        port = self.extra_listeners[protocol] = free_port(self.host)
        self.config.update(config)
        return port

    def properties(self) -> dict[str, str]:
        extra = "".join(f",{name}://{self.host}:{port}" for name, port in self.extra_listeners.items())
        voter = self.controller or self
        broker_only = self.controller is not None
        return {
            "process.roles": "broker" if broker_only else "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{voter.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port}{extra}" + (
                "" if broker_only else f",CONTROLLER://{self.host}:{self.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}{extra}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
                                              + "".join(f",{name}:{name}" for name in self.extra_listeners),
            "log.dirs": str(self.log_dir),
            **self.config,
        }

    def _write_files(self) -> Path:
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j = self.base_dir / "log4j2.properties"
        log4j.write_text(LOG4J2.format(log=self.server_log, level=self.log_level))
        return log4j

    def java(self, main_class: str, *args: str, timeout: float = 120.0, input: str | None = None,
             heap: str = "256m") -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's tools (by class name) from the reference jars; its output as text."""
        if self.libs is not None:  # another release's tools (tools/kafka_releases.py): a JVM of their own
            log4j = self.base_dir / "log4j2-tools.properties"
            if not log4j.exists():
                log4j.write_text(LOG4J2.format(log=self.base_dir / "tools.log", level="WARN"))
            return subprocess.run(java_command(main_class, *args, heap=heap, log4j=log4j, libs=self.libs),
                                  capture_output=True, text=True, timeout=timeout, input=input)
        from kbroker.tests.reference.tool_runner import run_tool

        return run_tool(main_class, *args, timeout=timeout, input=input, heap=heap)

    # --- lifecycle --------------------------------------------------------------------------------------

    def format(self) -> None:
        """`kafka-storage.sh format`: the log directory gets its meta.properties and bootstrap checkpoint."""
        log4j = self._write_files()
        out = subprocess.run(java_command("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                          "-c", str(self.properties_path), heap="256m", log4j=log4j,
                                          libs=self.libs),
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        self.formatted = True

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start and wait until this node answers. Another test session on the machine may take a port
        between free_port() and Kafka's bind: then Kafka exits saying so and starts again on new ports,
        and an answer from a broker that is not this one (another cluster id) does not count."""
        for attempt in range(BIND_ATTEMPTS):
            try:
                return self._start_once(timeout)
            except _PortTaken:
                if attempt == BIND_ATTEMPTS - 1 or self.controller is not None:
                    raise RuntimeError(f"Kafka could not bind its ports {BIND_ATTEMPTS} times:\n{self.dump_log()}")
                self.port, self.controller_port = free_port(self.host), free_port(self.host)

    def _start_once(self, timeout: float) -> None:
        self.launch()
        self.wait_serving(timeout)

    def launch(self) -> None:
        """Format the log directory if it is new, then start the JVM without waiting for it to serve
        (wait_serving waits; the benchmarks time that wait themselves, and spawn it on the broker's core)."""
        assert self.proc is None or self.proc.poll() is not None, "Kafka already running"
        if not self.formatted:
            self.format()
        log4j = self._write_files()
        self.starts += 1
        self._stdout_path = self.base_dir / f"stdout-{self.starts}.log"
        self._log_start = self.server_log.stat().st_size if self.server_log.exists() else 0
        with open(self._stdout_path, "wb") as stdout:
            self.proc = subprocess.Popen(java_command("kafka.Kafka", str(self.properties_path), heap=self.heap,
                                                      log4j=log4j, libs=self.libs, jvm_options=self.jvm_options),
                                         stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True)

    def port_taken(self) -> bool:
        """Whether the last start's logs say a port given to it was bound by someone else meanwhile."""
        return _bind_failed(self._stdout_path, 0) or _bind_failed(self.server_log, self._log_start)

    def wait_serving(self, timeout: float = START_TIMEOUT_S, brokers: int = 1) -> None:
        """Until this node answers Metadata listing at least `brokers` brokers."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                if self.port_taken():
                    raise _PortTaken()
                raise RuntimeError(f"Kafka exited with {self.proc.returncode} during start-up:\n{self.dump_log()}")
            if self.probe(brokers=brokers):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"Kafka did not answer within {timeout}s:\n{self.dump_log()}")
            time.sleep(0.1)

    def probe(self, timeout: float = 1.0, brokers: int = 1) -> bool:
        """True when this node answers Metadata v12 listing itself, with its own cluster id (ApiVersions
        alone is answered before the broker has joined the controller's metadata and can serve
        anything else; another session's broker on a port we were given is not us)."""
        from kbroker.protocol import framing
        from kbroker.protocol.messages.metadata_request import MetadataRequest

        try:
            with socket.create_connection((self.host, self.port), timeout=timeout) as s:
                s.settimeout(timeout)
                request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
                s.sendall(framing.encode_request(3, 12, 1, "probe", request))
                size = struct.unpack(">i", _read_exactly(s, 4))[0]
                _, answer = framing.decode_response(3, 12, _read_exactly(s, size))
                return len(answer.brokers) >= brokers and answer.cluster_id == self.cluster_id
        except (OSError, struct.error, ValueError, EOFError):
            return False

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (Kafka's controlled shutdown), wait; SIGKILL if it does not stop in time."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def restart(self, *, clean: bool = True) -> None:
        if clean:
            self.stop()
        else:
            self.kill()
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> KafkaProcess:
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def dump_log(self, tail: int = 80) -> str:
        lines: list[str] = []
        for path in [*sorted(self.base_dir.glob("stdout-*.log")), self.server_log]:
            try:
                lines += [f"{path.name}: {line}" for line in path.read_text(errors="replace").splitlines()]
            except FileNotFoundError:
                pass
        return "\n".join(lines[-tail:])


class _PortTaken(Exception):
    """Kafka exited because a port given to it was bound by someone else meanwhile."""


def _bind_failed(log: Path, start: int) -> bool:
    """Whether the log, from byte `start` (this start's part), says a port was taken."""
    try:
        with open(log, "rb") as fh:
            fh.seek(start)
            return b"Address already in use" in fh.read()
    except FileNotFoundError:
        return False


# A cluster's nodes keep Kafka's defaults (replication factors of 3, transaction.state.log.min.isr 2).
CLUSTER = {"group.initial.rebalance.delay.ms": "0"}


class KafkaCluster:
    """Several Apache Kafka brokers (ids 1..n, as `kbroker serve --nodes n` numbers them), one KRaft
    cluster on free loopback ports: node 1 is broker and the quorum's one controller, the others are
    brokers only, so that stopping any node but 1 keeps the quorum and its controller fences the node
    and shrinks the ISRs as Kafka does. Each node is a KafkaProcess (its own directory under base_dir).

        with KafkaCluster(tmp_path / "kafka") as kafka:
            kafka.stop_node(3)
            ...
            kafka.start_node(3)
    """

    def __init__(self, base_dir: str | Path, nodes: int = 3, config: dict[str, str] | None = None, *,
                 start: bool = True, heap: str = "512m", log_level: str = "WARN") -> None:
        base = Path(base_dir)
        settings = {**CLUSTER, **(config or {})}
        first = KafkaProcess(base / "node-1", settings, start=False, node_id=1, cluster_id=random_cluster_id(),
                             heap=heap, log_level=log_level)
        self.nodes = [first, *(KafkaProcess(base / f"node-{k}", settings, start=False, node_id=k, controller=first,
                                            heap=heap, log_level=log_level) for k in range(2, nodes + 1))]
        if start:
            self.start()

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes if node.running) or self.nodes[0].bootstrap

    @property
    def cluster_id(self) -> str:
        return self.nodes[0].cluster_id

    def node(self, node_id: int) -> KafkaProcess:
        return self.nodes[node_id - 1]

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Every node not running, started together; returns when each serves and sees all that run."""
        try:
            for node in self.nodes:
                if not node.running:
                    node.launch()
            self.wait_serving(timeout)
        except BaseException:
            self.stop()
            raise

    def wait_serving(self, timeout: float = START_TIMEOUT_S) -> None:
        running = [node for node in self.nodes if node.running]
        for node in running:
            node.wait_serving(timeout, brokers=len(running))

    def stop_node(self, node_id: int) -> int:
        """Kafka's controlled shutdown of one node (its leaderships move, the ISRs lose it)."""
        return self.node(node_id).stop()

    def start_node(self, node_id: int, timeout: float = START_TIMEOUT_S) -> None:
        self.node(node_id).launch()
        self.wait_serving(timeout)

    def stop(self) -> None:
        """The brokers first, the controller last (a broker's controlled shutdown needs it)."""
        for node in reversed(self.nodes):
            node.stop()

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def dump_log(self, tail: int = 40) -> str:
        return "\n".join(f"--- node {node.node_id}\n{node.dump_log(tail)}" for node in self.nodes)


def _read_exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise OSError("closed")
        out += chunk
    return bytes(out)


def main() -> None:
    """`make kafka`: the reference broker in the foreground until Ctrl-C, its files in a scratch directory."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="make kafka", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--dir", help="its log directory and logs (default: a new temporary directory)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a server property")
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafka-reference-"))
    config = dict(item.split("=", 1) for item in args.set)
    kafka = KafkaProcess(base, config, start=False)
    started = time.monotonic()
    kafka.start()
    print(f"Apache Kafka 4.4.0 serves on {kafka.bootstrap} ({time.monotonic() - started:.1f} s to start; "
          f"files in {base}); Ctrl-C stops it", flush=True)
    try:
        while kafka.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        kafka.stop()


if __name__ == "__main__":
    main()
