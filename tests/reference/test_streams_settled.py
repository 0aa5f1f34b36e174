"""When the streams tests call a Kafka Streams group settled (streams_instances.wait_settled), on Apache
Kafka 4.4 and on kbroker alike: not while the instances merely report the same tasks for 3 s, but once the
broker describes the group Stable with the same tasks per process.

Issue 46's join test once took Kafka 4.4's three instances at 0, 0 and 4 active tasks for its outcome (a
clean-clone CI run; kbroker's gave 1, 1 and 2): the two new instances were RUNNING with no task while the
first still held all four, because it learns that it must give some up only with its next heartbeat, up to
group.streams.heartbeat.interval.ms (5 s) later. Here two wire-level members of a real group hold that
state for longer than 3 s (the first holds its four tasks, the second joined and got none: its tasks are
unreleased) while the instances' reports say so; wait_settled must wait for the revocation and the
second member's tasks, and return the 2 and 2 the group settles at."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.streams_group_heartbeat_request import (
    StreamsGroupHeartbeatRequest, Subtopology, TaskIds, Topology,
)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.streams_instances import Instance, wait_settled

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402 (after the skip)

SGH, FIND_COORDINATOR = 88, 10
COORDINATOR_NOT_READY = (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)
PARTITIONS = 4
TASKS = frozenset(f"0_{p}" for p in range(PARTITIONS))
TRANSIENT_S = 6  # longer than wait_settled's 3 s


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("streams-settled") / "data")
    yield proc
    proc.stop()


class Member:
    """A stream thread on the wire: its member id, epoch and the active tasks it owns."""

    def __init__(self, app: str, source: str) -> None:
        self.app, self.source = app, source
        self.member_id, self.epoch, self.process = str(uuid.uuid4()), 0, str(uuid.uuid4())
        self.active: list[tuple[str, list[int]]] = []

    def beat(self, wire: Wire) -> None:
        deadline = time.monotonic() + 60
        while (answer := self._beat(wire)).error_code in COORDINATOR_NOT_READY and time.monotonic() < deadline:
            # A fresh Kafka node creates __consumer_offsets when a coordinator is first looked for, then loads it.
            wire.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[self.app]))
            time.sleep(0.2)
        assert answer.error_code == 0, answer.error_message
        self.epoch = answer.member_epoch
        if answer.active_tasks is not None:
            self.active = sorted((t.subtopology_id, sorted(t.partitions)) for t in answer.active_tasks)

    def _beat(self, wire: Wire):
        joining = self.epoch == 0
        return wire.call(SGH, 1, StreamsGroupHeartbeatRequest(
            group_id=self.app, member_id=self.member_id, member_epoch=self.epoch, endpoint_information_epoch=0,
            rebalance_timeout_ms=300_000 if joining else -1, process_id=self.process if joining else None,
            topology=Topology(epoch=0, subtopologies=[Subtopology(subtopology_id="0", source_topics=[self.source])])
            if joining else None,
            active_tasks=[TaskIds(subtopology_id=s, partitions=p) for s, p in self.active],
            standby_tasks=[], warmup_tasks=[]))

    def reported(self) -> dict:
        """What a Kafka Streams instance running this member prints (StreamsInstance.java's status line)."""
        return {"state": "RUNNING", "active": sorted(f"{s}_{p}" for s, ps in self.active for p in ps),
                "standby": []}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("broker", ["kafka", "kbroker"])
def test_an_instance_running_without_its_unreleased_tasks_is_not_a_settled_group(broker, request, tmp_path):
    bootstrap = request.getfixturevalue("kafka_reference" if broker == "kafka" else "kbroker").bootstrap
    app = f"sst-{uuid.uuid4().hex[:6]}"
    source = f"{app}-in"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(source, PARTITIONS, 1)]).values():
        f.result(60)
    wire = Wire(bootstrap, client_id="streams-settled")
    first, second = Member(app, source), Member(app, source)
    deadline = time.monotonic() + 60
    while sum(len(ps) for _, ps in first.active) < PARTITIONS and time.monotonic() < deadline:
        first.beat(wire)  # past the initial rebalance delay (3 s on both brokers), it gets all four tasks
        time.sleep(0.5)
    assert sum(len(ps) for _, ps in first.active) == PARTITIONS
    second.beat(wire)  # joins: its target is two of the first's tasks, unreleased, so it gets none yet
    assert second.active == []
    instances = [Instance([], tmp_path / f"state-{i}", tmp_path / f"instance-{i}.log") for i in range(2)]
    for instance, member in zip(instances, (first, second)):
        instance.latest = member.reported()  # the instances' view: all four on the first, RUNNING both

    outcome: dict = {}

    def wait() -> None:
        try:
            outcome["settled"], _ = wait_settled(instances, "two members", bootstrap, app, standbys=False,
                                                 tasks=TASKS)
        except BaseException as e:  # noqa: BLE001 (reported by the assertion below)
            outcome["error"] = e

    waiting = threading.Thread(target=wait, daemon=True)
    waiting.start()
    time.sleep(TRANSIENT_S)  # the first member's next heartbeat is this late: the reports stay as they are
    deadline = time.monotonic() + 60
    while waiting.is_alive() and time.monotonic() < deadline:
        for instance, member in zip(instances, (first, second)):
            member.beat(wire)  # the first gives up two tasks, the second then gets them
            instance.latest = member.reported()
        time.sleep(0.5)
    waiting.join(60)
    wire.close()
    assert "settled" in outcome, outcome
    assert outcome["settled"]["active_per_instance"] == [2, 2]
