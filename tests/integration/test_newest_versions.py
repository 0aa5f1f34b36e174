"""The newest versions (Kafka 4.1-4.3): topic ids in Produce v13, OffsetCommit v10 and OffsetFetch v10,
ListOffsets v11, and what kafka-python infers from our ApiVersions answer."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages import list_offsets_request as lo
from kbroker.protocol.messages import metadata_request as md
from kbroker.protocol.messages import offset_commit_request as oc
from kbroker.protocol.messages import offset_fetch_request as of
from kbroker.protocol.messages import produce_request as pr
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("newest") / "data", "--num-partitions", "1")
    yield proc
    proc.stop()


def topic_id(wire: Wire, name: str) -> uuid.UUID:
    r = wire.call(3, 12, md.MetadataRequest(topics=[md.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=True))
    (t,) = r.topics
    assert t.error_code == 0
    return t.topic_id


def test_produce_v13_and_offsets_v10_by_topic_id(broker):
    wire = Wire(broker.bootstrap)
    tid = topic_id(wire, "by-id")
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    r = wire.call(0, 13, pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        pr.TopicProduceData(topic_id=tid, partition_data=[pr.PartitionProduceData(index=0, records=batch)]),
        pr.TopicProduceData(topic_id=uuid.uuid4(), partition_data=[pr.PartitionProduceData(index=0, records=batch)]),
    ]))
    known, unknown = r.responses
    assert known.topic_id == tid and known.partition_responses[0].error_code == 0
    assert known.partition_responses[0].base_offset == 0
    assert unknown.partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID

    ghost = uuid.uuid4()
    r = wire.call(8, 10, oc.OffsetCommitRequest(group_id="g-v10", generation_id_or_member_epoch=-1, member_id="",
                                                topics=[
        oc.OffsetCommitRequestTopic(topic_id=tid, partitions=[oc.OffsetCommitRequestPartition(0, 1, -1, "m")]),
        oc.OffsetCommitRequestTopic(topic_id=ghost, partitions=[oc.OffsetCommitRequestPartition(0, 1, -1, "m")]),
    ]))
    codes = {t.topic_id: [p.error_code for p in t.partitions] for t in r.topics}
    assert codes == {tid: [0], ghost: [ErrorCode.UNKNOWN_TOPIC_ID]}

    r = wire.call(9, 10, of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g-v10", topics=[
        of.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0])])]))
    (group,) = r.groups
    assert group.error_code == 0
    (topic,) = group.topics
    assert topic.topic_id == tid and (topic.partitions[0].committed_offset, topic.partitions[0].metadata) == (1, "m")
    # Every committed partition, named by id.
    r = wire.call(9, 10, of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g-v10", topics=None)]))
    assert [t.topic_id for t in r.groups[0].topics] == [tid]


def test_list_offsets_v11_earliest_pending_upload_without_tiered_storage(broker):
    wire = Wire(broker.bootstrap)
    topic_id(wire, "lo-v11")
    r = wire.call(2, 11, lo.ListOffsetsRequest(replica_id=-1, topics=[lo.ListOffsetsTopic(name="lo-v11", partitions=[
        lo.ListOffsetsPartition(partition_index=0, timestamp=-6)])]))
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)


def test_kafka_python_infers_the_newest_kafka(broker):
    kafka = pytest.importorskip("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap)
        assert consumer.config["api_version"] == (4, 3)  # kafka-python 3.0's newest; DescribeLogDirs v5
        consumer.close()
        features = admin.describe_features()
        assert features["metadata.version"]["finalized"] == (33, 33)  # Kafka 4.4.0's
    finally:
        admin.close()


def test_describe_groups_v6_unknown_group(broker):
    from kbroker.protocol.messages import describe_groups_request as dg

    wire = Wire(broker.bootstrap)
    (old,) = wire.call(15, 5, dg.DescribeGroupsRequest(groups=["no-such-group"])).groups
    assert (old.error_code, old.group_state) == (0, "Dead")
    (new,) = wire.call(15, 6, dg.DescribeGroupsRequest(groups=["no-such-group"])).groups
    assert (new.error_code, new.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group no-such-group not found.")


def test_metadata_by_topic_id_with_the_empty_name_the_java_client_sends(broker):
    # The Java client 4.x (a consumer whose server-side regex assigned it topics it knows only by id)
    # asks Metadata v13 for {topicId, name=""}: Kafka answers by the ids whenever any is non-zero and
    # ignores the names (KafkaApis.handleTopicMetadataRequest); unknown ids come first, name null. As
    # Apache Kafka 4.4 answered these two requests.
    wire = Wire(broker.bootstrap)
    tid = topic_id(wire, "by-id-empty-name")
    ghost = uuid.uuid4()
    r = wire.call(3, 13, md.MetadataRequest(topics=[
        md.MetadataRequestTopic(topic_id=tid, name=""),
        md.MetadataRequestTopic(topic_id=ghost, name=""),
        md.MetadataRequestTopic(topic_id=tid, name=None),
    ], allow_auto_topic_creation=False))
    answers = [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in r.topics]
    assert answers == [(ErrorCode.UNKNOWN_TOPIC_ID, None, ghost, 0), (0, "by-id-empty-name", tid, 1)]
    r = wire.call(3, 13, md.MetadataRequest(topics=[
        md.MetadataRequestTopic(topic_id=ghost, name=""),
        md.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="by-id-empty-name"),
    ], allow_auto_topic_creation=False))
    assert [(t.error_code, t.name, t.topic_id) for t in r.topics] == [(ErrorCode.UNKNOWN_TOPIC_ID, None, ghost)]
