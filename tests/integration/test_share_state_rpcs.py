"""The share coordinator's state RPCs (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87) on the wire, as
Kafka 4.4's ShareCoordinatorService and ShareCoordinatorShard answer them (read from its source):
`serve --nodes 3`, where the node leading a key's `__share_group_state` partition serves it and the
others answer NOT_COORDINATOR; the state written is read back (a write's batches laid over the
state), a leader epoch or state epoch below the last recorded one is fenced and changes nothing; and
under the ACL authorizer a principal without CLUSTER_ACTION on the cluster is refused every one.
ApiVersions lists them with Kafka 4.4's versions (protocol/kafka_releases.json, asked of 4.4)."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.broker.coordinators.share_state import kafka_uuid
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.kafka_releases import kafka_release
from kbroker.protocol.messages import (
    delete_share_group_state_request as dlt,
    initialize_share_group_state_request as ini,
    read_share_group_state_request as rd,
    read_share_group_state_summary_request as summ,
    write_share_group_state_request as wr,
)
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.tests.integration.broker_process import BrokerProcess, free_ports
from kbroker.tests.integration.wire import Wire

NODES, FIRST_ID, GROUP, TOPIC = 3, 1, "state-rpc-group", "state-rpc"
STATE_APIS = (83, 84, 85, 86, 87)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    port = free_ports(NODES)
    broker = BrokerProcess(tmp_path_factory.mktemp("state-rpc") / "data", "--nodes", str(NODES), "--profile", "test",
                           port=port)
    wires = [Wire(f"127.0.0.1:{port + k}") for k in range(NODES)]
    wires[0].call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name=TOPIC, num_partitions=3, replication_factor=3, assignments=[], configs=[])], timeout_ms=10000))
    md = wires[0].call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False))
    yield wires, md.topics[0].topic_id
    for wire in wires:
        wire.close()
    broker.stop()


def coordinator(wire: Wire, group: str, topic_id: uuid.UUID, partition: int) -> int:
    """The node FindCoordinator (key type SHARE) names for the key, once `__share_group_state` exists."""
    key = f"{group}:{kafka_uuid(topic_id)}:{partition}"
    deadline = time.monotonic() + 30
    while True:
        found = wire.call(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key])).coordinators[0]
        if found.error_code == 0:
            return found.node_id
        assert found.error_code == E.COORDINATOR_NOT_AVAILABLE and time.monotonic() < deadline, found
        time.sleep(0.1)


def initialize(wire, topic_id, partition, state_epoch, start, group=GROUP):
    answer = wire.call(83, 0, ini.InitializeShareGroupStateRequest(group_id=group, topics=[ini.InitializeStateData(
        topic_id, [ini.PartitionData(partition, state_epoch, start)])]))
    return answer.results[0].partitions[0]


def write(wire, topic_id, partition, state_epoch, leader_epoch, start, batches, group=GROUP):
    answer = wire.call(85, 1, wr.WriteShareGroupStateRequest(group_id=group, topics=[wr.WriteStateData(topic_id, [
        wr.PartitionData(partition, state_epoch, leader_epoch, start, -1, [wr.StateBatch(*b) for b in batches])])]))
    return answer.results[0].partitions[0]


def read(wire, topic_id, partition, leader_epoch=-1, group=GROUP):
    answer = wire.call(84, 0, rd.ReadShareGroupStateRequest(group_id=group, topics=[rd.ReadStateData(
        topic_id, [rd.PartitionData(partition, leader_epoch)])]))
    return answer.results[0].partitions[0]


def summary(wire, topic_id, partition, leader_epoch=-1, group=GROUP):
    answer = wire.call(87, 1, summ.ReadShareGroupStateSummaryRequest(group_id=group, topics=[summ.ReadStateSummaryData(
        topic_id, [summ.PartitionData(partition, leader_epoch)])]))
    return answer.results[0].partitions[0]


def delete(wire, topic_id, partition, group=GROUP):
    answer = wire.call(86, 0, dlt.DeleteShareGroupStateRequest(group_id=group, topics=[dlt.DeleteStateData(
        topic_id, [dlt.PartitionData(partition)])]))
    return answer.results[0].partitions[0]


def batches(result) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def test_api_versions_lists_the_state_apis_as_kafka_4_4(cluster) -> None:
    wires, _ = cluster
    listed = {k.api_key: (k.min_version, k.max_version)
              for k in wires[0].call(18, 3, ApiVersionsRequest(client_software_name="t",
                                                               client_software_version="1")).api_keys}
    reference = kafka_release("4.4").apis
    assert {k: listed.get(k) for k in STATE_APIS} == {k: tuple(reference[k]) for k in STATE_APIS}


def test_only_the_state_partitions_leader_serves_a_key(cluster) -> None:
    wires, topic_id = cluster
    node = coordinator(wires[0], GROUP, topic_id, 0)
    leader, other = wires[node - FIRST_ID], wires[node % NODES]
    for call in (lambda w: initialize(w, topic_id, 0, 0, 0), lambda w: read(w, topic_id, 0),
                 lambda w: write(w, topic_id, 0, 0, 0, 0, []), lambda w: delete(w, topic_id, 0),
                 lambda w: summary(w, topic_id, 0)):
        refused = call(other)
        assert (refused.error_code, refused.error_message) == (E.NOT_COORDINATOR, "This is not the correct coordinator.")
    # no state yet: start offset -1, state epoch 0 (Kafka's PartitionFactory), from its coordinator
    nothing = read(leader, topic_id, 0)
    assert (nothing.error_code, nothing.start_offset, nothing.state_epoch, batches(nothing)) == (0, -1, 0, [])


def test_written_state_is_read_back_and_stale_epochs_are_fenced(cluster) -> None:
    wires, topic_id = cluster
    partition = 1
    leader = wires[coordinator(wires[0], GROUP, topic_id, partition) - FIRST_ID]
    assert initialize(leader, topic_id, partition, 1, 5).error_code == 0
    started = read(leader, topic_id, partition, leader_epoch=0)
    assert (started.error_code, started.start_offset, started.state_epoch, batches(started)) == (0, 5, 1, [])
    # the data leader of epoch 2 writes: acknowledged 5-7, 8 acquired once and given back
    assert write(leader, topic_id, partition, 1, 2, -1, [(5, 7, 2, 1), (8, 8, 0, 1)]).error_code == 0
    # a later write lays its batches over those (8 acknowledged now) and moves the start
    assert write(leader, topic_id, partition, 1, 2, 6, [(8, 8, 2, 1)]).error_code == 0
    state = read(leader, topic_id, partition, leader_epoch=2)
    assert (state.start_offset, state.state_epoch, batches(state)) == (6, 1, [(6, 7, 2, 1), (8, 8, 2, 1)])
    # a deposed data leader (epoch 1) writes late: fenced, nothing changes; so is a stale state epoch
    late = write(leader, topic_id, partition, 1, 1, 9, [(9, 9, 4, 1)])
    assert late.error_code == E.FENCED_LEADER_EPOCH
    assert write(leader, topic_id, partition, 0, 2, 9, [(9, 9, 4, 1)]).error_code == E.FENCED_STATE_EPOCH
    assert initialize(leader, topic_id, partition, 0, 0).error_code == E.FENCED_STATE_EPOCH
    assert read(leader, topic_id, partition, leader_epoch=1).error_code == E.FENCED_LEADER_EPOCH
    described = summary(leader, topic_id, partition)
    assert (described.error_code, described.start_offset, described.state_epoch, described.leader_epoch,
            described.delivery_complete_count) == (0, 6, 1, 2, 3)
    # a new data leader (epoch 3) reads it, and the old one's write is refused from then on
    assert batches(read(leader, topic_id, partition, leader_epoch=3)) == [(6, 7, 2, 1), (8, 8, 2, 1)]
    assert write(leader, topic_id, partition, 1, 2, -1, []).error_code == E.FENCED_LEADER_EPOCH
    # deleted: no state any more
    assert delete(leader, topic_id, partition).error_code == 0
    gone = read(leader, topic_id, partition)
    assert (gone.error_code, gone.start_offset, batches(gone)) == (0, -1, [])


def test_bad_keys_are_refused(cluster) -> None:
    wires, topic_id = cluster
    leader = wires[coordinator(wires[0], GROUP, topic_id, 2) - FIRST_ID]
    unknown = uuid.uuid4()
    node = coordinator(wires[0], GROUP, unknown, 0)
    assert read(wires[node - FIRST_ID], unknown, 0).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert write(wires[node - FIRST_ID], unknown, 0, 0, 0, 0, []).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert read(leader, topic_id, -1).error_code == E.INVALID_REQUEST
    empty = [read(w, topic_id, 2, group="").error_code for w in wires]
    assert empty == [E.INVALID_REQUEST] * NODES
