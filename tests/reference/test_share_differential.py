"""Share groups' offsets APIs (DescribeShareGroupOffsets 90, AlterShareGroupOffsets 91,
DeleteShareGroupOffsets 92) and the GROUP config a share test sets, differentially: the same wire
requests to Apache Kafka 4.4 and to kbroker, the answers compared step by step. Each difference that
remains is listed below with its reason; the test fails on any other, and on a listed one that is gone."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.protocol.messages.alter_share_group_offsets_request import (AlterShareGroupOffsetsRequest,
                                                                         AlterShareGroupOffsetsRequestPartition,
                                                                         AlterShareGroupOffsetsRequestTopic)
from kbroker.protocol.messages.delete_share_group_offsets_request import (DeleteShareGroupOffsetsRequest,
                                                                          DeleteShareGroupOffsetsRequestTopic)
from kbroker.protocol.messages.describe_share_group_offsets_request import (DescribeShareGroupOffsetsRequest,
                                                                            DescribeShareGroupOffsetsRequestGroup,
                                                                            DescribeShareGroupOffsetsRequestTopic)
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.share_fetch_request import (AcknowledgementBatch, FetchPartition, FetchTopic,
                                                           ShareFetchRequest)
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

# step -> (Kafka 4.4's answer, kbroker's answer, why); none left
DIFFERENCES: dict[str, tuple[object, object, str]] = {}


def scenario(bootstrap: str, suffix: str) -> list[tuple[str, object]]:
    """The steps and their answers, with this run's names turned back into the plain ones."""
    topic, g2, ag, nog = f"so{suffix}", f"g2{suffix}", f"ag{suffix}", f"nog{suffix}"
    plain = {topic: "so", g2: "g2", ag: "ag", nog: "nog"}
    w = Wire(bootstrap)
    tid = topic_with_records(w, bootstrap, topic, 10, [g2, ag, nog])

    def describe(group, topics=None, version=1):
        until = time.monotonic() + 60
        while True:  # retried while the coordinator loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), as clients do
            answer = w.call(90, version, DescribeShareGroupOffsetsRequest(groups=[
                DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]))
            if answer.groups[0].error_code not in (14, 15, 16) or time.monotonic() > until:
                break
            time.sleep(0.5)
        return [(plain.get(g.group_id, g.group_id), g.error_code, g.error_message,
                 [(plain.get(t.topic_name, t.topic_name), t.topic_id == tid,
                   [(p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code, p.error_message)
                    for p in t.partitions]) for t in g.topics]) for g in answer.groups]

    def alter(group, name, partitions):
        answer = w.call(91, 0, AlterShareGroupOffsetsRequest(group_id=group, topics=[AlterShareGroupOffsetsRequestTopic(
            topic_name=name, partitions=[AlterShareGroupOffsetsRequestPartition(partition_index=i, start_offset=o)
                                         for i, o in partitions])]))
        return (answer.error_code, answer.error_message,
                [(plain.get(t.topic_name, t.topic_name), [(p.partition_index, p.error_code, p.error_message)
                                                          for p in t.partitions]) for t in answer.responses])

    def delete(group, names):
        answer = w.call(92, 0, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
            DeleteShareGroupOffsetsRequestTopic(topic_name=n) for n in names]))
        return (answer.error_code, answer.error_message,
                [(plain.get(t.topic_name, t.topic_name), t.error_code, t.error_message) for t in answer.responses])

    steps: list[tuple[str, object]] = [
        ("describe a group that does not exist, all topics", describe(nog)),
        ("describe a group that does not exist, a named partition",
         describe(nog, [DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])),
        ("describe an unknown topic", describe(nog, [DescribeShareGroupOffsetsRequestTopic(
            topic_name=f"nosuch{suffix}", partitions=[0])])),
        ("alter a group that does not exist", alter(ag, topic, [(0, 3)])),
        ("describe it after", describe(ag)),
        ("alter an unknown topic", alter(ag, f"nosuch{suffix}", [(0, 3)])),
        ("alter past the log end", alter(ag, topic, [(0, 50)])),
        ("describe it after (past the end)", describe(ag)),
        ("alter to a negative offset", alter(ag, topic, [(0, -5)])),
        ("describe it after (negative)", describe(ag)),
    ]
    configured = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=32, resource_name=g2, configs=[AlterableConfig(
            name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))
    steps.append(("set share.auto.offset.reset=earliest",
                  [(r.error_code, r.error_message) for r in configured.responses]))
    member, epoch = str(uuid.uuid4()), 0
    for _ in range(30):
        beat = w.call(76, 1, ShareGroupHeartbeatRequest(group_id=g2, member_id=member, member_epoch=epoch,
                                                        rack_id=None, subscribed_topic_names=[topic]))
        epoch = beat.member_epoch if beat.error_code == 0 else epoch
        if beat.assignment and beat.assignment.topic_partitions:
            break
        time.sleep(0.5)
    session, got = 0, []
    for _ in range(10):
        fetched = w.call(78, 1, ShareFetchRequest(
            group_id=g2, member_id=member, share_session_epoch=session, max_wait_ms=1000, min_bytes=1,
            max_bytes=1 << 20, max_records=4, batch_size=4, topics=[FetchTopic(topic_id=tid, partitions=[
                FetchPartition(partition_index=0, acknowledgement_batches=[])])], forgotten_topics_data=[]))
        session += 1
        got = [(a.first_offset, a.last_offset, a.delivery_count)
               for t in fetched.responses for p in t.partitions for a in p.acquired_records]
        if got:
            break
    steps.append(("a member fetches (MaxRecords 4, one batch of 10)", got))
    acked = w.call(78, 1, ShareFetchRequest(
        group_id=g2, member_id=member, share_session_epoch=session, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        max_records=1, batch_size=1, topics=[FetchTopic(topic_id=tid, partitions=[FetchPartition(
            partition_index=0, acknowledgement_batches=[AcknowledgementBatch(first_offset=0, last_offset=1,
                                                                             acknowledge_types=[1])])])],
        forgotten_topics_data=[]))
    steps.append(("accept 0-1", [p.acknowledge_error_code for t in acked.responses for p in t.partitions]))
    time.sleep(1)  # Kafka's acknowledgement reaches its share coordinator after the answer
    steps += [
        ("describe the group with its member (v1)", describe(g2)),
        ("describe the group with its member (v0)", describe(g2, version=0)),
        ("alter a group with a member", alter(g2, topic, [(0, 1)])),
        ("delete offsets of a group with a member", delete(g2, [topic])),
        ("delete offsets of an empty group", delete(ag, [topic, f"nosuch{suffix}"])),
        ("describe it after the delete", describe(ag)),
    ]
    w.close()
    return steps


