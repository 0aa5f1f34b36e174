"""`share.version` lowered and raised at run time (UpdateFeatures 57), differentially: the same wire
requests to Apache Kafka 4.4 (a node of its own: this test changes its features) and to kbroker, the
answers compared step by step. Kafka's FeatureControlManager takes share.version 2 -> 1 -> 0 as safe or
unsafe downgrades; at 0 every share API answers UNSUPPORTED_VERSION (KafkaApis' isShareGroupProtocolEnabled),
ApiVersions no longer finalizes it, and the broker drops its share sessions and share-partitions
(SharePartitionManager.onShareVersionToggle), so after an upgrade a member's old session is gone and
what it had acquired is delivered again. Each difference that remains is listed below with its reason;
the test fails on any other, and on a listed one that is gone."""

from __future__ import annotations

import time
import uuid

from kbroker.protocol.messages.alter_share_group_offsets_request import (AlterShareGroupOffsetsRequest,
                                                                         AlterShareGroupOffsetsRequestPartition,
                                                                         AlterShareGroupOffsetsRequestTopic)
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.delete_share_group_offsets_request import (DeleteShareGroupOffsetsRequest,
                                                                          DeleteShareGroupOffsetsRequestTopic)
from kbroker.protocol.messages.describe_share_group_offsets_request import (DescribeShareGroupOffsetsRequest,
                                                                            DescribeShareGroupOffsetsRequestGroup)
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.protocol.messages.list_groups_request import ListGroupsRequest
from kbroker.protocol.messages.share_acknowledge_request import (AcknowledgementBatch as AckBatch,
                                                                 AcknowledgePartition, AcknowledgeTopic,
                                                                 ShareAcknowledgeRequest)
from kbroker.protocol.messages.share_fetch_request import FetchPartition, FetchTopic, ShareFetchRequest
from kbroker.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.protocol.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.test_share_differential import assert_steps_as_kafka, topic_with_records

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

# step -> (Kafka 4.4's answer, kbroker's answer, why)
DIFFERENCES: dict[str, tuple[object, object, str]] = {
    "a new session acquires again what was acquired, past what was accepted": (
        (0, None, [(0, 0, [(2, 5, 1)])]), (0, None, [(0, 0, [(2, 5, 2)])]),
        "kbroker writes a share-partition's whole state, its acquired records as AVAILABLE with their delivery "
        "count; Kafka writes only the records an acknowledgement changed, so records acquired and never "
        "acknowledged start again from count 0 when it reloads the state (after a restart too). "
        "docs/share-groups.md, 'Durability: what differs from Kafka'."),
}


