"""ACLs with Kafka's semantics on a real broker: a principal allowed to read one topic in one group
consumes it and nothing else, each refusal carries Kafka's error code, a super user may do
everything, denials are audited, and ACLs survive a restart. ACLs are managed with
confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls)."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages import (
    create_topics_request as ct, fetch_request as fr, find_coordinator_request as fc, join_group_request as jg,
    metadata_request as md, offset_commit_request as oc, produce_request as pr,
)
from kbroker.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kbroker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.sasl_wire import plain_login
from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T1, T2, G1, G2 = "orders", "payroll", "orders-app", "other-app"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("acl"), "--authorizer-class-name", AUTHORIZER,
                             "--super-users", "User:admin", "--no-auto-create-topics-enable")
    admin = admin_client(sb)
    from confluent_kafka.admin import (
        AclBinding, AclOperation, AclPermissionType, NewTopic, ResourcePatternType, ResourceType,
    )
    for f in admin.create_topics([NewTopic(T1, 1, 1), NewTopic(T2, 1, 1)]).values():
        f.result(30)
    bindings = [
        AclBinding(ResourceType.TOPIC, T1, ResourcePatternType.LITERAL, "User:reader", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "orders-", ResourcePatternType.PREFIXED, "User:reader", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(bindings).values():
        f.result(30)
    produce_as(sb, "admin", T1, 3)
    yield sb
    sb.broker.stop()


def conf(sb, user: str) -> dict:
    return {"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user]}


def admin_client(sb):
    from confluent_kafka.admin import AdminClient

    return AdminClient(conf(sb, "admin"))


def produce_as(sb, user: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer(conf(sb, user))
    for i in range(n):
        p.produce(topic, f"{topic}-{i}".encode())
    assert p.flush(30) == 0


def reader():
    return lambda sb: plain_login(sb.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])


def test_reader_consumes_its_topic_in_its_group_and_commits(cluster):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf(cluster, "reader"), "group.id": G1, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([T1])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    assert c.committed([TopicPartition(T1, 0)], timeout=10)[0].offset == 3
    c.close()
    assert got == [f"{T1}-{i}".encode() for i in range(3)]


def test_reader_sees_only_what_it_may_describe(cluster):
    wire = reader()(cluster)
    everything = wire.call(3, 12, md.MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert [t.name for t in everything.topics] == [T1]
    one = wire.call(3, 12, md.MetadataRequest(topics=[md.MetadataRequestTopic(name=T2)],
                                              allow_auto_topic_creation=False))
    assert [(t.name, t.error_code) for t in one.topics] == [(T2, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


def test_each_refusal_carries_kafkas_error_code(cluster):
    wire = reader()(cluster)
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"x")])
    produce = wire.call(0, 9, pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        pr.TopicProduceData(name=T1, partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
    assert produce.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    fetch = wire.call(1, 12, fr.FetchRequest(max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, topics=[
        fr.FetchTopic(topic=T2, partitions=[fr.FetchPartition(partition=0, fetch_offset=0,
                                                              partition_max_bytes=1 << 20)])]))
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    coord = wire.call(10, 4, fc.FindCoordinatorRequest(key_type=0, coordinator_keys=[G2, G1]))
    assert {c.key: c.error_code for c in coord.coordinators} == {G2: ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                                 G1: ErrorCode.NONE}
    join = wire.call(11, 9, jg.JoinGroupRequest(group_id=G2, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                                member_id="", protocol_type="consumer", protocols=[
                                                    jg.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert join.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

    commit = wire.call(8, 8, oc.OffsetCommitRequest(group_id=G1, generation_id_or_member_epoch=-1, member_id="",
                                                    topics=[oc.OffsetCommitRequestTopic(name=T2, partitions=[
                                                        oc.OffsetCommitRequestPartition(partition_index=0,
                                                                                        committed_offset=1)])]))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    create = wire.call(19, 7, ct.CreateTopicsRequest(topics=[ct.CreatableTopic(name="new-" + uuid.uuid4().hex[:6],
                                                                              num_partitions=1,
                                                                              replication_factor=1)]))
    assert create.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    cluster_info = wire.call(60, 1, DescribeClusterRequest())
    assert cluster_info.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    acls = wire.call(30, 3, CreateAclsRequest(creations=[AclCreation(
        resource_type=2, resource_name="*", resource_pattern_type=3, principal="User:reader", host="*",
        operation=2, permission_type=3)]))
    assert acls.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    txn = wire.call(22, 5, InitProducerIdRequest(transactional_id="tx-1", transaction_timeout_ms=60000))
    assert txn.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    idem = wire.call(22, 5, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert idem.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # WriteTxnMarkers needs Alter or ClusterAction on the cluster (kafka-transactions abort)
    from kbroker.protocol.messages.write_txn_markers_request import (
        WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
    )
    markers = wire.call(27, 2, WriteTxnMarkersRequest([WritableTxnMarker(1, 0, False, [
        WritableTxnMarkerTopic(T1, [0])], 0, 0)]))
    assert markers.markers[0].topics[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    denied = cluster.broker.events("authorization_denied")
    assert {(e["operation"], e["resource_type"], e["resource"]) for e in denied if e["principal"] == "User:reader"} \
        >= {("WRITE", "TOPIC", T1), ("READ", "TOPIC", T2), ("READ", "GROUP", G2), ("DESCRIBE", "CLUSTER",
                                                                                  "kafka-cluster")}


def test_confluent_consumer_of_a_forbidden_topic_gets_the_authorization_error(cluster):
    from confluent_kafka import Consumer, KafkaError

    c = Consumer({**conf(cluster, "reader"), "group.id": G1 + "-x", "auto.offset.reset": "earliest"})
    c.subscribe([T2])
    error, deadline = None, time.monotonic() + 30
    while error is None and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error():
            error = m.error()
    c.close()
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error


def test_super_user_may_do_everything(cluster):
    produce_as(cluster, "admin", T2, 1)
    wire = plain_login(cluster.address("SASL_PLAINTEXT"), "admin", PASSWORDS["admin"])
    assert wire.call(60, 1, DescribeClusterRequest()).error_code == ErrorCode.NONE
    create = wire.call(19, 7, ct.CreateTopicsRequest(topics=[ct.CreatableTopic(name="adm-" + uuid.uuid4().hex[:6],
                                                                              num_partitions=1,
                                                                              replication_factor=1)]))
    assert create.topics[0].error_code == ErrorCode.NONE


def test_anonymous_plaintext_clients_are_denied_by_default(cluster):
    from kbroker.tests.integration.wire import Wire

    wire = Wire(cluster.broker.bootstrap)
    everything = wire.call(3, 12, md.MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert everything.topics == []


def test_acls_survive_a_restart_and_can_be_deleted(cluster):
    from confluent_kafka.admin import (
        AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    admin = admin_client(cluster)  # (a client kept alive until its futures are done)
    before = sorted(str(b) for b in admin.describe_acls(everything).result(30))
    assert len(before) == 2
    cluster.broker.restart()
    admin = admin_client(cluster)
    after = sorted(str(b) for b in admin.describe_acls(everything).result(30))
    assert after == before
    wire = reader()(cluster)
    assert [t.name for t in wire.call(3, 12, md.MetadataRequest(topics=None)).topics] == [T1]
    group_filter = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                    AclPermissionType.ANY)
    deleted = admin.delete_acls([group_filter])[group_filter].result(30)
    assert len(deleted) == 1
    cluster.broker.restart()
    admin = admin_client(cluster)
    left = admin.describe_acls(everything).result(30)
    assert [b.restype for b in left] == [ResourceType.TOPIC]


def test_authorized_operations_kip_430(cluster):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    reader_admin = AdminClient(conf(cluster, "reader"))
    [topic] = reader_admin.describe_topics(TopicCollection([T1]), include_authorized_operations=True).values()
    assert set(topic.result(30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    admin = admin_client(cluster)
    described = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert AclOperation.ALTER in described.authorized_operations
    assert len(described.authorized_operations) == 7  # every operation a cluster supports (super user)


def test_transactions_need_write_on_their_transactional_id(cluster):
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import (
        AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )

    tx_conf = {**conf(cluster, "reader"), "transactional.id": "orders-tx-1"}
    p = Producer(tx_conf)
    with pytest.raises(KafkaException) as e:
        p.init_transactions(15)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    admin = admin_client(cluster)
    grants = [
        AclBinding(ResourceType.TRANSACTIONAL_ID, "orders-tx-", ResourcePatternType.PREFIXED, "User:reader", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, T1, ResourcePatternType.LITERAL, "User:reader", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(grants).values():
        f.result(30)
    try:
        p = Producer(tx_conf)
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(T1, b"in-a-transaction")
        p.commit_transaction(30)
        p.begin_transaction()
        failures = []
        # no Write (nor Describe) on payroll: the record fails and the transaction cannot commit
        p.produce(T2, b"not allowed", on_delivery=lambda err, _msg: failures.append(err))
        with pytest.raises(KafkaException):
            p.commit_transaction(30)
        assert [f.code() for f in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    finally:
        from confluent_kafka.admin import AclBindingFilter

        filters = [AclBindingFilter(g.restype, g.name, g.resource_pattern_type, g.principal, g.host, g.operation,
                                    g.permission_type) for g in grants]
        for f in admin.delete_acls(filters).values():
            f.result(30)


def test_kip848_consumer_group_under_acls(cluster):
    from confluent_kafka import Consumer, KafkaError

    def consume(group: str, topic: str, want: int) -> tuple[list, object]:
        c = Consumer({**conf(cluster, "reader"), "group.id": group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        got, error, deadline = [], None, time.monotonic() + 30
        while len(got) < want and error is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                if m.error():
                    error = m.error()
                else:
                    got.append(m.value())
        if got:
            c.commit(asynchronous=False)
        c.close()
        return got, error

    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )

    admin = admin_client(cluster)  # this test's own group ACL: others in this module delete theirs
    grant = AclBinding(ResourceType.GROUP, "k848-", ResourcePatternType.PREFIXED, "User:reader", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    for f in admin.create_acls([grant]).values():
        f.result(30)
    try:
        got, error = consume("k848-a", T1, 3)  # Read on the group prefix and on the topic
        assert error is None and got[:3] == [f"{T1}-{i}".encode() for i in range(3)]
        _, error = consume(G2, T1, 1)  # no ACL on this group
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
        _, error = consume("k848-b", T2, 1)  # the group is allowed, the topic is not
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    finally:
        flt = AclBindingFilter(ResourceType.GROUP, "k848-", ResourcePatternType.PREFIXED, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
        admin.delete_acls([flt])[flt].result(30)


def test_admin_apis_of_issue_15_under_acls(cluster):
    from kbroker.protocol.messages import delete_records_request as drr, describe_topic_partitions_request as dtp
    from kbroker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
    from kbroker.protocol.messages.elect_leaders_request import ElectLeadersRequest

    wire = reader()(cluster)
    deleted = wire.call(21, 2, drr.DeleteRecordsRequest(timeout_ms=5000, topics=[drr.DeleteRecordsTopic(
        name=T1, partitions=[drr.DeleteRecordsPartition(partition_index=0, offset=1)])]))
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # Delete on topic
    dirs = wire.call(35, 4, DescribeLogDirsRequest(topics=None))
    assert dirs.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and dirs.results == []
    elect = wire.call(43, 2, ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=5000))
    assert elect.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    listed = wire.call(75, 0, dtp.DescribeTopicPartitionsRequest(topics=[]))
    assert [t.name for t in listed.topics] == [T1]
    named = wire.call(75, 0, dtp.DescribeTopicPartitionsRequest(topics=[dtp.TopicRequest(name=T2)]))
    assert [(t.name, t.error_code) for t in named.topics] == [(T2, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


def test_metadata_quorum_and_feature_updates_need_the_cluster(cluster):
    """DescribeQuorum needs Describe on the cluster, UpdateFeatures Alter (as in Kafka's ControllerApis):
    refused, the whole request gets CLUSTER_AUTHORIZATION_FAILED."""
    from kbroker.protocol.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
    from kbroker.protocol.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest

    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )

    metadata = DescribeQuorumRequest([TopicData("__cluster_metadata", [PartitionData(0)])])
    no_op = UpdateFeaturesRequest(30000, [FeatureUpdateKey("group.version", 1, False, 1)], True)
    wire = reader()(cluster)
    quorum = wire.call(55, 2, metadata)
    assert quorum.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and quorum.topics == []
    assert wire.call(57, 2, no_op).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    admin = admin_client(cluster)
    describe = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:reader", "*",
                          AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for f in admin.create_acls([describe]).values():
        f.result(30)
    try:  # Describe on the cluster is enough for DescribeQuorum, not for UpdateFeatures (Alter)
        quorum = wire.call(55, 2, metadata)
        assert quorum.error_code == ErrorCode.NONE and quorum.topics[0].partitions[0].leader_id == 1
        assert wire.call(57, 2, no_op).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        flt = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:reader", "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        admin.delete_acls([flt])[flt].result(30)


def test_metadata_v0_naming_only_refused_topics_lists_no_others(cluster):
    wire = reader()(cluster)
    answer = wire.call(3, 0, md.MetadataRequest(topics=[md.MetadataRequestTopic(name=T2)]))
    assert [(t.name, t.error_code) for t in answer.topics] == [(T2, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert answer.brokers


def test_produce_does_not_auto_create_for_a_principal_without_create(tmp_path):
    from kbroker.tests.integration.security_setup import start_secure_broker as start

    sb = start(tmp_path, "--authorizer-class-name", AUTHORIZER, "--super-users", "User:admin")
    try:
        from confluent_kafka.admin import (
            AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
        )

        admin = admin_client(sb)
        write_all = AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:reader", "*",
                               AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([write_all]).values():
            f.result(30)
        wire = plain_login(sb.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])
        batch = encode_batch([Record(0, int(time.time() * 1000), None, b"x")])
        answer = wire.call(0, 9, pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            pr.TopicProduceData(name="never-created", partition_data=[pr.PartitionProduceData(index=0,
                                                                                            records=batch)])]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        names = set(admin.list_topics(timeout=10).topics)
        assert "never-created" not in names
    finally:
        sb.broker.stop()


def test_acl_apis_v0_for_clients_of_kafka_3(cluster):
    """Kafka 3.9 still serves CreateAcls, DescribeAcls and DeleteAcls v0 (no pattern type: LITERAL);
    kafka-python told it talks to Kafka 0.11 sends exactly those versions."""
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    admin = KafkaAdminClient(bootstrap_servers=cluster.address("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin",
                             sasl_plain_password=PASSWORDS["admin"], api_version=(0, 11))
    try:
        acl = ACL("User:legacy", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, T2))
        result = admin.create_acls([acl])
        assert result["failed"] == [], result
        flt = ACLFilter("User:legacy", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePattern(ResourceType.TOPIC, T2))
        found, error = admin.describe_acls(flt)
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:legacy", ACLOperation.DESCRIBE, T2)]
        deleted = admin.delete_acls([flt])
        assert len(deleted[0][1]) == 1  # (filter, [(acl, error)], error)
        assert admin.describe_acls(flt)[0] == []
    finally:
        admin.close()


def test_acl_changes_past_kafkas_bound_per_request_change_nothing(cluster):
    """Kafka's controller writes at most 10,000 records per operation: CreateAcls adding more answers
    POLICY_VIOLATION for every creation and adds none; a DeleteAcls filter that would take the
    request past 10,000 removals fails on its own, removing none of its matches, and the other
    filters are applied. 10,000 creations are fine, and are there after a restart."""
    from kbroker.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
    from kbroker.protocol.messages.describe_acls_request import DescribeAclsRequest

    wire = plain_login(cluster.address("SASL_PLAINTEXT"), "admin", PASSWORDS["admin"])

    def creations(prefix: str, n: int) -> list[AclCreation]:
        return [AclCreation(resource_type=2, resource_name=f"{prefix}-{i}", resource_pattern_type=3,
                            principal="User:many", host="*", operation=3, permission_type=3) for i in range(n)]

    def held(prefix: str) -> int:
        found = wire.call(29, 3, DescribeAclsRequest(resource_type_filter=2, resource_name_filter=None,
                                                     pattern_type_filter=1, principal_filter="User:many",
                                                     host_filter=None, operation=1, permission_type=1))
        return sum(len(r.acls) for r in found.resources if r.resource_name.startswith(prefix + "-"))

    too_many = wire.call(30, 3, CreateAclsRequest(creations=creations("over", 10_001)))
    assert {(r.error_code, r.error_message) for r in too_many.results} == {
        (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")}
    assert len(too_many.results) == 10_001
    assert held("over") == 0
    # The same binding twice is one ACL: 10,000 distinct ones named twice over are within the bound.
    fine = wire.call(30, 3, CreateAclsRequest(creations=creations("many", 10_000) + creations("many", 10_000)))
    assert {r.error_code for r in fine.results} == {ErrorCode.NONE}
    assert held("many") == 10_000
    one = wire.call(30, 3, CreateAclsRequest(creations=creations("one", 1)))
    assert one.results[0].error_code == ErrorCode.NONE

    def by_name(name: str | None) -> DeleteAclsFilter:
        return DeleteAclsFilter(resource_type_filter=2, resource_name_filter=name, pattern_type_filter=1,
                                principal_filter="User:many", host_filter=None, operation=1, permission_type=1)

    # The first filter removes one ACL; every "many-" ACL and that one would be 10,001 removals.
    deleted = wire.call(31, 3, DeleteAclsRequest(filters=[by_name("one-0"), by_name(None), by_name("many-7")]))
    first, everything, seven = deleted.filter_results
    assert first.error_code == ErrorCode.NONE and len(first.matching_acls) == 1
    assert everything.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and everything.matching_acls == []
    assert everything.error_message == "Cannot remove more than 10000 acls in a single delete operation."
    assert seven.error_code == ErrorCode.NONE and len(seven.matching_acls) == 1
    assert held("many") == 9_999 and held("one") == 0

    cluster.broker.restart()
    wire = plain_login(cluster.address("SASL_PLAINTEXT"), "admin", PASSWORDS["admin"])
    assert held("many") == 9_999
    cleared = wire.call(31, 3, DeleteAclsRequest(filters=[by_name(None)]))
    assert len(cleared.filter_results[0].matching_acls) == 9_999
    assert held("many") == 0


def test_a_long_delete_acls_gives_the_loop_back_and_no_change_lands_among_its_filters(cluster):
    """A DeleteAcls of many filters without a resource name matches each against every ACL; it
    gives the loop back between filters, so another client is answered meanwhile. A CreateAcls sent
    during it waits for it: the DeleteAcls' last filter, which would match the new ACL, sees the
    ACLs as they were when it began, as one operation of Kafka's controller does. A filter given
    twice is answered twice alike."""
    import select

    from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
    from kbroker.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
    from kbroker.protocol.messages.describe_acls_request import DescribeAclsRequest

    address = cluster.address("SASL_PLAINTEXT")
    admin, creator, other = (plain_login(address, "admin", PASSWORDS["admin"]) for _ in range(3))
    filler = admin.call(30, 3, CreateAclsRequest(creations=[AclCreation(
        resource_type=2, resource_name=f"slow-{i}", resource_pattern_type=3, principal="User:slow", host="*",
        operation=3, permission_type=3) for i in range(5_000)]))
    assert {r.error_code for r in filler.results} == {ErrorCode.NONE}

    def nameless(principal: str) -> DeleteAclsFilter:
        return DeleteAclsFilter(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                principal_filter=principal, host_filter=None, operation=1, permission_type=1)

    late = AclCreation(resource_type=2, resource_name="late", resource_pattern_type=3, principal="User:late",
                       host="*", operation=3, permission_type=3)
    admin.send(31, 3, DeleteAclsRequest(filters=[nameless(f"User:none-{i}") for i in range(1_500)]
                                        + [nameless("User:late")] * 2))
    time.sleep(0.1)
    creator.send(30, 3, CreateAclsRequest(creations=[late]))
    assert other.call(18, 3, ApiVersionsRequest("other", "1")).error_code == ErrorCode.NONE
    assert not select.select([admin.sock], [], [], 0)[0], "ApiVersions waited for the whole DeleteAcls"
    deleted = admin.receive(31, 3)
    assert [r.matching_acls for r in deleted.filter_results[-2:]] == [[], []]
    assert creator.receive(30, 3).results[0].error_code == ErrorCode.NONE
    found = other.call(29, 3, DescribeAclsRequest(resource_type_filter=2, resource_name_filter="late",
                                                   pattern_type_filter=3, principal_filter="User:late",
                                                   host_filter=None, operation=1, permission_type=1))
    assert [r.resource_name for r in found.resources] == ["late"]
    again = admin.call(31, 3, DeleteAclsRequest(filters=[nameless("User:late")] * 2))
    assert [len(r.matching_acls) for r in again.filter_results] == [1, 1]
    cleared = admin.call(31, 3, DeleteAclsRequest(filters=[nameless("User:slow")]))
    assert len(cleared.filter_results[0].matching_acls) == 5_000
