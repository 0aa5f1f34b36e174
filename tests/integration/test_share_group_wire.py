"""Share groups (KIP-932) on the wire, with kbroker's own codec over plain sockets against a real
broker process: ShareGroupHeartbeat and ShareGroupDescribe, the shared group APIs seeing a share group
(ListGroups' type filter, DescribeGroups, DeleteGroups, OffsetCommit), and a restart replaying the
group from `__consumer_offsets`."""

from __future__ import annotations

import uuid

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kbroker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kbroker.protocol.messages.list_groups_request import ListGroupsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

SGH, SGD = 76, 77
TOPIC = "share-wire"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("share-wire") / "data", "--num-partitions", "3")
    yield proc
    proc.stop()


def connect(broker) -> tuple[Wire, uuid.UUID]:
    w = Wire(broker.bootstrap, client_id="share-wire")
    meta = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True))
    return w, meta.topics[0].topic_id


def hb(wire, group, member, epoch, topics=None):
    return wire.call(SGH, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                         rack_id=None, subscribed_topic_names=topics))


def test_members_join_share_partitions_and_the_group_survives_a_restart(broker):
    wire, topic_id = connect(broker)
    group, a, b, c = f"sg-{uuid.uuid4().hex[:6]}", *(str(uuid.uuid4()) for _ in range(3))
    first = hb(wire, group, a, 0, [TOPIC])
    assert (first.error_code, first.member_id, first.member_epoch) == (0, a, 1)
    assert [(t.topic_id, sorted(t.partitions)) for t in first.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
    hb(wire, group, b, 0, [TOPIC])
    hb(wire, group, c, 0, [TOPIC])
    assert hb(wire, group, a, 1).member_epoch == 3
    described = wire.call(SGD, 1, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
    g = described.groups[0]
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (0, "Stable", 3, "simple")
    assert sorted(m.member_id for m in g.members) == sorted([a, b, c])
    assert {m.member_id: m.member_epoch for m in g.members}[a] == 3
    # the shared group APIs see a share group
    listed = wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"])).groups
    assert [(x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed if x.group_id == group] == [
        (group, "share", "Stable", "share")]
    assert not [x for x in wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["consumer"])).groups
                if x.group_id == group]
    old = wire.call(15, 6, DescribeGroupsRequest(groups=[group])).groups[0]
    assert (old.error_code, old.group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")
    assert wire.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code == E.NON_EMPTY_GROUP
    wire.close()

    broker.restart()
    wire, _ = connect(broker)
    try:
        again = wire.call(SGD, 1, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        assert sorted(m.member_id for m in again.groups[0].members) == sorted([a, b, c])
        epochs = {m.member_id: m.member_epoch for m in again.groups[0].members}
        assert hb(wire, group, b, epochs[b]).error_code == 0
        for member in (a, b, c):
            assert hb(wire, group, member, -1).error_code == 0
        assert wire.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code == 0
        gone = wire.call(SGD, 1, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        assert (gone.groups[0].error_code, gone.groups[0].error_message) == (
            E.GROUP_ID_NOT_FOUND, f"Group {group} not found.")  # Kafka 4.4's words (its shareGroup())
    finally:
        wire.close()


def test_heartbeat_refusals(broker):
    wire, _ = connect(broker)
    try:
        assert hb(wire, "", str(uuid.uuid4()), 0, [TOPIC]).error_code == E.INVALID_REQUEST
        assert hb(wire, "sg-x", "", 0, [TOPIC]).error_code == E.INVALID_REQUEST
        unknown = hb(wire, f"sg-{uuid.uuid4().hex[:6]}", str(uuid.uuid4()), 5)
        assert unknown.error_code == E.GROUP_ID_NOT_FOUND
    finally:
        wire.close()


def test_a_groups_session_and_heartbeat_overrides_are_the_coordinators(tmp_path):
    """share.heartbeat.interval.ms and share.session.timeout.ms set on the group (IncrementalAlterConfigs,
    GROUP resource) are what the coordinator uses for it, as Kafka's shareGroupHeartbeatIntervalMs and
    shareGroupSessionTimeoutMs read them: the heartbeat answers the group's interval, the member's
    session is the group's (the coordinator's status says which), another group keeps the broker's."""
    import json
    import urllib.request

    from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                             IncrementalAlterConfigsRequest)
    from kbroker.tests.integration.broker_process import free_port

    admin = free_port()
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1", "--metrics-listen", f"127.0.0.1:{admin}") as b:
        wire, _ = connect(b)
        group, plain = f"ov-{uuid.uuid4().hex[:6]}", f"pl-{uuid.uuid4().hex[:6]}"
        altered = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[
                AlterableConfig(name="share.heartbeat.interval.ms", config_operation=0, value="7000"),
                AlterableConfig(name="share.session.timeout.ms", config_operation=0, value="60000")])],
            validate_only=False))
        assert altered.responses[0].error_code == 0
        assert hb(wire, group, str(uuid.uuid4()), 0, [TOPIC]).heartbeat_interval_ms == 7000
        assert hb(wire, plain, str(uuid.uuid4()), 0, [TOPIC]).heartbeat_interval_ms == 5000  # the broker's

        def status(g: str) -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/v1/groups/{g}", timeout=10) as resp:
                return json.loads(resp.read())

        assert (status(group)["session_timeout_ms"], status(group)["heartbeat_interval_ms"]) == (60000, 7000)
        assert (status(plain)["session_timeout_ms"], status(plain)["heartbeat_interval_ms"]) == (45000, 5000)
        wire.close()
