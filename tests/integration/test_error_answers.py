"""Errors are answered where Kafka answers, and internal topics are protected (issue 10, §6, §7, §9),
against a real broker process.

- a 32,767-byte group.instance.id is refused with INVALID_REQUEST, so it can no longer make the
  group's non-flexible JoinGroup/DescribeGroups answers unencodable;
- a response that cannot be encoded (a JoinGroup member id built from a 32,767-byte client id)
  becomes that request's UNKNOWN_SERVER_ERROR answer; the connection keeps serving;
- Metadata v10/v11 with a null topic name: INVALID_REQUEST; an error message longer than an int16
  string is cut;
- a full disk (a 4 MiB tmpfs): Produce answers KAFKA_STORAGE_ERROR, OffsetCommit NOT_COORDINATOR,
  other requests are served, and after a restart with space back every acknowledged commit is there;
- AlterConfigs/IncrementalAlterConfigs that would let retention delete __consumer_offsets, and
  CreatePartitions on it, are refused with POLICY_VIOLATION (the whole policy, and Kafka's answers:
  test_internal_topic_policy.py).
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid

import pytest

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

TIMEOUT = 15


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("answers") / "data", "--offsets-topic-num-partitions", "50",
                         "--no-auto-create-topics-enable", "--group-initial-rebalance-delay-ms", "0")
    yield proc
    proc.stop()


def join(wire: Wire, version: int, group: str, instance_id: str | None = None, member_id: str = ""):
    return wire.call(11, version, JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"\x00\x01")]))


def served(wire: Wire) -> bool:
    return wire.call(18, 3, ApiVersionsRequest("t", "1")).error_code == ErrorCode.NONE


def test_an_oversized_group_instance_id_is_refused(broker):
    wire = Wire(broker.bootstrap)
    for version in (5, 7, 9):
        refused = join(wire, version, "static-g", instance_id="i" * 32767)
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        assert join(wire, version, "static-g", instance_id="bad id!").error_code == ErrorCode.INVALID_REQUEST
    # The group stays describable in every version, and a legal static member joins.
    ok = join(wire, 5, "static-g", instance_id="i" * 249)
    assert ok.error_code == ErrorCode.NONE, ok
    for version in (0, 4, 5):
        described = wire.call(15, version, DescribeGroupsRequest(["static-g"]))
        assert described.groups[0].error_code == ErrorCode.NONE
    assert broker.events("join_group_refused")
    wire.close()


def test_an_unencodable_response_becomes_an_error_answer(broker):
    # Kafka's member id is "<client id>-<uuid>": from a 32,767-byte client id it cannot fit the
    # int16 string of a non-flexible JoinGroup response.
    wire = Wire(broker.bootstrap, client_id="c" * 32767)
    answer = join(wire, 5, "long-client-g")
    assert answer.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert served(wire)  # same connection, still open
    assert broker.events("response_encode_failed")
    other = Wire(broker.bootstrap)  # and the group is not locked for anyone else
    first = join(other, 5, "long-client-g")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert join(other, 5, "long-client-g", member_id=first.member_id).error_code == ErrorCode.NONE
    wire.close()
    other.close()


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_below_v12_is_invalid_request(broker, version):
    wire = Wire(broker.bootstrap)
    response = wire.call(3, version, MetadataRequest(topics=[MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)]))
    assert [(t.name, t.error_code) for t in response.topics] == [("", ErrorCode.INVALID_REQUEST)]
    assert served(wire)
    wire.close()


def test_an_over_long_error_message_is_cut_not_fatal(broker):
    wire = Wire(broker.bootstrap)
    name = "t" * 32700  # "... does not host this topic-partition: <name>-0" is longer than 32,767 bytes
    batch = encode_batch([Record(0, 0, b"k", b"v")])
    response = wire.call(0, 8, ProduceRequest(None, 1, 5000, [
        TopicProduceData(name, partition_data=[PartitionProduceData(0, batch)])]))
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert 0 < len(partition.error_message.encode()) <= 32767
    assert served(wire)
    wire.close()


# --- internal topics --------------------------------------------------------------------------------

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)


def error_of(future):
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as e:
        return e.args[0]
    return None


def test_internal_topics_cannot_lose_their_records(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets",
                         set_config={"cleanup.policy": "delete", "retention.ms": "1000"})
    error = error_of(admin.alter_configs([res])[res])
    assert error is not None and error.code() == ErrorCode.POLICY_VIOLATION
    for policy in ("delete", "compact,delete"):
        inc = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets", incremental_configs=[
            ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)])
        error = error_of(admin.incremental_alter_configs([inc])[inc])
        assert error is not None and error.code() == ErrorCode.POLICY_VIOLATION
    grow = admin.create_partitions([NewPartitions("__consumer_offsets", 60)])["__consumer_offsets"]
    error = error_of(grow)
    assert error is not None and error.code() == ErrorCode.POLICY_VIOLATION
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")])
    configs = list(described.values())[0].result(timeout=TIMEOUT)
    assert configs["cleanup.policy"].value == "compact"
    assert len(admin.list_topics("__consumer_offsets", timeout=TIMEOUT).topics["__consumer_offsets"].partitions) == 50
    # A harmless change to an internal topic is still allowed.
    ok = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets", incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "0.4", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([ok])[ok]) is None


# --- a full disk ------------------------------------------------------------------------------------


def commit(wire: Wire, offset: int, metadata: str = "") -> int:
    response = wire.call(8, 8, OffsetCommitRequest("disk-g", -1, "", None, -1, [
        OffsetCommitRequestTopic("data", partitions=[
            OffsetCommitRequestPartition(0, offset, committed_metadata=metadata)])]))
    return response.topics[0].partitions[0].error_code


def fetched_offset(wire: Wire) -> tuple[int, int]:
    response = wire.call(9, 7, OffsetFetchRequest("disk-g", [OffsetFetchRequestTopic("data", [0])], require_stable=True))
    if response.error_code != ErrorCode.NONE:
        return response.error_code, -1
    p = response.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def produce(wire: Wire, topic: str, size: int) -> int:
    batch = encode_batch([Record(0, 0, b"k", os.urandom(size))])
    response = wire.call(0, 9, ProduceRequest(None, -1, 5000, [
        TopicProduceData(topic, partition_data=[PartitionProduceData(0, batch)])]))
    return response.responses[0].partition_responses[0].error_code


def fetch_error(wire: Wire) -> int:
    response = wire.call(1, 11, FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchTopic(topic="data", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    return response.responses[0].partitions[0].error_code


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True,
                       capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {e}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path) -> None:
    """Take the filesystem's last free byte."""
    with open(path, "wb", buffering=0) as fh:
        for size in (1 << 16, 1 << 12, 1 << 8, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC


def test_a_full_disk_is_answered_not_a_dropped_connection(tiny_disk):
    # The data dir is the mount itself, so the broker's own log (written beside it) is not on it.
    broker = BrokerProcess(tiny_disk, "--offsets-topic-num-partitions", "1", "--num-partitions", "1",
                           "--create-topics", "data:1")
    try:
        wire = Wire(broker.bootstrap)
        assert produce(wire, "data", 100) == ErrorCode.NONE
        assert commit(wire, 1) == ErrorCode.NONE
        assert fetched_offset(wire) == (ErrorCode.NONE, 1)
        errors = [produce(wire, "data", 256 * 1024) for _ in range(24)]  # 6 MiB into 4 MiB
        assert ErrorCode.KAFKA_STORAGE_ERROR in errors
        assert errors[errors.index(ErrorCode.KAFKA_STORAGE_ERROR):] == [ErrorCode.KAFKA_STORAGE_ERROR] * (
            len(errors) - errors.index(ErrorCode.KAFKA_STORAGE_ERROR))  # fenced: no success after a failure
        fill(tiny_disk / "filler")
        # A commit may still fit the last page of the segment file; 4 KB ones soon need a new one.
        answers = [commit(wire, offset, "m" * 4000) for offset in range(2, 12)]
        assert ErrorCode.NOT_COORDINATOR in answers, answers
        first_failure = answers.index(ErrorCode.NOT_COORDINATOR)
        assert set(answers[:first_failure]) <= {ErrorCode.NONE}
        assert set(answers[first_failure:]) == {ErrorCode.NOT_COORDINATOR}  # fenced, even if space frees
        acknowledged = 1 + first_failure  # offsets 2.. were committed in order
        assert fetched_offset(wire)[0] == ErrorCode.NOT_COORDINATOR  # never the commit that failed
        assert served(wire)
        assert wire.call(3, 12, MetadataRequest(topics=None)).topics
        assert fetch_error(wire) == ErrorCode.KAFKA_STORAGE_ERROR  # its tail may never reach the disk
        assert broker.events("log_fenced")
        os.remove(tiny_disk / "filler")
        wire.close()
        broker.stop()
        broker.start()
        wire = Wire(broker.bootstrap)
        assert fetched_offset(wire) == (ErrorCode.NONE, acknowledged)  # every acknowledged commit survived
        assert produce(wire, "data", 100) == ErrorCode.NONE  # recovered logs take appends again
        assert fetch_error(wire) == ErrorCode.NONE
        assert commit(wire, 100) == ErrorCode.NONE
        wire.close()
    finally:
        if broker.running:
            broker.stop()
