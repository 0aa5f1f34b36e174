"""The two brokers a differential test drives: Apache Kafka 4.4 (tests/reference/kafka.py) and a kbroker
configured as that Kafka node is (the same listener name, node id and initial rebalance delay), each
seen through a `Side` that runs Kafka's tools against it and normalises what must differ.

    kafka, kbroker = Side.of_kafka(kafka_reference), Side.of_kbroker(broker)
    out = kbroker.tool(TOPICS, "--describe", "--topic", "orders")   # --bootstrap-server added
    out.lines                                                       # stdout, normalised

Normalised: the side's own address (`<bootstrap>`), Kafka's controller address (`<controller>`),
its log directory (`<log.dirs>`), its cluster id (`<cluster-id>`), log-line timestamps. Anything
more (topic ids, member ids, epochs in ms) each test replaces where it knows the column.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from kbroker.tests.integration.broker_process import BrokerProcess, PortTaken, free_port
from kbroker.tests.reference.kafka import KafkaProcess
from kbroker.tests.reference.tool_runner import run_tool

TOOLS = "org.apache.kafka.tools."
TOPICS = TOOLS + "TopicCommand"
CONSUMER_GROUPS = TOOLS + "consumer.group.ConsumerGroupCommand"
GROUPS = TOOLS + "GroupsCommand"
CONFIGS = TOOLS + "ConfigCommand"
ACLS = TOOLS + "AclCommand"
TRANSACTIONS = TOOLS + "TransactionsCommand"
DELETE_RECORDS = TOOLS + "DeleteRecordsCommand"
LOG_DIRS = TOOLS + "LogDirsCommand"
FEATURES = TOOLS + "FeatureCommand"
METADATA_QUORUM = TOOLS + "MetadataQuorumCommand"
CLUSTER = TOOLS + "ClusterTool"
BROKER_API_VERSIONS = TOOLS + "BrokerApiVersionsCommand"
GET_OFFSETS = TOOLS + "GetOffsetShell"
CONSOLE_PRODUCER = TOOLS + "ConsoleProducer"
CONSOLE_CONSUMER = TOOLS + "consumer.ConsoleConsumer"
PRODUCER_PERF = TOOLS + "ProducerPerformance"
CONSUMER_PERF = TOOLS + "ConsumerPerformance"

BOOTSTRAP = "<bootstrap>"  # an argument Side.tool replaces by the side's address
_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] ", re.MULTILINE)
_STACK_FRAME = re.compile(r"^\s+at .*\n|^\s+\.\.\. \d+ more\n", re.MULTILINE)


def await_offsets_topic(bootstrap: str, timeout: float = 60.0) -> None:
    """Kafka makes __consumer_offsets on the first FindCoordinator (kbroker at start-up): ask until a
    group coordinator is known, so that both brokers have it."""
    import time

    from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
    from kbroker.tests.integration.wire import Wire

    wire = Wire(bootstrap, client_id="await-offsets-topic")
    try:
        deadline = time.monotonic() + timeout
        while True:
            answer = wire.call(10, 4, FindCoordinatorRequest(coordinator_keys=["reference"]))
            if answer.coordinators[0].error_code == 0:
                return
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
    finally:
        wire.close()


def await_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Until a Metadata answer lists the topic with leaders for all its partitions: Kafka's CreateTopics
    answers before its broker's metadata cache has the topic, and a client asking at once is told
    UNKNOWN_TOPIC_OR_PARTITION (and logs it)."""
    import time

    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from kbroker.tests.integration.wire import Wire

    wire = Wire(bootstrap, client_id="await-topic")
    try:
        deadline = time.monotonic() + timeout
        while True:
            (answer,) = wire.call(3, 12, MetadataRequest([MetadataRequestTopic(name=topic)], False, False, False)).topics
            if answer.error_code == 0 and answer.partitions and all(p.leader_id >= 0 for p in answer.partitions):
                return
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)
    finally:
        wire.close()


def kbroker_like_kafka(data_dir: Path, *extra: str) -> BrokerProcess:
    """A kbroker set up as KafkaProcess sets up Kafka: PLAINTEXT listener on a free loopback port,
    advertised as such, node id 1, no initial rebalance delay (kafka.py SINGLE_NODE); on another port
    if another session's process took the first one meanwhile (free_port's race)."""
    for attempt in range(3):
        port = free_port()
        listener = f"PLAINTEXT://127.0.0.1:{port}"
        try:
            return BrokerProcess(data_dir, "--listeners", listener, "--advertised-listeners", listener, "--node-id",
                                 "1", "--group-initial-rebalance-delay-ms", "0", *extra, port=port, listen_flag=False)
        except PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@dataclass
