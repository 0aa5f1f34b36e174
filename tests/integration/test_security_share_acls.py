"""Share groups under the ACL authorizer on a real broker: ShareFetch (78) and ShareAcknowledge (79)
check READ on the group and on each topic as Kafka's KafkaApis does (a topic the principal may not READ
is answered TOPIC_AUTHORIZATION_FAILED per partition, at each request while it is in the share session,
and yields no record; a refused group, GROUP_AUTHORIZATION_FAILED), and ShareGroupHeartbeat refuses a subscription to a topic the
principal may not DESCRIBE; the offsets APIs 90-92 check DESCRIBE (describe) or READ (alter, delete)
on each topic as KafkaApis does."""

from __future__ import annotations

import uuid

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages import (
    alter_share_group_offsets_request as alter, delete_share_group_offsets_request as delete,
    describe_share_group_offsets_request as describe,
)
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.share_acknowledge_request import (
    AcknowledgementBatch as AckBatch, AcknowledgePartition, AcknowledgeTopic, ShareAcknowledgeRequest,
)
from kbroker.protocol.messages.share_fetch_request import FetchPartition, FetchTopic, ShareFetchRequest
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.tests.integration.sasl_wire import plain_login
from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MINE, SECRET, GROUP = "orders", "payroll", "orders-share"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from confluent_kafka.admin import (
        AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType,
    )
    sb = start_secure_broker(tmp_path_factory.mktemp("share-acl"), "--authorizer-class-name", AUTHORIZER,
                             "--super-users", "User:admin", "--no-auto-create-topics-enable")
    admin = AdminClient({"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
    for f in admin.create_topics([NewTopic(MINE, 1, 1), NewTopic(SECRET, 1, 1)]).values():
        f.result(30)
    allow = [(ResourceType.TOPIC, MINE, ResourcePatternType.LITERAL, AclOperation.READ),
             (ResourceType.GROUP, "orders-", ResourcePatternType.PREFIXED, AclOperation.READ),
             (ResourceType.GROUP, "orders-", ResourcePatternType.PREFIXED, AclOperation.DELETE)]
    for f in admin.create_acls([AclBinding(kind, name, pattern, "User:reader", "*", op, AclPermissionType.ALLOW)
                                for kind, name, pattern, op in allow]).values():
        f.result(30)
    yield sb
    sb.broker.stop()


def produce(sb, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
    for i in range(n):
        p.produce(topic, f"{topic}-{i}".encode())
    assert p.flush(30) == 0


def topic_ids(sb) -> dict[str, uuid.UUID]:
    admin = plain_login(sb.address("SASL_PLAINTEXT"), "admin", PASSWORDS["admin"])
    answer = admin.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in (MINE, SECRET)],
                                               allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
    return {t.name: t.topic_id for t in answer.topics}


def share_fetch(wire, group: str, member: str, epoch: int, ids, acks=()) -> object:
    return wire.call(78, 1, ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=100, batch_size=100,
        topics=[FetchTopic(topic_id=i, partitions=[FetchPartition(partition_index=0, acknowledgement_batches=[
            AckBatch(first_offset=f, last_offset=l, acknowledge_types=[1]) for f, l in acks])]) for i in ids],
        forgotten_topics_data=[]))


def errors(response) -> dict[uuid.UUID, list[int]]:
    return {t.topic_id: [p.error_code for p in t.partitions] for t in response.responses}


def test_share_fetch_and_acknowledge_need_read_on_each_topic(cluster):
    ids = topic_ids(cluster)
    reader = plain_login(cluster.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])
    member = str(uuid.uuid4())
    joined = reader.call(76, 1, ShareGroupHeartbeatRequest(group_id=GROUP, member_id=member, member_epoch=0,
                                                          rack_id=None, subscribed_topic_names=[MINE]))
    assert joined.error_code == E.NONE, joined
    opened = share_fetch(reader, GROUP, member, 0, [ids[MINE], ids[SECRET]])
    assert opened.error_code == E.NONE, opened
    assert errors(opened).get(ids[SECRET]) == [E.TOPIC_AUTHORIZATION_FAILED]
    assert all(c == E.NONE for c in errors(opened).get(ids[MINE], []))
    produce(cluster, SECRET, 3)  # records the reader's session would acquire, were the topic not refused
    # the refused partition stays in the session (as Kafka's): the next fetch, naming nothing, refuses it again
    follow = share_fetch(reader, GROUP, member, 1, [])
    assert follow.error_code == E.NONE and errors(follow)[ids[SECRET]] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert not [a for t in follow.responses for p in t.partitions for a in p.acquired_records if t.topic_id == ids[SECRET]]
    # acknowledgements of the refused topic, piggybacked or alone, are refused per partition
    piggy = share_fetch(reader, GROUP, member, 2, [ids[SECRET]], acks=[(0, 0)])
    assert errors(piggy)[ids[SECRET]] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert [p.acknowledge_error_code for t in piggy.responses if t.topic_id == ids[SECRET]
            for p in t.partitions] == [E.TOPIC_AUTHORIZATION_FAILED]
    acked = reader.call(79, 1, ShareAcknowledgeRequest(group_id=GROUP, member_id=member, share_session_epoch=3, topics=[
        AcknowledgeTopic(topic_id=i, partitions=[AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            AckBatch(first_offset=0, last_offset=0, acknowledge_types=[1])])]) for i in (ids[MINE], ids[SECRET])]))
    assert acked.error_code == E.NONE, acked
    assert errors(acked)[ids[SECRET]] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert errors(acked)[ids[MINE]] != [E.TOPIC_AUTHORIZATION_FAILED]


