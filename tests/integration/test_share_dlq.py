"""Share groups' dead letter queues (KIP-1191, share.version 2) against a real broker process: a
rejected record and a record over the delivery count limit are copied to the group's DLQ topic with
Kafka 4.4's headers (and key and value when errors.deadletterqueue.copy.record.enable), exactly once,
also across a kill -9 between the copy and the state that records it; a topic Kafka refuses as a DLQ
gets nothing and the record is archived all the same."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid

from kbroker.protocol import record_batch as rb
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.broker_process import post_control as control
from kbroker.tests.integration.test_group_configs import SET, alter
from kbroker.tests.integration.test_share_durability import joined
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup
from kbroker.tests.integration.wire import Wire

ACCEPT, RELEASE, REJECT = 1, 2, 3
HEADERS = ["__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset", "__dlq.errors.group",
           "__dlq.errors.delivery.count", "__dlq.errors.message"]


def broker_with_controls(tmp_path, *args: str) -> BrokerProcess:
    admin = free_port()
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1", "--metrics-listen", f"127.0.0.1:{admin}",
                           "--test-controls", *args)
    broker.admin_url = f"http://127.0.0.1:{admin}"
    broker.token = (broker.data_dir / "test-controls.token").read_text().strip()
    return broker


def create_topic(broker, name: str, partitions: int = 1, dlq: bool = True, **more: str) -> None:
    configs = [CreatableTopicConfig(name="errors.deadletterqueue.group.enable", value="true")] if dlq else []
    configs += [CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in more.items()]
    w = Wire(broker.bootstrap)
    try:
        answer = w.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=configs)],
            timeout_ms=10_000, validate_only=False))
        assert answer.topics[0].error_code == 0, answer.topics[0].error_message
    finally:
        w.close()


def configure(broker, group: str, **configs: str) -> None:
    w = Wire(broker.bootstrap)
    try:
        ops = [(name.replace("_", "."), SET, value) for name, value in configs.items()]
        assert alter(w, group, ops).error_code == 0
    finally:
        w.close()


def dlq_records(broker, topic: str, partition: int = 0, expect: int = 0) -> list[rb.Record]:
    """What the DLQ topic-partition holds, waiting up to 10 s for `expect` records."""
    w = Wire(broker.bootstrap)
    try:
        deadline = time.monotonic() + 10
        while True:
            answer = w.call(1, 12, FetchRequest(
                max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                    partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])]))
            part = answer.responses[0].partitions[0]
            if part.error_code == 3 and time.monotonic() < deadline:  # an auto-created one may not be there yet
                time.sleep(0.1)
                continue
            assert part.error_code == 0
            records = [r for _, batch in rb.decode_batches(bytes(part.records or b"")) for r in batch]
            if len(records) >= expect or time.monotonic() > deadline:
                return records
            time.sleep(0.1)
    finally:
        w.close()


def metric(broker, name: str, group: str, expect: float) -> float:
    """The group's counter, once it is `expect` or after 10 s (the copies are written after the answer)."""
    deadline = time.monotonic() + 10
    while True:
        text = urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10).read().decode()
        found = re.search(rf'^{name}\{{group="{re.escape(group)}"\}} (\S+)$', text, re.MULTILINE)
        assert found, (name, [line for line in text.splitlines() if "dead_letter" in line])
        if float(found.group(1)) == expect or time.monotonic() > deadline:
            return float(found.group(1))
        time.sleep(0.1)


def headers_of(record: rb.Record) -> list[tuple[str, str]]:
    return [(k, (v or b"").decode()) for k, v in record.headers]