def topic_with_records(w: Wire, bootstrap: str, topic: str, records: int, groups: list[str]) -> uuid.UUID:
    """`topic` made (auto-created, one partition here) with `records` records in partition 0, once the
    coordinators of `groups` are loaded; its topic id."""
    w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
    deadline = time.monotonic() + 60
    while any(c.error_code != 0 for c in w.call(10, 4, FindCoordinatorRequest(
            key_type=0, coordinator_keys=groups)).coordinators):  # every group's coordinator loaded
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.5)
    while True:  # Kafka's metadata lags its creation a moment (its topic id is all zeros until then)
        tid = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=False)).topics[0].topic_id
        if tid.int != 0:
            break
        assert time.monotonic() < deadline, f"{topic} has no topic id"
        time.sleep(0.2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for _ in range(records):
        producer.produce(topic, b"x", partition=0)
    assert producer.flush(10) == 0
    return tid


def test_share_offsets_apis_answer_as_kafka(kafka_reference, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    kafka_steps = scenario(kafka_reference.bootstrap, suffix)
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as kbroker:
        kbroker_steps = scenario(kbroker.bootstrap, suffix)
    assert_steps_as_kafka(kafka_steps, kbroker_steps, DIFFERENCES)


def assert_steps_as_kafka(kafka_steps: list[tuple[str, object]], kbroker_steps: list[tuple[str, object]],
                          differences: dict[str, tuple[object, object, str]]) -> None:
    """The same steps, each answered as Kafka answered it or listed in `differences` (step -> Kafka's
    answer, kbroker's, why) with exactly those answers; a listed difference no longer seen fails too."""
    assert [name for name, _ in kafka_steps] == [name for name, _ in kbroker_steps]
    unexpected, listed_but_equal = [], []
    for (name, on_kafka), (_, on_kbroker) in zip(kafka_steps, kbroker_steps):
        listed = differences.get(name)
        if listed is not None:
            assert (on_kafka, on_kbroker) == listed[:2] or on_kafka != on_kbroker, name
            if on_kafka == on_kbroker:
                listed_but_equal.append(name)
            continue
        if on_kafka != on_kbroker:
            unexpected.append((name, on_kafka, on_kbroker))
    assert not unexpected, "\n".join(f"{n}:\n  kafka   {k}\n  kbroker {b}" for n, k, b in unexpected)
    assert not listed_but_equal, f"listed differences no longer seen: {listed_but_equal}"
