"""KIP-848 consumer groups on the wire, with kbroker's own codec over plain sockets against a real
broker process: the error answers clients hide (INVALID_REQUEST, INVALID_REGULAR_EXPRESSION,
UNSUPPORTED_ASSIGNOR, FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP)
and the shared group APIs seeing a consumer group."""

from __future__ import annotations

import uuid

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from kbroker.protocol.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from kbroker.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kbroker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kbroker.protocol.messages.list_groups_request import ListGroupsRequest
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

CGH, CGD = 68, 69
TOPIC = "cg-wire"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("cg-wire") / "data", "--num-partitions", "4")
    yield proc
    proc.stop()


@pytest.fixture
def wire(broker):
    w = Wire(broker.bootstrap, client_id="cg-wire")
    # auto-create the topic through Metadata
    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic

    w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True))
    yield w
    w.close()


def hb(wire, group, member, epoch, version=1, **kw):
    fields = dict(group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                  server_assignor=None, topic_partitions=None)
    if epoch == 0:
        fields.update(rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC], topic_partitions=[])
    fields.update(kw)
    return wire.call(CGH, version, ConsumerGroupHeartbeatRequest(**fields))


def test_join_heartbeat_leave_and_the_errors_on_the_way(wire):
    group, member = f"cgw-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    r = hb(wire, group, member, 0)
    # a new group starts at epoch 1 (KAFKA-20268): the first assignment is epoch 2
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, member, 2, 5000)
    assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
    steady = hb(wire, group, member, 2)
    assert steady.error_code == 0 and steady.assignment is None  # nothing changed: no assignment
    assert hb(wire, group, member, 7).error_code == E.FENCED_MEMBER_EPOCH
    assert hb(wire, group, str(uuid.uuid4()), 2).error_code == E.UNKNOWN_MEMBER_ID
    assert hb(wire, "", member, 0).error_code == E.INVALID_REQUEST
    bad = hb(wire, group, "", 0)
    assert bad.error_code == E.INVALID_REQUEST and "MemberId" in bad.error_message  # v1: the client's own id
    assert hb(wire, group, "x", 0, subscribed_topic_names=None, subscribed_topic_regex="(oops").error_code \
        == E.INVALID_REGULAR_EXPRESSION
    assert hb(wire, group, "x", 0, server_assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    v0 = hb(wire, f"cgw-{uuid.uuid4().hex[:6]}", "", 0, version=0)
    assert v0.error_code == 0 and v0.member_id  # v0: the coordinator names the member
    left = hb(wire, group, member, -1)
    assert (left.error_code, left.member_epoch) == (0, -1)


def test_offsets_with_member_epochs_and_the_shared_apis(wire):
    group, member = f"cgw-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    epoch = hb(wire, group, member, 0).member_epoch

    def commit(e, version=9):
        return wire.call(8, version, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=e, member_id=member, group_instance_id=None,
            topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[OffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])],
        )).topics[0].partitions[0].error_code

    assert commit(epoch) == 0
    assert commit(epoch + 1) == E.STALE_MEMBER_EPOCH
    fetch = wire.call(9, 9, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
        group_id=group, member_id=member, member_epoch=epoch + 3, topics=None)], require_stable=True))
    assert fetch.groups[0].error_code == E.STALE_MEMBER_EPOCH
    fetch = wire.call(9, 9, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
        group_id=group, member_id=member, member_epoch=epoch, topics=None)], require_stable=True))
    assert fetch.groups[0].topics[0].partitions[0].committed_offset == 5

    listed = wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["consumer"])).groups
    mine = [g for g in listed if g.group_id == group]
    assert [(g.group_type, g.group_state, g.protocol_type) for g in mine] == [("consumer", "Stable", "consumer")]
    assert not [g for g in wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["classic"])).groups
                if g.group_id == group]
    described = wire.call(15, 5, DescribeGroupsRequest(groups=[group])).groups[0]
    assert (described.error_code, described.group_state) == (0, "Dead")  # not a classic group (v6+: not found)
    d = wire.call(CGD, 1, ConsumerGroupDescribeRequest(group_ids=[group, "cgw-none"])).groups
    assert (d[0].error_code, d[0].group_state, d[0].assignor_name, d[0].members[0].member_type) == (
        0, "Stable", "uniform", 1)
    assert d[0].members[0].assignment.topic_partitions[0].topic_name == TOPIC
    assert d[1].error_code == E.GROUP_ID_NOT_FOUND
    assert wire.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code == E.NON_EMPTY_GROUP
    hb(wire, group, member, -1)
    assert wire.call(16, 5, ListGroupsRequest(states_filter=["Empty"], types_filter=[])).groups
    assert wire.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code == 0
    assert wire.call(CGD, 0, ConsumerGroupDescribeRequest(group_ids=[group])).groups[0].error_code \
        == E.GROUP_ID_NOT_FOUND


def test_odd_heartbeats_get_answers_and_the_broker_carries_on(wire):
    from kbroker.protocol.messages.consumer_group_heartbeat_request import TopicPartitions

    group, member = f"cgw-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    epoch = hb(wire, group, member, 0).member_epoch
    # owned partitions of a topic id nobody knows, negative and huge partition numbers: ignored
    odd = [TopicPartitions(topic_id=uuid.uuid4(), partitions=[-5, 2**31 - 1])]
    r = hb(wire, group, member, epoch, topic_partitions=odd)
    assert r.error_code == 0 and r.member_epoch == epoch
    # a pathological pattern for a backtracking engine is linear in RE2
    r = hb(wire, group, member, epoch, subscribed_topic_regex="(a+)+$" * 50, rebalance_timeout_ms=30_000)
    # a new regex is resolved asynchronously, as Kafka resolves it: the epoch moves with its resolution
    assert r.error_code == 0 and r.member_epoch >= epoch
    assert hb(wire, f"cgw-{uuid.uuid4().hex[:6]}", member, -1).error_code == E.GROUP_ID_NOT_FOUND
    assert hb(wire, group, member, r.member_epoch).error_code == 0  # still served


def test_steady_heartbeats_see_partitions_added_to_their_topic(wire):
    """Steady heartbeats take the coordinator's fast path, which keeps its metadata check while the
    topics image is the same: CreatePartitions makes a new image, so the next steady heartbeat bumps
    the group epoch and hands out the new partitions, as the full path does."""
    from kbroker.protocol.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic

    topic = f"cgw-grow-{uuid.uuid4().hex[:6]}"
    wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
    group, member = f"cgw-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    joined = hb(wire, group, member, 0, subscribed_topic_names=[topic])
    assert joined.error_code == 0 and sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
    for _ in range(3):
        steady = hb(wire, group, member, joined.member_epoch)
        assert (steady.error_code, steady.member_epoch, steady.assignment) == (0, joined.member_epoch, None)
    grown = wire.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic(topic, 6, None)], timeout_ms=5_000))
    assert grown.results[0].error_code == 0
    bumped = hb(wire, group, member, joined.member_epoch)
    assert bumped.error_code == 0 and bumped.member_epoch == joined.member_epoch + 1
    assert sorted(bumped.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3, 4, 5]
    again = hb(wire, group, member, bumped.member_epoch)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, bumped.member_epoch, None)