def test_share_version_2_is_finalized_as_kafka_44_does(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        w = Wire(broker.bootstrap)
        answer = w.call(18, 4, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert {f.name: f.max_version_level for f in answer.finalized_features}["share.version"] == 2
        assert {f.name: f.max_version for f in answer.supported_features}["share.version"] == 2


def test_rejected_and_poison_records_are_copied_with_kafkas_headers(tmp_path):
    broker = broker_with_controls(tmp_path)
    try:
        topic, topic_id, group = setup(broker, 0)
        dlq = f"dlq.{uuid.uuid4().hex[:6]}"
        create_topic(broker, dlq, partitions=3)
        configure(broker, group, **{"errors.deadletterqueue.topic.name": dlq,
                                    "errors.deadletterqueue.copy.record.enable": "true",
                                    "share.delivery.count.limit": "2"})
        a = Member(broker, group, topic, topic_id)
        assert acquired(a.fetch()) == []
        produce(broker, topic, 3)
        assert acquired(a.fetch(max_records=3, max_wait_ms=5_000)) == [(0, 2, 1)]
        # 0 rejected; 1 released (delivered again, then released at the limit); 2 accepted
        ack = a.acknowledge([(0, 2, [REJECT, RELEASE, ACCEPT])])
        assert [p.error_code for t in ack.responses for p in t.partitions] == [0]
        assert acquired(a.fetch(max_records=3, max_wait_ms=5_000)) == [(1, 1, 2)]
        ack = a.acknowledge([(1, 1, [RELEASE])])
        assert [p.error_code for t in ack.responses for p in t.partitions] == [0]
        copies = dlq_records(broker, dlq, partition=0, expect=2)  # source partition 0 % 3
        assert [(r.key, r.value) for r in copies] == [(None, b"v0"), (None, b"v1")]
        assert [headers_of(r) for r in copies] == [
            list(zip(HEADERS, [topic, "0", "0", group, "1", "Offset rejected by client."])),
            list(zip(HEADERS, [topic, "0", "1", group, "2", "Offset delivery count exceeded the threshold."]))]
        assert dlq_records(broker, dlq, partition=1) == dlq_records(broker, dlq, partition=2) == []
        # both are done: nothing comes back, and a new record is next
        produce(broker, topic, 1)
        assert acquired(a.fetch(max_records=10, max_wait_ms=5_000)) == [(3, 3, 1)]

        # without copy.record.enable: headers only
        configure(broker, group, **{"errors.deadletterqueue.copy.record.enable": "false"})
        a.fetch(acks=[(3, 3, [REJECT])])
        copies = dlq_records(broker, dlq, expect=3)
        assert (copies[2].key, copies[2].value, headers_of(copies[2])[2]) == (None, None, ("__dlq.errors.offset", "3"))
        assert metric(broker, "kbroker_share_dead_letter_records_total", group, 3) == 3
        assert metric(broker, "kbroker_share_dead_letter_failures_total", group, 0) == 0
    finally:
        broker.kill()


def test_a_topic_kafka_refuses_as_a_dlq_gets_nothing_and_the_record_is_archived(tmp_path):
    broker = broker_with_controls(tmp_path)
    try:
        topic, topic_id, group = setup(broker, 0)
        plain, unprefixed = f"dlq.plain-{uuid.uuid4().hex[:6]}", f"x-{uuid.uuid4().hex[:6]}"
        create_topic(broker, plain, dlq=False)  # no errors.deadletterqueue.group.enable
        create_topic(broker, unprefixed)  # not under errors.deadletterqueue.topic.name.prefix (dlq.)
        a = Member(broker, group, topic, topic_id)
        a.fetch()
        produce(broker, topic, 3)
        assert acquired(a.fetch(max_records=3, max_wait_ms=5_000)) == [(0, 2, 1)]
        configure(broker, group, **{"errors.deadletterqueue.topic.name": plain})
        a.fetch(acks=[(0, 0, [REJECT])])
        configure(broker, group, **{"errors.deadletterqueue.topic.name": unprefixed})
        a.fetch(acks=[(1, 1, [REJECT])])
        configure(broker, group, **{"errors.deadletterqueue.topic.name": "dlq.missing"})  # not auto-created
        a.fetch(acks=[(2, 2, [REJECT])])
        produce(broker, topic, 1)
        assert acquired(a.fetch(max_records=10, max_wait_ms=5_000)) == [(3, 3, 1)]  # 0-2 archived
        assert dlq_records(broker, plain) == dlq_records(broker, unprefixed) == []
        w = Wire(broker.bootstrap)
        from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
        missing = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="dlq.missing")],
                                                allow_auto_topic_creation=False)).topics[0]
        assert missing.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION: not made
        assert metric(broker, "kbroker_share_dead_letter_failures_total", group, 3) == 3
        assert metric(broker, "kbroker_share_dead_letter_records_total", group, 0) == 0
    finally:
        broker.kill()


def test_copies_are_split_by_the_dlq_topics_max_message_bytes(tmp_path):
    broker = broker_with_controls(tmp_path)
    try:
        topic, topic_id, group = setup(broker, 0)
        dlq = f"dlq.small-{uuid.uuid4().hex[:6]}"
        create_topic(broker, dlq, max_message_bytes="2000")
        configure(broker, group, **{"errors.deadletterqueue.topic.name": dlq,
                                    "errors.deadletterqueue.copy.record.enable": "true"})
        a = Member(broker, group, topic, topic_id)
        a.fetch()
        w = Wire(broker.bootstrap)
        from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
        batch = rb.encode_batch([rb.Record(i, int(time.time() * 1000), None, bytes([65 + i]) * 600) for i in range(5)])
        assert w.call(0, 9, ProduceRequest(None, -1, 5000, [TopicProduceData(topic, partition_data=[
            PartitionProduceData(0, batch)])])).responses[0].partition_responses[0].error_code == 0
        assert acquired(a.fetch(max_records=5, max_wait_ms=5_000)) == [(0, 4, 1)]
        a.fetch(acks=[(0, 4, [REJECT])])  # five copies of 600 bytes: two to a batch of 2000 bytes at most
        copies = dlq_records(broker, dlq, expect=5)
        assert [r.value for r in copies] == [bytes([65 + i]) * 600 for i in range(5)]
        fetched = w.call(1, 12, FetchRequest(
            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchTopic(topic=dlq, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                     partition_max_bytes=1 << 20)])]))
        sizes = [h.size for _, h in rb.iter_batches(bytes(fetched.responses[0].partitions[0].records))]
        assert len(sizes) == 3 and max(sizes) <= 2000, sizes
    finally:
        broker.kill()