def test_share_apis_refuse_a_group_the_principal_may_not_read(cluster):
    ids = topic_ids(cluster)
    reader = plain_login(cluster.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])
    member = str(uuid.uuid4())
    assert share_fetch(reader, "other-share", member, 0, [ids[MINE]]).error_code == E.GROUP_AUTHORIZATION_FAILED
    acked = reader.call(79, 1, ShareAcknowledgeRequest(group_id="other-share", member_id=member,
                                                       share_session_epoch=1, topics=[]))
    assert acked.error_code == E.GROUP_AUTHORIZATION_FAILED
    beat = reader.call(76, 1, ShareGroupHeartbeatRequest(group_id="other-share", member_id=member, member_epoch=0,
                                                        rack_id=None, subscribed_topic_names=[MINE]))
    assert beat.error_code == E.GROUP_AUTHORIZATION_FAILED


def test_share_heartbeat_needs_describe_on_subscribed_topics(cluster):
    reader = plain_login(cluster.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])
    beat = reader.call(76, 1, ShareGroupHeartbeatRequest(group_id=GROUP, member_id=str(uuid.uuid4()), member_epoch=0,
                                                        rack_id=None, subscribed_topic_names=[MINE, SECRET]))
    assert beat.error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_share_group_offsets_apis_check_each_topic(cluster):
    group = "orders-offsets"
    address = cluster.address("SASL_PLAINTEXT")
    admin = plain_login(address, "admin", PASSWORDS["admin"])
    reader = plain_login(address, "reader", PASSWORDS["reader"])

    def alter_request(*topics):
        return alter.AlterShareGroupOffsetsRequest(group_id=group, topics=[alter.AlterShareGroupOffsetsRequestTopic(
            topic_name=t, partitions=[alter.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])
            for t in topics])

    by_admin = admin.call(91, 0, alter_request(SECRET))
    assert by_admin.error_code == E.NONE and [p.error_code for t in by_admin.responses for p in t.partitions] == [0]
    altered = reader.call(91, 0, alter_request(MINE, SECRET))
    assert altered.error_code == E.NONE, altered
    assert {t.topic_name: [p.error_code for p in t.partitions] for t in altered.responses} == {
        MINE: [E.NONE], SECRET: [E.TOPIC_AUTHORIZATION_FAILED]}

    def described(topics):
        answer = reader.call(90, 1, describe.DescribeShareGroupOffsetsRequest(groups=[
            describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]))
        (g,) = answer.groups
        assert g.error_code == E.NONE, g
        return {t.topic_name: [(p.error_code, p.start_offset) for p in t.partitions] for t in g.topics}

    named = described([describe.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=[0])
                       for t in (MINE, SECRET)])
    assert named == {MINE: [(E.NONE, 0)], SECRET: [(E.TOPIC_AUTHORIZATION_FAILED, -1)]}
    assert described(None) == {MINE: [(E.NONE, 0)]}  # all of the group's topics: the refused one left out

    deleted = reader.call(92, 0, delete.DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in (MINE, SECRET)]))
    assert deleted.error_code == E.NONE, deleted
    assert {t.topic_name: t.error_code for t in deleted.responses} == {
        MINE: E.NONE, SECRET: E.TOPIC_AUTHORIZATION_FAILED}
    still = admin.call(90, 1, describe.DescribeShareGroupOffsetsRequest(groups=[
        describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    assert [t.topic_name for t in still.groups[0].topics] == [SECRET]  # the refused delete deleted nothing


def test_share_state_rpcs_need_cluster_action(cluster):
    """The share coordinator's state RPCs (83-87) are the brokers' own traffic: KafkaApis authorizes
    CLUSTER_ACTION on the cluster, so a client principal without it is refused each one (every
    partition CLUSTER_AUTHORIZATION_FAILED, nothing read or written); a super user is served."""
    from kbroker.tests.integration.test_share_state_rpcs import delete, initialize, read, summary, write

    address = cluster.address("SASL_PLAINTEXT")
    admin = plain_login(address, "admin", PASSWORDS["admin"])
    reader = plain_login(address, "reader", PASSWORDS["reader"])
    topic_id = topic_ids(cluster)[MINE]
    calls = (lambda w: initialize(w, topic_id, 0, 0, 0, group=GROUP), lambda w: read(w, topic_id, 0, group=GROUP),
             lambda w: write(w, topic_id, 0, 0, 0, 0, [], group=GROUP), lambda w: delete(w, topic_id, 0, group=GROUP),
             lambda w: summary(w, topic_id, 0, group=GROUP))
    for call in calls:
        refused = call(reader)
        assert (refused.error_code, refused.error_message) == (E.CLUSTER_AUTHORIZATION_FAILED,
                                                               "Cluster authorization failed.")
    served = [call(admin).error_code for call in calls]
    assert E.CLUSTER_AUTHORIZATION_FAILED not in served, served