def share_version(w: Wire) -> tuple[int | None, tuple[int, int] | None]:
    """ApiVersions v4: the finalized share.version (None: not finalized, i.e. 0) and its supported range."""
    answer = w.call(18, 4, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    return finalized.get("share.version"), supported.get("share.version")


def scenario(bootstrap: str, suffix: str) -> list[tuple[str, object]]:
    topic, group = f"sv{suffix}", f"svg{suffix}"
    w = Wire(bootstrap)
    tid = topic_with_records(w, bootstrap, topic, 6, [group])
    w.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[AlterableConfig(
            name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))

    def update(feature: str, level: int, kind: int, *, version: int = 1, validate_only: bool = False,
               allow_downgrade: bool = False):
        answer = w.call(57, version, UpdateFeaturesRequest(timeout_ms=30000, validate_only=validate_only, feature_updates=[
            FeatureUpdateKey(feature=feature, max_version_level=level, allow_downgrade=allow_downgrade,
                             upgrade_type=kind)]))
        return (answer.error_code, answer.error_message,
                [(r.feature, r.error_code, r.error_message) for r in answer.results])

    def levels(expected: int | None = None):
        """share.version as ApiVersions says, once it says `expected` (Kafka's broker applies a change
        a moment after its controller answers)."""
        until = time.monotonic() + 30
        seen = share_version(w)
        while expected is not None and seen[0] != (expected or None) and time.monotonic() < until:
            time.sleep(0.2)
            seen = share_version(w)
        return seen

    member, epoch = str(uuid.uuid4()), 0

    def heartbeat():
        nonlocal epoch
        beat = w.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                        rack_id=None, subscribed_topic_names=[topic]))
        epoch = beat.member_epoch if beat.error_code == 0 else epoch
        return beat

    def fetch(session: int):
        answer = w.call(78, 1, ShareFetchRequest(
            group_id=group, member_id=member, share_session_epoch=session, max_wait_ms=500, min_bytes=1,
            max_bytes=1 << 20, max_records=100, batch_size=100, topics=[FetchTopic(topic_id=tid, partitions=[
                FetchPartition(partition_index=0, acknowledgement_batches=[])])], forgotten_topics_data=[]))
        return (answer.error_code, answer.error_message,
                [(p.partition_index, p.error_code, [(a.first_offset, a.last_offset, a.delivery_count)
                                                   for a in p.acquired_records])
                 for t in answer.responses for p in t.partitions])

    def acknowledge(session: int, first: int, last: int):
        answer = w.call(79, 1, ShareAcknowledgeRequest(
            group_id=group, member_id=member, share_session_epoch=session, topics=[AcknowledgeTopic(
                topic_id=tid, partitions=[AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                    AckBatch(first_offset=first, last_offset=last, acknowledge_types=[1])])])]))
        return (answer.error_code, answer.error_message,
                [(p.partition_index, p.error_code) for t in answer.responses for p in t.partitions])

    def listed():
        answer = w.call(16, 5, ListGroupsRequest(types_filter=["share"]))
        return answer.error_code, sorted((g.group_id.replace(suffix, ""), g.group_type) for g in answer.groups
                                         if g.group_id == group)

    steps: list[tuple[str, object]] = [("ApiVersions at the start", levels(2))]
    for _ in range(60):  # Kafka assigns once its share coordinator has initialized the share-partition
        beat = heartbeat()
        if beat.assignment and beat.assignment.topic_partitions:
            break
        time.sleep(0.5)
    steps.append(("a member joins", (beat.error_code, [p for t in beat.assignment.topic_partitions
                                                      for p in t.partitions])))
    session, got = 0, None
    for _ in range(20):  # Kafka omits a share-partition whose state it is still initializing
        got = fetch(session)
        session += 1
        if got[2] and got[2][0][2]:
            break
    steps += [
        ("the member acquires the six records", got),
        ("it accepts 0-1", acknowledge(session, 0, 1)),
        ("validate only: 2 -> 1 as a safe downgrade", update("share.version", 1, SAFE_DOWNGRADE, validate_only=True)),
        ("ApiVersions after validate only", levels()),
        ("2 -> 1 sent as an upgrade", update("share.version", 1, UPGRADE)),
        ("2 -> 3, past the supported levels", update("share.version", 3, UPGRADE)),
        ("a negative level", update("share.version", -1, SAFE_DOWNGRADE)),
        ("an unknown upgrade type", update("share.version", 1, 7)),
        ("2 -> 1 as a safe downgrade", update("share.version", 1, SAFE_DOWNGRADE)),
        ("ApiVersions at 1", levels(1)),
        ("1 -> 2 sent as a downgrade", update("share.version", 2, SAFE_DOWNGRADE)),
        ("a heartbeat at 1", heartbeat().error_code),  # its epoch: see docs/share-groups.md, "One difference"
    ]
    session += 1
    steps += [
        ("the session goes on at 1 (nothing new to acquire)", fetch(session)),
        ("1 -> 0 as an unsafe downgrade", update("share.version", 0, UNSAFE_DOWNGRADE)),
        ("ApiVersions at 0", levels(0)),
    ]
    beat = heartbeat()
    steps.append(("ShareGroupHeartbeat at 0", (beat.error_code, beat.error_message, beat.member_id,
                                               beat.member_epoch, beat.heartbeat_interval_ms, beat.assignment)))
    session += 1
    steps.append(("ShareFetch at 0", fetch(session)))
    steps.append(("ShareAcknowledge at 0", acknowledge(session + 1, 2, 3)))
    described = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
    steps.append(("ShareGroupDescribe at 0", [(g.group_id.replace(suffix, ""), g.error_code, g.error_message)
                                              for g in described.groups]))
    offsets = w.call(90, 1, DescribeShareGroupOffsetsRequest(groups=[
        DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    steps.append(("DescribeShareGroupOffsets at 0", [(g.group_id.replace(suffix, ""), g.error_code,
                                                      g.error_message, len(g.topics)) for g in offsets.groups]))
    altered = w.call(91, 0, AlterShareGroupOffsetsRequest(group_id=group, topics=[AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]))
    steps.append(("AlterShareGroupOffsets at 0", (altered.error_code, altered.error_message, len(altered.responses))))
    deleted = w.call(92, 0, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]))
    steps.append(("DeleteShareGroupOffsets at 0", (deleted.error_code, deleted.error_message, len(deleted.responses))))
    steps += [
        ("ListGroups at 0: the group stays", listed()),
        ("0 -> 2 through v0 (an upgrade)", update("share.version", 2, UPGRADE, version=0)),
        ("ApiVersions at 2 again", levels(2)),
        ("the member heartbeats again", heartbeat().error_code),
        ("its old session is gone", fetch(session + 2)),
    ]
    got = None
    for _ in range(20):
        got = fetch(0)
        if got[2] and got[2][0][2]:
            break
    steps.append(("a new session acquires again what was acquired, past what was accepted", got))
    w.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1, rack_id=None,
                                             subscribed_topic_names=None))
    w.close()
    return steps


def test_share_version_lowered_and_raised_as_kafka(tmp_path):
    from kbroker.tests.reference.kafka import KafkaProcess, require_kafka_libs

    require_kafka_libs()
    suffix = uuid.uuid4().hex[:6]
    with KafkaProcess(tmp_path / "kafka") as kafka:
        kafka_steps = scenario(kafka.bootstrap, suffix)
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as kbroker:
        kbroker_steps = scenario(kbroker.bootstrap, suffix)
    assert_steps_as_kafka(kafka_steps, kbroker_steps, DIFFERENCES)