def test_auto_created_dlq_topic(tmp_path):
    broker = broker_with_controls(tmp_path, "--errors-deadletterqueue-auto-create-topics-enable")
    try:
        topic, topic_id, group = setup(broker, 0)
        dlq = f"dlq.auto-{uuid.uuid4().hex[:6]}"
        configure(broker, group, **{"errors.deadletterqueue.topic.name": dlq})
        a = Member(broker, group, topic, topic_id)
        a.fetch()
        produce(broker, topic, 1)
        assert acquired(a.fetch(max_records=3, max_wait_ms=5_000)) == [(0, 0, 1)]
        a.fetch(acks=[(0, 0, [REJECT])])
        copies = dlq_records(broker, dlq, expect=1)
        assert [(r.value, headers_of(r)[2]) for r in copies] == [(None, ("__dlq.errors.offset", "0"))]
    finally:
        broker.kill()


def test_a_kill_9_between_the_phases_neither_loses_nor_duplicates_a_copy(tmp_path):
    """The reject's ARCHIVING state is in the page cache only when the broker is killed (its fsync held):
    the restart finds it ARCHIVING and writes the copy. That copy's fsync is held too and the broker
    killed again: the next start finds the record ARCHIVING still, and the copy already in the DLQ
    partition, so it writes none again. The record is never delivered again."""
    broker = broker_with_controls(tmp_path, "--flush", "always")
    try:
        topic, topic_id, group = setup(broker, 0)
        dlq = f"dlq.{uuid.uuid4().hex[:6]}"
        create_topic(broker, dlq)
        configure(broker, group, **{"errors.deadletterqueue.topic.name": dlq})
        a = Member(broker, group, topic, topic_id)
        a.fetch()
        produce(broker, topic, 2)
        assert acquired(a.fetch(max_records=2, max_wait_ms=5_000)) == [(0, 1, 1)]
        assert control(broker, "storage/fsync/hold", {"seconds": 120})["held"]
        a.wire.send(79, 1, _ack_request(a, [(0, 0, [REJECT])]))  # never answered: its write is not durable
        _wait_held(broker)
        _killed_and_started(broker)
        assert dlq_records(broker, dlq) == []

        b = joined(broker, group, topic, topic_id)
        assert control(broker, "storage/fsync/hold", {"seconds": 120})["held"]
        got = acquired(b.fetch(max_records=10, max_wait_ms=2_000))  # starts the share-partition: the copy
        assert got == [(1, 1, 2)], got  # 0 is ARCHIVING, never delivered again
        _wait_held(broker)
        _killed_and_started(broker)

        c = joined(broker, group, topic, topic_id)
        c.fetch(max_records=10, max_wait_ms=2_000)
        copies = dlq_records(broker, dlq, expect=2)
        time.sleep(1)  # a second copy, if one were written, would be there by now
        copies = dlq_records(broker, dlq, expect=2)
        assert [headers_of(r)[2] for r in copies] == [("__dlq.errors.offset", "0")]
        resumed = [(line["archiving"], line["already_written"]) for start in (2, 3)
                   for line in broker.log_lines(start) if line.get("event") == "share_dlq_resumed"]
        assert resumed == [(1, 0), (1, 1)]  # the second start found the first one's copy
        assert headers_of(copies[0])[5] == ("__dlq.errors.message", "Offset rejected by client.")
        produce(broker, topic, 1)
        later = acquired(c.fetch(max_records=10, max_wait_ms=5_000))
        assert 0 not in {o for first, last, _ in later for o in range(first, last + 1)}, later
    finally:
        broker.kill()


def _ack_request(member, acks):
    from kbroker.protocol.messages.share_acknowledge_request import (AcknowledgementBatch, AcknowledgePartition,
                                                                     AcknowledgeTopic, ShareAcknowledgeRequest)
    request = ShareAcknowledgeRequest(
        group_id=member.group, member_id=member.id, share_session_epoch=member.epoch,
        topics=[AcknowledgeTopic(topic_id=member.topic_id, partitions=[AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[
                AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=list(t)) for f, l, t in acks])])])
    member.epoch += 1
    return request


def _killed_and_started(broker) -> None:
    broker.restart(clean=False)
    broker.token = (broker.data_dir / "test-controls.token").read_text().strip()  # a new one each start


def _wait_held(broker) -> None:
    deadline = time.monotonic() + 30
    while control(broker, "storage/fsync/status")["waiting"] < 1:
        assert time.monotonic() < deadline, "no fsync started"
        time.sleep(0.05)
