"""kbroker's ApiVersions is Kafka 4.4.0's, asked of the running Kafka 4.4.0: the committed table
(protocol/kafka_releases.json) is that broker's answer, and kbroker advertises it except what
tests/integration/test_kafka_versions.py names as not served (transactions v2,
the controller quorum's APIs). The APIs issue 43 added are sent to both brokers and answered alike."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.kafka_releases import kafka_release
from kbroker.protocol.messages import alter_replica_log_dirs_request as arl
from kbroker.protocol.messages import create_delegation_token_request as cdt
from kbroker.protocol.messages import delete_groups_request as dg
from kbroker.protocol.messages import describe_delegation_token_request as ddt
from kbroker.protocol.messages import expire_delegation_token_request as edt
from kbroker.protocol.messages import list_config_resources_request as lcr
from kbroker.protocol.messages import renew_delegation_token_request as rdt
from kbroker.protocol.messages import unregister_broker_request as ub
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_kafka_versions import (
    api_versions, expected_apis, expected_features, features_of, table_of,
)
from kbroker.tests.integration.wire import Wire


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("surface") / "data", "--group-initial-rebalance-delay-ms", "0")
    yield proc
    proc.stop()


def test_the_committed_table_is_kafka_4_4s(kafka_reference):
    release = kafka_release("4.4")
    answer = api_versions(kafka_reference.bootstrap, 5)
    assert release.release == "4.4.0"
    assert table_of(answer) == dict(release.apis)
    assert features_of(answer) == (dict(release.supported_features), dict(release.finalized_features))


@pytest.mark.parametrize("version", [3, 4, 5])
def test_api_versions_is_kafka_4_4s_but_what_is_not_served(kafka_reference, kbroker, version):
    reference, ours = api_versions(kafka_reference.bootstrap, version), api_versions(kbroker.bootstrap, version)
    release = kafka_release("4.4")
    assert table_of(reference) == dict(release.apis)  # the table is the running broker's
    assert table_of(ours) == expected_apis(release)
    supported, finalized = features_of(reference)
    assert (supported, finalized) == (
        {n: r for n, r in release.supported_features.items() if r[0] > 0 or version >= 4},
        dict(release.finalized_features))  # the features too are the running broker's
    want_supported, want_finalized = expected_features(release)
    # KAFKA-17492: below v4 a feature whose minimum is 0 is left out, by both
    assert features_of(ours) == ({n: want_supported[n] for n in want_supported if n in supported}, want_finalized)
    assert len(supported) == (1 if version < 4 else len(release.supported_features))
    assert (ours.error_code, ours.throttle_time_ms, ours.zk_migration_ready) == (0, 0, False)


def test_kafka_python_infers_the_same_kafka(kafka_reference, kbroker):
    kafka = pytest.importorskip("kafka")
    inferred = []
    for bootstrap in (kafka_reference.bootstrap, kbroker.bootstrap):
        consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
        inferred.append(consumer.config["api_version"])
        consumer.close()
    assert inferred[0] == inferred[1]


def test_api_versions_error_answers_are_kafkas(kafka_reference, kbroker):
    """KIP-511's invalid software name, and KIP-1242's wrong cluster or node: the error alone, no APIs."""
    def answers(bootstrap: str, cluster_id: str, node_id: int):
        wire = Wire(bootstrap)
        try:
            bad_name = wire.call(18, 3, ApiVersionsRequest(client_software_name="-bad", client_software_version="1"))
            wrong_cluster = wire.call(18, 5, ApiVersionsRequest("t", "1", cluster_id="not-this-cluster", node_id=node_id))
            wrong_node = wire.call(18, 5, ApiVersionsRequest("t", "1", cluster_id=cluster_id, node_id=node_id + 7))
            right = wire.call(18, 5, ApiVersionsRequest("t", "1", cluster_id=cluster_id, node_id=node_id))
            return [(a.error_code, table_of(a)) for a in (bad_name, wrong_cluster, wrong_node)] + [right.error_code]
        finally:
            wire.close()

    kafka = answers(kafka_reference.bootstrap, kafka_reference.cluster_id, kafka_reference.node_id)
    ours_cluster = (kbroker.data_dir / "meta.properties").read_text().split("cluster.id=")[1].split()[0]
    ours = answers(kbroker.bootstrap, ours_cluster, 1)
    assert kafka == ours == [(ErrorCode.INVALID_REQUEST, {}), (ErrorCode.REBOOTSTRAP_REQUIRED, {}),
                             (ErrorCode.REBOOTSTRAP_REQUIRED, {}), 0]


def _new_api_answers(bootstrap: str, log_dir: str, topic: str, group: str) -> dict:
    """Issue 43's APIs, each asked the same of a broker; the answers as comparable values."""
    def fields(body) -> dict:
        return {name: getattr(body, name) for name in body.__slots__}

    wire = Wire(bootstrap)
    try:
        out: dict = {}
        for v in (1, 2, 3):
            out[f"CreateDelegationToken v{v}"] = fields(wire.call(38, v, cdt.CreateDelegationTokenRequest(
                renewers=[], max_lifetime_ms=-1)))
        out["RenewDelegationToken"] = fields(wire.call(39, 2, rdt.RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1)))
        out["ExpireDelegationToken"] = fields(wire.call(40, 2, edt.ExpireDelegationTokenRequest(
            hmac=b"x", expiry_time_period_ms=1)))
        out["DescribeDelegationToken"] = fields(wire.call(41, 3, ddt.DescribeDelegationTokenRequest(owners=None)))
        out["UnregisterBroker"] = fields(wire.call(64, 0, ub.UnregisterBrokerRequest(broker_id=2)))
        for v, types in ((0, []), (1, []), (1, [2]), (1, [4, 8]), (1, [16, 32]), (1, [64]), (1, [2, 3])):
            answer = wire.call(74, v, lcr.ListConfigResourcesRequest(resource_types=types))
            # topics and groups of the test's own (each broker has its internal topics, and other tests'
            # topics and groups with configs: the reference broker is shared by a worker's test files)
            out[f"ListConfigResources v{v} {types}"] = (answer.error_code, sorted(
                (c.resource_type, c.resource_name) for c in answer.config_resources
                if c.resource_type not in (2, 32) or c.resource_name in (topic, group)))
        answer = wire.call(34, 2, arl.AlterReplicaLogDirsRequest(dirs=[
            arl.AlterReplicaLogDir(path=log_dir, topics=[arl.AlterReplicaLogDirTopic(name=topic, partitions=[0, 1, 7]),
                                                         arl.AlterReplicaLogDirTopic(name="no-such-topic", partitions=[0])]),
            arl.AlterReplicaLogDir(path="/no/such/dir", topics=[arl.AlterReplicaLogDirTopic(name=topic, partitions=[1])]),
            arl.AlterReplicaLogDir(path=log_dir, topics=[arl.AlterReplicaLogDirTopic(name="t" * 250, partitions=[0])]),
        ]))
        out["AlterReplicaLogDirs"] = sorted((t.topic_name, p.partition_index, p.error_code)
                                            for t in answer.results for p in t.partitions)
        for v in (2, 3):
            answer = wire.call(42, v, dg.DeleteGroupsRequest(groups_names=[group, f"no-such-{group}", group]))
            # (Kafka answers group by group as their __consumer_offsets partitions answer: in any order)
            out[f"DeleteGroups v{v}"] = sorted((fields(r) for r in answer.results), key=lambda r: r["group_id"])
            group = f"{group}-again"
        return out
    finally:
        wire.close()