class ToolRun:
    """One tool run: exit code, and its stdout and stderr normalised (stack frames dropped from stderr)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.stdout.splitlines()]

    @property
    def err_lines(self) -> list[str]:
        return [line.rstrip() for line in self.stderr.splitlines()]

    def check(self) -> ToolRun:
        assert self.returncode == 0, f"{' '.join(self.args)} exited {self.returncode}:\n{self.stdout}\n{self.stderr}"
        return self


@dataclass
class Side:
    name: str  # "kafka" or "kbroker"
    bootstrap: str
    replacements: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of_kafka(cls, kafka: KafkaProcess) -> Side:
        return cls("kafka", kafka.bootstrap, [(kafka.bootstrap, "<bootstrap>"),
                                              (f"{kafka.host}:{kafka.controller_port}", "<controller>"),
                                              (str(kafka.log_dir), "<log.dirs>"),
                                              (kafka.cluster_id, "<cluster-id>")])

    @classmethod
    def of_kbroker(cls, broker: BrokerProcess) -> Side:
        from kbroker.protocol.messages.metadata_request import MetadataRequest
        from kbroker.tests.integration.wire import Wire

        wire = Wire(broker.bootstrap, client_id="side")
        try:  # the cluster id as clients see it
            cluster_id = wire.call(3, 12, MetadataRequest([], False, False, False)).cluster_id
        finally:
            wire.close()
        return cls("kbroker", broker.bootstrap, [(broker.bootstrap, "<bootstrap>"),
                                                 (str(broker.data_dir), "<log.dirs>"), (cluster_id, "<cluster-id>")])

    def normalise(self, text: str) -> str:
        for old, new in self.replacements:
            text = text.replace(old, new)
        return _LOG_TIME.sub("[<time>] ", text)

    def tool(self, main_class: str, *args: str, bootstrap_flag: str | None = "--bootstrap-server",
             input: str | None = None, timeout: float = 120.0) -> ToolRun:
        """Run a Kafka tool against this side: `--bootstrap-server <this side>` first, unless the flag is
        None, or an argument is BOOTSTRAP (for tools that take it after a subcommand), which becomes
        this side's address."""
        if BOOTSTRAP in args:
            full = [self.bootstrap if arg == BOOTSTRAP else arg for arg in args]
        else:
            full = ([bootstrap_flag, self.bootstrap] if bootstrap_flag else []) + list(args)
        out: subprocess.CompletedProcess[str] = run_tool(main_class, *full, input=input, timeout=timeout)
        return ToolRun(tuple(full), out.returncode, self.normalise(out.stdout),
                       _STACK_FRAME.sub("", self.normalise(out.stderr)))


Rule = tuple[str, str] | Callable[[str], str]
# Kafka's clients number their default client ids per JVM (adminclient-1, producer-2): in the ToolServer's
# one JVM they count up over the runs, so the number is masked; not the first group of a member id's UUID
# that happens to be all digits (reference-consumer-12345678-b1f7-...), which the member rules mask.
CLIENT_NUMBER = (r"\b(adminclient|producer|consumer)-\d+\b(?!-[0-9a-f]{4}-)", r"\1-N")


def outcome(run: ToolRun, replace: Iterable[Rule] = ()) -> list[str]:
    """What an operator sees of a run, line by line: stdout, then `exit=N`, then stderr prefixed
    `stderr:`; each rule applied to every line: a `(pattern, replacement)` regex, or a function."""
    lines = [*run.lines, f"exit={run.returncode}", *(f"stderr: {line}" for line in run.err_lines if line.strip())]
    for rule in replace:
        if callable(rule):
            lines = [rule(line) for line in lines]
        else:
            lines = [re.sub(rule[0], rule[1], line) for line in lines]
    return lines


class ToolPair:
    """The same command run against both sides, compared as one check of a Level ("tools")."""

    def __init__(self, kafka: Side, kbroker: Side, level: Any, replace: Iterable[Rule] = ()) -> None:
        self.kafka, self.kbroker, self.level = kafka, kbroker, level
        self.replace = [CLIENT_NUMBER, *replace]

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.kafka, self.kbroker

    def run(self, check: str, main_class: str, *args: str, replace: Iterable[Rule] = (), unordered: bool = False,
            **kwargs: Any) -> tuple[ToolRun, ToolRun]:
        """Run on both (Kafka first), record the check, and return both runs for the test's own asserts.
        `unordered`: stdout's lines are compared sorted (records read from several partitions at once)."""
        runs = (self.kafka.tool(main_class, *args, **kwargs), self.kbroker.tool(main_class, *args, **kwargs))
        self.compare(check, *runs, replace=replace, unordered=unordered)
        return runs

    def compare(self, check: str, kafka: ToolRun, kbroker: ToolRun, replace: Iterable[Rule] = (),
                unordered: bool = False) -> None:
        rules = [*self.replace, *replace]
        if unordered:
            kafka, kbroker = (ToolRun(r.args, r.returncode, "".join(sorted(r.stdout.splitlines(keepends=True))),
                                      r.stderr) for r in (kafka, kbroker))
        self.level.compare_lines(check, outcome(kafka, rules), outcome(kbroker, rules))
