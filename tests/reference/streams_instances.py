"""Kafka Streams 4.4 instances, each in its own JVM (tests/clients/java/StreamsInstance.java: the word
count on the streams protocol under exactly-once v2), started, killed and stopped by a test or a benchmark,
and the assignment they settle on. Shared by tests/reference/test_streams_failover.py and
bench/streams_groups.py."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference import client_matrix as cm

TASKS = {"0_0", "0_1", "1_0", "1_1"}  # the word count's two subtopologies of two partitions each
STATEFUL = {"1_0", "1_1"}  # the counting subtopology: only its tasks have state, and so standbys
WAIT_S = 240
STREAMS_GROUP_DESCRIBE = 89


class Instance:
    """One Kafka Streams instance's JVM and the last status line it printed."""

    def __init__(self, command: list[str], state_dir: Path, log: Path) -> None:
        self.command, self.state_dir, self.log = command, state_dir, log
        self.latest: dict | None = None
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.latest = None
        err = open(self.log, "a")
        self.proc = subprocess.Popen([*self.command, str(self.state_dir)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err, text=True)
        err.close()
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("S ") and proc is self.proc:
                self.latest = json.loads(line[2:])

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(30)


def java_command(libs: Path, workdir: Path) -> list[str]:
    """The command that runs one instance, less its arguments (bootstrap, application id, input, output,
    state directory)."""
    classes = cm.java_classes(libs)
    log4j = workdir / "log4j2.properties"
    log4j.write_text(cm.LOG4J_STDERR)
    return [shutil.which("java") or "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Xshare:auto", f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{classes}:{libs}/*", "StreamsInstance"]


def assignment(instances: list[Instance], standbys: bool = True, tasks: frozenset[str] = frozenset(TASKS)
               ) -> tuple | None:
    """The instances' tasks if the group is settled (every instance RUNNING, every task of `tasks` (the word
    count's by default) active on exactly one instance, and with `standbys` every stateful task's one standby
    on another instance than its active), else None."""
    statuses = [i.latest for i in instances]
    if any(s is None or s["state"] != "RUNNING" for s in statuses):
        return None
    active = [set(s["active"]) for s in statuses]  # type: ignore[index]
    standby = [set(s["standby"]) for s in statuses]  # type: ignore[index]
    if sorted(t for a in active for t in a) != sorted(tasks):
        return None
    if sorted(t for s in standby for t in s) != (sorted(STATEFUL) if standbys else []):
        return None
    if any(a & s for a, s in zip(active, standby)):
        return None
    return tuple((tuple(sorted(a)), tuple(sorted(s))) for a, s in zip(active, standby))


def described(wire: Wire, group: str) -> tuple | None:
    """The group's tasks by process (active, standby) as the broker describes them (StreamsGroupDescribe),
    if it says the group is Stable: its target assignment computed for the group's epoch and every member
    reconciled to it (nothing pending revocation, nothing unreleased); else None."""
    from kbroker.protocol.messages.streams_group_describe_request import StreamsGroupDescribeRequest

    group_described = wire.call(STREAMS_GROUP_DESCRIBE, 0, StreamsGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False)).groups[0]
    if group_described.error_code or group_described.group_state != "Stable":
        return None
    by_process: dict[str, tuple[set[str], set[str]]] = {}
    for m in group_described.members:
        active, standby = by_process.setdefault(m.process_id, (set(), set()))
        active.update(f"{t.subtopology_id}_{p}" for t in m.assignment.active_tasks for p in t.partitions)
        standby.update(f"{t.subtopology_id}_{p}" for t in m.assignment.standby_tasks for p in t.partitions)
    return tuple(sorted((tuple(sorted(a)), tuple(sorted(s))) for a, s in by_process.values()))


def wait_settled(instances: list[Instance], what: str, bootstrap: str, group: str, standbys: bool = True,
                 tasks: frozenset[str] = frozenset(TASKS)) -> tuple[dict, float]:
    """Wait until the same settled assignment is seen for 3 s; what it is, and when (time.monotonic())
    it was first seen.

    Settled: the instances report it (every one RUNNING) and the broker agrees (`described`: the group
    Stable, its processes holding the same tasks). The instances alone can show for seconds an assignment
    that is not the group's: a newly joined instance is RUNNING with no task while the tasks of its target
    are still held by another instance, which learns that it must give them up only with its next
    heartbeat, up to group.streams.heartbeat.interval.ms (5 s) later. A clean-clone CI run saw Kafka 4.4's
    three instances sit at 0, 0 and 4 active tasks for more than 3 s that way (issue 46)."""
    deadline, seen, since = time.monotonic() + WAIT_S, None, 0.0
    wire = Wire(bootstrap, client_id="streams-instances-settled")
    try:
        while time.monotonic() < deadline:
            now = assignment(instances, standbys, tasks)
            if now is not None and described(wire, group) != tuple(sorted(now)):
                now = None
            if now is None or now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= 3:
                # Which instance holds the standbys is not compared: Kafka's assignor breaks ties between
                # equally loaded processes in the order of a HashMap of their random ids (StickyTaskAssignor's
                # PriorityQueue by load alone), so two runs on Kafka itself place them differently.
                print(f"{what}: {now}", flush=True)
                return {"active_per_instance": sorted(len(a) for a, _ in now),
                        "standby_tasks": sorted(t for _, s in now for t in s),
                        "standby_never_beside_its_active": all(not set(a) & set(s) for a, s in now)}, since
            time.sleep(0.25)
    finally:
        wire.close()
    raise AssertionError(f"{what}: no settled assignment in {WAIT_S} s; last statuses: "
                         f"{[i.latest for i in instances]}")




def on_both_brokers(work: Path, scenario: Callable[[str, list[str], Path], dict],
                    kafka_config: dict[str, str] | None = None, kbroker_args: tuple[str, ...] = ()) -> dict:
    """`scenario(bootstrap, java command, its work directory)` run on Apache Kafka 4.4, then on kbroker,
    each started for it and stopped after; what each observed, by broker (printed too)."""
    from kbroker.tests.integration.broker_process import BrokerProcess
    from kbroker.tests.reference.kafka import KafkaProcess, require_kafka_libs

    libs = require_kafka_libs()
    java = java_command(libs, work)
    results = {}
    kafka = KafkaProcess(work / "kafka", kafka_config)
    try:
        (work / "on-kafka").mkdir()
        results["kafka"] = scenario(kafka.bootstrap, java, work / "on-kafka")
    finally:
        kafka.stop()
    broker = BrokerProcess(work / "kbroker", *kbroker_args)
    try:
        (work / "on-kbroker").mkdir()
        results["kbroker"] = scenario(broker.bootstrap, java, work / "on-kbroker")
    finally:
        broker.stop()
    print(json.dumps(results, indent=1), flush=True)
    return results