def _prepare(bootstrap: str, topic: str, group: str) -> None:
    """A topic of two partitions, and groups that a consumer joined, committed in and left: Empty, with
    offsets, deletable. (Offsets committed without a member make a group that Kafka 4.4 can lose when
    the fresh __consumer_offsets partition is loaded again; a joined group is written down.)"""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    for name in (group, f"{group}-again"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": name, "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            for _ in range(120):
                consumer.poll(0.5)
                if consumer.assignment():
                    break
            assert consumer.assignment(), f"{name} got no assignment from {bootstrap}"
            consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        finally:
            consumer.close()


def test_issue_43_apis_answer_as_kafka_4_4(kafka_reference, kbroker):
    topic, group = f"surface-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _prepare(kafka_reference.bootstrap, topic, group)
    _prepare(kbroker.bootstrap, topic, group)
    kafka = _new_api_answers(kafka_reference.bootstrap, str(kafka_reference.log_dir), topic, group)
    ours = _new_api_answers(kbroker.bootstrap, str(kbroker.data_dir.resolve()), topic, group)
    assert ours == kafka
    assert kafka["AlterReplicaLogDirs"] == [
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (topic, 0, 0), (topic, 1, ErrorCode.LOG_DIR_NOT_FOUND),
        (topic, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t" * 250, 0, ErrorCode.INVALID_TOPIC_EXCEPTION)]


def _kafka_3_config_answers(bootstrap: str, topic: str) -> list:
    """Create, alter and incrementally alter a topic with Kafka 3's removed configs; each outcome."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: list = []

    def outcome(future) -> str:
        try:
            future.result(30)
            return "ok"
        except KafkaException as e:
            return f"{e.args[0].code()} {e.args[0].str()}"

    for name, value in (("message.format.version", "0.10.0.0"), ("message.format.version", "2.8.1"),
                        ("message.format.version", "3.0-IV1"), ("message.downconversion.enable", "true"),
                        ("message.timestamp.difference.max.ms", "1000")):
        out.append(outcome(admin.create_topics([NewTopic(f"{topic}-x", 1, 1, config={name: value})])[f"{topic}-x"]))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"message.format.version": "0.10.0.0"})
    out.append(outcome(admin.alter_configs([res])[res]))
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("message.format.version", "0.10.0.0", incremental_operation=AlterConfigOpType.SET)])
    out.append(outcome(admin.incremental_alter_configs([res])[res]))
    described = ConfigResource(ConfigResource.Type.TOPIC, topic)
    names: set[str] = set()
    for _ in range(20):  # Kafka's metadata may not have the topic yet (UNKNOWN_TOPIC_OR_PARTITION)
        try:
            names = set(admin.describe_configs([described])[described].result(30))
            break
        except KafkaException:
            continue
    out.append(sorted(names & {"message.format.version", "message.downconversion.enable",
                               "message.timestamp.difference.max.ms"}))
    return out


def test_kafka_3_topic_configs_are_refused_as_kafka_4_4_refuses_them(kafka_reference, kbroker):
    topic = f"mfv-{uuid.uuid4().hex[:8]}"
    kafka = _kafka_3_config_answers(kafka_reference.bootstrap, topic)
    assert _kafka_3_config_answers(kbroker.bootstrap, topic) == kafka
    assert kafka[0] == "40 Unknown topic config name: message.format.version" and kafka[-1] == []


def test_connections_max_reauth_ms_is_described_as_kafka_describes_it(kafka_reference, kbroker):
    """Its default row (0: no re-authentication), as Kafka 4.4 reports it: librdkafka's 0142 reads it."""
    from confluent_kafka.admin import ConfigResource

    rows = []
    for bootstrap in (kafka_reference.bootstrap, kbroker.bootstrap):
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        entry = admin.describe_configs([res])[res].result(30)["connections.max.reauth.ms"]
        rows.append((entry.value, entry.source, entry.is_read_only, entry.is_sensitive, entry.is_default,
                     [(s.name, s.value, s.source) for s in entry.synonyms.values()]))
    assert rows[0] == rows[1]
    assert rows[0][:2] == ("0", 5)
