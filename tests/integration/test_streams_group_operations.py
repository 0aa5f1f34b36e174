"""Streams groups (KIP-1071) as an operator sees them, against a real broker process over plain sockets:
the group's own configs (IncrementalAlterConfigs on the GROUP resource: the standby count, the
heartbeat interval) applied to a live group, a static member stepping out (epoch -2) and its instance
id coming back under a new member id across a restart, `kbroker group history` of the group, and the
group's records in `__consumer_offsets` read back by the pipeline's decoder."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from kbroker.broker.cli import main as cli_main
from kbroker.pipeline import decode
from kbroker.pipeline.logdir import list_segments
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kbroker.protocol.messages.streams_group_heartbeat_request import StreamsGroupHeartbeatRequest, TaskIds
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_streams_group_wire import connect, topology

SGH = 88
GROUP_RESOURCE, SET = 32, 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    admin_port = free_port()
    proc = BrokerProcess(tmp_path_factory.mktemp("streams-ops") / "data", "--num-partitions", "2",
                         "--group-streams-initial-rebalance-delay-ms", "0",
                         "--group-streams-assignment-interval-ms", "0",
                         "--metrics-listen", f"127.0.0.1:{admin_port}")
    proc.admin_url = f"http://127.0.0.1:{admin_port}"
    yield proc
    proc.stop()


class Member:
    """One stream thread of a Kafka Streams instance: its id, epoch and the tasks it owns."""

    def __init__(self, app: str, process: str, instance: str | None = None) -> None:
        self.app, self.process, self.instance = app, process, instance
        self.member_id, self.epoch = str(uuid.uuid4()), 0
        self.active: list[tuple[str, list[int]]] = []
        self.standby: list[tuple[str, list[int]]] = []

    def beat(self, wire, epoch: int | None = None):
        joining = self.epoch == 0 if epoch is None else epoch == 0
        deadline = time.monotonic() + 60
        while True:  # a restarted broker answers COORDINATOR_LOAD_IN_PROGRESS until it has replayed the group
            answer = self._beat(wire, epoch, joining)
            if answer.error_code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            if answer.active_tasks is not None:
                self.active = sorted((t.subtopology_id, sorted(t.partitions)) for t in answer.active_tasks)
                self.standby = sorted((t.subtopology_id, sorted(t.partitions)) for t in answer.standby_tasks or [])
        return answer

    def _beat(self, wire, epoch: int | None, joining: bool):
        return wire.call(SGH, 1, StreamsGroupHeartbeatRequest(
            group_id=self.app, member_id=self.member_id, member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance, endpoint_information_epoch=0,
            rebalance_timeout_ms=300_000 if joining else -1, topology=topology(self.app) if joining else None,
            process_id=self.process if joining else None,
            active_tasks=[] if joining else [TaskIds(subtopology_id=s, partitions=p) for s, p in self.active],
            standby_tasks=[] if joining else [TaskIds(subtopology_id=s, partitions=p) for s, p in self.standby],
            warmup_tasks=[]))


def settle(wire, members: list[Member], rounds: int = 6) -> None:
    """Heartbeat every member until the group is reconciled (revocations reported, tasks released)."""
    for _ in range(rounds):
        for m in members:
            assert m.beat(wire).error_code == 0


def tasks_of(pairs: list[tuple[str, list[int]]]) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in pairs for p in ps}


def new_app() -> str:
    return f"ops-{uuid.uuid4().hex[:6]}"


def alter_group(wire, group: str, **configs: str) -> None:
    answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group,
        configs=[AlterableConfig(name=n.replace("_", "."), config_operation=SET, value=v)
                 for n, v in configs.items()])], validate_only=False)).responses[0]
    assert answer.error_code == 0, answer.error_message


def test_the_groups_own_standby_count_and_heartbeat_interval_apply_to_the_live_group(broker, capsys):
    wire = connect(broker)
    try:
        app = new_app()
        a, b = Member(app, "process-a"), Member(app, "process-b")
        a.beat(wire)  # the internal topics are created with this one
        settle(wire, [a, b])
        assert not a.standby and not b.standby
        every = tasks_of(a.active) | tasks_of(b.active)
        assert len(every) == 4 and not tasks_of(a.active) & tasks_of(b.active)
        alter_group(wire, app, streams_num_standby_replicas="1", streams_heartbeat_interval_ms="6000")
        answer = b.beat(wire)
        assert answer.heartbeat_interval_ms == 6000
        settle(wire, [a, b])
        # each process holds a standby of every stateful task (the counting subtopology 1) the other runs
        counting = {("1", 0), ("1", 1)}
        assert tasks_of(a.standby) == tasks_of(b.active) & counting and tasks_of(b.standby) == tasks_of(a.active) & counting
        assert tasks_of(a.standby) | tasks_of(b.standby) == counting
        # `kbroker group describe` shows each member's active and standby tasks as Kafka Streams names them
        capsys.readouterr()
        assert cli_main(["group", "describe", app, "--bootstrap-server", broker.bootstrap, "--json"]) == 0
        shown = {m["member_id"]: m for m in json.loads(capsys.readouterr().out)["members"]}
        for m in (a, b):
            assert shown[m.member_id]["active_tasks"] == sorted(f"{s}_{p}" for s, p in tasks_of(m.active))
            assert shown[m.member_id]["standby_tasks"] == sorted(f"{s}_{p}" for s, p in tasks_of(m.standby))
        assert cli_main(["group", "describe", app, "--bootstrap-server", broker.bootstrap]) == 0
        assert "STANDBY_TASKS" in capsys.readouterr().out
    finally:
        wire.close()


def test_a_static_member_steps_out_and_its_instance_id_takes_its_tasks_back_after_a_restart(broker):
    wire = connect(broker)
    app = new_app()
    a, b = Member(app, "process-a", "instance-a"), Member(app, "process-b", "instance-b")
    try:
        a.beat(wire)
        settle(wire, [a, b])
        a_tasks, b_tasks = tasks_of(a.active), tasks_of(b.active)
        assert a_tasks and b_tasks
        left = a.beat(wire, epoch=-2)
        assert (left.error_code, left.member_epoch) == (0, -2)
        settle(wire, [b])
        assert tasks_of(b.active) == b_tasks  # a's tasks wait for its instance id
    finally:
        wire.close()
    broker.restart()
    wire = connect(broker)
    try:
        again = Member(app, "process-a", "instance-a")
        refused = Member(app, "process-c", "instance-b").beat(wire)
        assert refused.error_code == E.UNRELEASED_INSTANCE_ID  # b still holds its instance id
        back = again.beat(wire)
        assert back.error_code == 0 and tasks_of(again.active) == a_tasks
        assert a.beat(wire).error_code == E.FENCED_INSTANCE_ID  # the old member id is replaced
        settle(wire, [again, b])
        assert tasks_of(again.active) == a_tasks and tasks_of(b.active) == b_tasks
    finally:
        wire.close()


def test_group_history_shows_a_streams_groups_epochs_and_the_pipeline_reads_its_records(broker, capsys):
    wire = connect(broker)
    app = new_app()
    a, b = Member(app, "process-a"), Member(app, "process-b")
    try:
        a.beat(wire)
        settle(wire, [a, b])
        assert b.beat(wire, epoch=-1).error_code == 0
    finally:
        wire.close()
    capsys.readouterr()
    assert cli_main(["group", "history", app, "--admin-url", broker.admin_url, "--json"]) == 0
    history = json.loads(capsys.readouterr().out)["rebalances"]
    assert {e["group_type"] for e in history} == {"streams"}
    assert [e["reason"] for e in history if e["members_in"] or e["members_out"]] == [
        f"member {a.member_id} joined", f"member {b.member_id} joined", f"member {b.member_id} left"]
    epochs = [(e["old_generation"], e["new_generation"]) for e in history]
    assert all(new == old + 1 for old, new in epochs) and epochs == sorted(epochs)
    assert cli_main(["group", "history", app, "--admin-url", broker.admin_url]) == 0
    assert "member_joined" not in capsys.readouterr().out  # the table, not the JSON

    issues: list = []
    rows = [r for seg in list_segments(str(broker.data_dir), {"__consumer_offsets"})
            for r in decode.consumer_offsets_rows(seg, report=issues.append) if r.get("group_id") == app]
    assert not issues
    kinds = {r["record_type"] for r in rows}
    assert {"streams_group_topology_record", "streams_group_metadata_record", "streams_group_member_metadata_record",
            "streams_group_target_assignment_member_record", "streams_group_target_assignment_metadata_record",
            "streams_group_current_member_assignment_record", "streams_group_member_metadata_tombstone"} <= kinds
    group_epochs = [r["generation"] for r in rows if r["record_type"] == "streams_group_metadata_record"]
    assert group_epochs == sorted(group_epochs) and group_epochs[-1] == epochs[-1][1]
    joined = [r["members"][0]["member_id"] for r in rows if r["record_type"] == "streams_group_member_metadata_record"]
    assert {a.member_id, b.member_id} <= set(joined)


def test_the_initial_delays_timer_assigns_the_members_and_the_history_names_who_moved(tmp_path, capsys):
    """As Kafka's computeDelayedTargetAssignment: when group.streams.initial.rebalance.delay.ms is over,
    the coordinator computes the target of every member that joined meanwhile, no heartbeat needed
    (StreamsGroupDescribe shows it), and `kbroker group history` has that assignment as an entry of its
    own naming the members whose targets moved then."""
    from kbroker.protocol.messages.streams_group_describe_request import StreamsGroupDescribeRequest

    admin_port = free_port()
    proc = BrokerProcess(tmp_path / "data", "--num-partitions", "2",
                         "--group-streams-initial-rebalance-delay-ms", "1500",
                         "--metrics-listen", f"127.0.0.1:{admin_port}")
    wire = connect(proc)
    try:
        app = new_app()
        a, b = Member(app, "process-a"), Member(app, "process-b")
        a.beat(wire)
        b.beat(wire)
        assert a.active == [] and b.active == []  # delayed: nothing assigned yet

        def described():
            return wire.call(89, 0, StreamsGroupDescribeRequest(group_ids=[app], include_authorized_operations=False)
                             ).groups[0]

        assert described().assignment_epoch < described().group_epoch
        deadline = time.monotonic() + 30
        while (group := described()).assignment_epoch < group.group_epoch and time.monotonic() < deadline:
            time.sleep(0.2)  # no heartbeat meanwhile: the timer computes it
        assert group.assignment_epoch == group.group_epoch
        targets = {m.member_id: tasks_of([(t.subtopology_id, t.partitions) for t in m.target_assignment.active_tasks])
                   for m in group.members}
        assert all(targets.values()) and len(set().union(*targets.values())) == 4  # 2 subtopologies x 2 partitions
        settle(wire, [a, b])
        assert tasks_of(a.active) | tasks_of(b.active) == set().union(*targets.values())
        capsys.readouterr()
        assert cli_main(["group", "history", app, "--admin-url", f"http://127.0.0.1:{admin_port}", "--json"]) == 0
        history = json.loads(capsys.readouterr().out)["rebalances"]
        over = [e for e in history if e["reason"] == "initial rebalance delay over"]
        assert len(over) == 1 and sorted(over[0]["members_moved"]) == sorted([a.member_id, b.member_id])
        assert over[0]["new_generation"] == group.group_epoch and over[0]["trigger_member"] is None
        joins = [e for e in history if e["members_in"]]
        assert len(joins) == 2 and all(e["members_moved"] == [] for e in joins)  # they moved nobody: delayed
    finally:
        wire.close()
        proc.stop()
