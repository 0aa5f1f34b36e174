"""Streams groups (KIP-1071) on the wire, with kbroker's own codec over plain sockets against a real
broker process: StreamsGroupHeartbeat with a word count's topology (internal topics reported missing,
then created by the broker; tasks assigned), StreamsGroupDescribe, the shared group APIs seeing a
streams group (ListGroups' type filter, DescribeGroups, DeleteGroups), and a restart replaying the
group from `__consumer_offsets`."""

from __future__ import annotations

import json
import uuid

import pytest

from kbroker.broker.cli import main as cli_main
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kbroker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kbroker.protocol.messages.list_groups_request import ListGroupsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.streams_group_describe_request import StreamsGroupDescribeRequest
from kbroker.protocol.messages.streams_group_heartbeat_request import (
    KeyValue,
    StreamsGroupHeartbeatRequest,
    Subtopology,
    TaskIds,
    TopicInfo,
    Topology,
)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

SGH, SGD = 88, 89
SOURCE = "streams-words"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("streams-wire") / "data", "--num-partitions", "2",
                         "--group-streams-initial-rebalance-delay-ms", "0",
                         "--group-streams-assignment-interval-ms", "0")
    yield proc
    proc.stop()


def topology(app: str) -> Topology:
    repartition, changelog = f"{app}-counts-repartition", f"{app}-counts-changelog"
    return Topology(epoch=0, subtopologies=[
        Subtopology(subtopology_id="0", source_topics=[SOURCE], repartition_sink_topics=[repartition]),
        Subtopology(subtopology_id="1", repartition_source_topics=[TopicInfo(name=repartition)],
                    state_changelog_topics=[TopicInfo(name=changelog, topic_configs=[
                        KeyValue(key="cleanup.policy", value="compact")])]),
    ])


def connect(broker) -> Wire:
    w = Wire(broker.bootstrap, client_id="streams-wire")
    w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=SOURCE)], allow_auto_topic_creation=True))
    return w


def hb(wire, group, member, epoch, *, owned=None, top=None, version=1):
    return wire.call(SGH, version, StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
        rebalance_timeout_ms=300_000 if epoch == 0 else -1, topology=top,
        process_id=str(uuid.uuid4()) if epoch == 0 else None,
        active_tasks=[] if epoch == 0 else None if owned is None else [TaskIds(subtopology_id=s, partitions=p)
                                                                       for s, p in owned],
        standby_tasks=[] if owned is not None or epoch == 0 else None,
        warmup_tasks=[] if owned is not None or epoch == 0 else None))


def tasks(answer) -> list[tuple[str, list[int]]]:
    return [(t.subtopology_id, sorted(t.partitions)) for t in answer.active_tasks or []]


def test_a_word_count_gets_its_internal_topics_and_tasks_and_survives_a_restart(broker, capsys):
    wire = connect(broker)
    app, a = f"wc-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    first = hb(wire, app, a, 0, top=topology(app))
    assert (first.error_code, first.member_id, first.member_epoch) == (0, a, 2)  # a new group starts at 1
    assert [s.status_code for s in first.status] == [3]  # MISSING_INTERNAL_TOPICS
    assert tasks(first) == []
    # the broker created them, with the partitions the topology implies
    meta = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=f"{app}-counts-repartition"),
                                                    MetadataRequestTopic(name=f"{app}-counts-changelog")],
                                            allow_auto_topic_creation=False))
    assert [(t.error_code, len(t.partitions)) for t in meta.topics] == [(0, 2), (0, 2)]
    second = hb(wire, app, a, 2, owned=[])
    assert second.status == [] and second.member_epoch == 3
    assert tasks(second) == [("0", [0, 1]), ("1", [0, 1])]
    described = wire.call(SGD, 1, StreamsGroupDescribeRequest(group_ids=[app], include_authorized_operations=False))
    g = described.groups[0]
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (0, "Stable", 3, 3)
    assert [s.subtopology_id for s in g.topology.subtopologies] == ["0", "1"]
    assert [(m.member_id, m.member_epoch) for m in g.members] == [(a, 3)]
    listed = wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["streams"])).groups
    assert [(x.group_id, x.group_state, x.group_type) for x in listed if x.group_id == app] == [
        (app, "Stable", "streams")]
    # the admin CLI finds it by StreamsGroupDescribe and shows the partitions its tasks read
    capsys.readouterr()
    assert cli_main(["group", "describe", app, "--bootstrap-server", broker.bootstrap, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["state"], shown["protocol_type"], shown["protocol"]) == ("Stable", "streams", "sticky")
    assert sorted(shown["members"][0]["assignment"]) == sorted([f"{app}-counts-repartition-0",
                                                                f"{app}-counts-repartition-1", f"{SOURCE}-0", f"{SOURCE}-1"])
    old = wire.call(15, 6, DescribeGroupsRequest(groups=[app])).groups[0]
    assert old.error_code == E.GROUP_ID_NOT_FOUND
    assert wire.call(42, 2, DeleteGroupsRequest(groups_names=[app])).results[0].error_code == E.NON_EMPTY_GROUP
    wire.close()

    broker.restart()
    wire = connect(broker)
    try:
        again = wire.call(SGD, 0, StreamsGroupDescribeRequest(group_ids=[app], include_authorized_operations=False))
        (member,) = again.groups[0].members
        assert (member.member_id, member.member_epoch) == (a, 3)
        assert [(t.subtopology_id, sorted(t.partitions)) for t in member.assignment.active_tasks] == [
            ("0", [0, 1]), ("1", [0, 1])]
        assert hb(wire, app, a, 3, owned=[("0", [0, 1]), ("1", [0, 1])], version=0).error_code == 0
        assert hb(wire, app, a, -1).error_code == 0
        assert wire.call(42, 2, DeleteGroupsRequest(groups_names=[app])).results[0].error_code == 0
        gone = wire.call(SGD, 1, StreamsGroupDescribeRequest(group_ids=[app], include_authorized_operations=False))
        assert (gone.groups[0].error_code, gone.groups[0].error_message) == (
            E.GROUP_ID_NOT_FOUND, f"Streams group {app} not found.")
    finally:
        wire.close()


def test_heartbeat_refusals(broker):
    wire = connect(broker)
    try:
        assert hb(wire, "", str(uuid.uuid4()), 0, top=topology("x")).error_code == E.INVALID_REQUEST
        assert hb(wire, "wc-x", "", 0, top=topology("x")).error_code == E.INVALID_REQUEST
        assert hb(wire, "wc-x", str(uuid.uuid4()), 0).error_code == E.INVALID_REQUEST  # no topology
        unknown = hb(wire, f"wc-{uuid.uuid4().hex[:6]}", str(uuid.uuid4()), 5)
        assert unknown.error_code == E.GROUP_ID_NOT_FOUND
    finally:
        wire.close()
