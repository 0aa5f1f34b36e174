"""ShareFetch and ShareAcknowledge (KIP-932) on the wire against a real broker process: share
sessions and their epochs, records acquired by two members of one group without overlap, each
acknowledged once, a release redelivered with its delivery count, an expired lock redelivering,
reject archiving, the delivery count limit, a closed session giving back what its member held."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.share_acknowledge_request import (
    AcknowledgementBatch as AckBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from kbroker.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

LOCK_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("share-fetch") / "data", "--num-partitions", "1",
                         "--group-share-record-lock-duration-ms", str(LOCK_MS), "--group-share-delivery-count-limit", "3")
    yield proc
    proc.stop()


class Member:
    def __init__(self, broker, group: str, topic: str, topic_id: uuid.UUID) -> None:
        self.wire = Wire(broker.bootstrap, client_id="share-fetch")
        self.group, self.topic_id, self.id, self.epoch = group, topic_id, str(uuid.uuid4()), 0
        joined = self.wire.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=self.id, member_epoch=0,
                                                                  rack_id=None, subscribed_topic_names=[topic]))
        assert joined.error_code == 0

    def fetch(self, acks=(), max_wait_ms=0, max_records=100, version=1, acquire_mode=0, max_bytes=1 << 20):
        batches = [AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=list(t)) for f, l, t in acks]
        response = self.wire.call(78, version, ShareFetchRequest(
            group_id=self.group, member_id=self.id, share_session_epoch=self.epoch, max_wait_ms=max_wait_ms,
            min_bytes=1, max_bytes=max_bytes, max_records=max_records, batch_size=max_records,
            share_acquire_mode=acquire_mode,
            topics=[FetchTopic(topic_id=self.topic_id, partitions=[FetchPartition(
                partition_index=0, acknowledgement_batches=batches)])], forgotten_topics_data=[]))
        if response.error_code == 0:
            self.epoch = self.epoch + 1 if self.epoch >= 0 else self.epoch
        return response

    def acknowledge(self, acks, epoch=None):
        request = ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.id, share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[AcknowledgeTopic(topic_id=self.topic_id, partitions=[AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[
                    AckBatch(first_offset=f, last_offset=l, acknowledge_types=list(t)) for f, l, t in acks])])])
        response = self.wire.call(79, 1, request)
        if response.error_code == 0 and epoch is None:
            self.epoch += 1
        return response


def acquired(response) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


def offsets_in(response) -> list[int]:
    out = []
    for t in response.responses:
        for p in t.partitions:
            for _, header in rb.iter_batches(p.records or b""):
                out.extend(range(header.base_offset, header.base_offset + header.last_offset_delta + 1))
    return out


def setup(broker, records: int) -> tuple[str, uuid.UUID, str]:
    topic, group = f"sf-{uuid.uuid4().hex[:6]}", f"sfg-{uuid.uuid4().hex[:6]}"
    w = Wire(broker.bootstrap)
    topic_id = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                             allow_auto_topic_creation=True)).topics[0].topic_id
    w.close()
    return topic, topic_id, group


def produce(broker, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, f"v{i}".encode())
        p.flush(10)


def test_two_members_share_a_partition_with_locks_releases_and_rejects(broker):
    topic, topic_id, group = setup(broker, 0)
    a = Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == []  # the share-partition starts at the (empty) log's end
    produce(broker, topic, 10)
    first = a.fetch(max_records=4, max_wait_ms=5_000)
    assert first.acquisition_lock_timeout_ms == LOCK_MS
    assert acquired(first) == [(0, 3, 1)]
    assert set(range(4)) <= set(offsets_in(first))
    b = Member(broker, group, topic, topic_id)
    got = b.fetch()
    assert acquired(got) == [(4, 9, 1)]
    # a's acknowledgements piggybacked on its next fetch: accept 0-1, release 2, reject 3
    again = a.fetch(acks=[(0, 1, [1]), (2, 3, [2, 3])])
    assert [p.acknowledge_error_code for t in again.responses for p in t.partitions] == [0]
    assert acquired(again) == [(2, 2, 2)]  # the released record, delivered a second time
    # acknowledging what is not yours, or twice, is INVALID_RECORD_STATE
    wrong = a.acknowledge([(4, 4, [1])])
    assert wrong.responses[0].partitions[0].error_code == E.INVALID_RECORD_STATE
    assert b.acknowledge([(4, 9, [1])]).responses[0].partitions[0].error_code == 0
    # a's lock on 2 expires: b gets it at its third delivery; then the limit (3) archives it on release
    time.sleep(LOCK_MS / 1000 + 0.5)
    third = b.fetch(max_wait_ms=3_000)
    assert acquired(third) == [(2, 2, 3)]
    b.acknowledge([(2, 2, [2])])
    assert acquired(b.fetch()) == [] and acquired(a.fetch()) == []
    # sessions: a wrong epoch, an unknown session, and the close that gives records back
    assert a.wire.call(78, 1, ShareFetchRequest(
        group_id=group, member_id=a.id, share_session_epoch=a.epoch + 5, max_wait_ms=0, min_bytes=1, max_bytes=1,
        max_records=1, batch_size=1, topics=[], forgotten_topics_data=[])).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert a.acknowledge([], epoch=0).error_code == E.INVALID_SHARE_SESSION_EPOCH
    stranger = Member(broker, group, topic, topic_id)
    stranger.epoch = 3
    assert stranger.fetch().error_code == E.SHARE_SESSION_NOT_FOUND
    produce(broker, topic, 2)
    held = a.fetch(max_wait_ms=3_000)
    assert acquired(held) == [(10, 11, 1)]
    assert a.acknowledge([], epoch=-1).error_code == 0  # closes a's session: 10-11 go back
    assert acquired(b.fetch(max_wait_ms=3_000)) == [(10, 11, 2)]
    for m in (a, b, stranger):
        m.wire.close()


def produce_one_batch(broker, topic: str, n: int) -> None:
    """`n` records in one batch (a client's batching is not certain)."""
    from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kbroker.protocol.record_batch import Record, encode_batch

    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, f"v{i}".encode()) for i in range(n)])
    w = Wire(broker.bootstrap)
    try:
        answer = w.call(0, 9, ProduceRequest(None, -1, 5000, [TopicProduceData(
            topic, partition_data=[PartitionProduceData(0, batch)])]))
        assert answer.responses[0].partition_responses[0].error_code == 0
    finally:
        w.close()


@pytest.mark.parametrize("version, mode, want", [(1, 0, [(0, 9, 1)]), (2, 0, [(0, 9, 1)]), (2, 1, [(0, 3, 1)])],
                         ids=["v1", "v2-batch-optimized", "v2-record-limit"])
def test_max_records_is_strict_only_in_record_limit_mode(broker, version, mode, want):
    """KIP-1206: in batch_optimized mode (v1's, v2's default) MaxRecords is soft and the batch it falls
    in is acquired to its end, as Kafka 4.4 does (compared: tests/reference/test_share_differential.py);
    in record_limit mode at most MaxRecords records are acquired, the rest of the batch left for others."""
    topic, topic_id, group = setup(broker, 0)
    a, b = Member(broker, group, topic, topic_id), Member(broker, group, topic, topic_id)
    assert acquired(a.fetch(version=version)) == [] and acquired(b.fetch(version=version)) == []
    produce_one_batch(broker, topic, 10)
    assert acquired(a.fetch(max_records=4, max_wait_ms=5_000, version=version, acquire_mode=mode)) == want
    rest = [(4, 9, 1)] if mode == 1 else []
    assert acquired(b.fetch(max_records=100, max_wait_ms=200, version=version, acquire_mode=mode)) == rest


def test_max_bytes_zero_acquires_nothing(broker):
    """A ShareFetch of MaxBytes 0 acquires no records, as Kafka and its Java client have it (librdkafka's
    0180 pins it: a share consumer with fetch.max.bytes=0 gets nothing); it waits out MaxWaitMs."""
    topic, topic_id, group = setup(broker, 0)
    m = Member(broker, group, topic, topic_id)
    assert acquired(m.fetch()) == []
    produce_one_batch(broker, topic, 3)
    empty = m.fetch(max_bytes=0, max_wait_ms=200)
    assert empty.error_code == 0 and acquired(empty) == [] and offsets_in(empty) == []
    assert acquired(m.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]  # none was taken: the first delivery
    m.wire.close()

def produce_big_batches(broker, topic: str, n: int, size: int) -> None:
    """`n` batches of one record of `size` bytes each."""
    from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kbroker.protocol.record_batch import Record, encode_batch

    w = Wire(broker.bootstrap)
    try:
        for i in range(n):
            batch = encode_batch([Record(0, int(time.time() * 1000), None, bytes([i]) * size)])
            answer = w.call(0, 9, ProduceRequest(None, -1, 5000, [TopicProduceData(
                topic, partition_data=[PartitionProduceData(0, batch)])]))
            assert answer.responses[0].partition_responses[0].error_code == 0
    finally:
        w.close()


def test_a_fetch_acquires_past_its_first_read_of_the_log_up_to_max_bytes(broker):
    """A share fetch reads the log a MiB first and the rest of MaxBytes only when it has records left
    to acquire: what it acquires is what one read of MaxBytes gives, one run across the two reads,
    the batches up to MaxBytes and none past it."""
    topic, topic_id, group = setup(broker, 0)
    a, b = Member(broker, group, topic, topic_id), Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == [] and acquired(b.fetch()) == []
    produce_big_batches(broker, topic, 12, 200_000)  # 2.4 MB: past the first read's MiB
    whole = a.fetch(max_records=100, max_wait_ms=5_000, max_bytes=8 << 20)
    assert acquired(whole) == [(0, 11, 1)] and offsets_in(whole) == list(range(12))
    assert a.acknowledge([(0, 11, [2])]).responses[0].partitions[0].error_code == 0  # released: b's turn
    # MaxBytes 1.5 MiB holds 7 whole batches of ~200 kB (5 in the first MiB, 2 in the rest)
    part = b.fetch(max_records=100, max_bytes=3 << 19)
    assert acquired(part) == [(0, 6, 2)] and offsets_in(part) == list(range(7))
    assert acquired(a.fetch(max_records=100, max_bytes=8 << 20)) == [(7, 11, 2)]
    for m in (a, b):
        m.wire.close()


def test_a_topic_made_again_under_its_name_starts_afresh(broker):
    """A share-partition is of a topic id, as in Kafka: a topic deleted and created again under its name
    does not inherit the old one's records in flight or delivery counts (librdkafka's 0184 saw a new
    topic's first record delivered "a second time", and an old lock kept it from everyone)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, topic_id, group = setup(broker, 0)
    m = Member(broker, group, topic, topic_id)
    assert acquired(m.fetch()) == []
    produce_one_batch(broker, topic, 3)
    assert acquired(m.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]  # held under a lock, not acknowledged
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # the deletion completes asynchronously, as in Kafka
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    w = Wire(broker.bootstrap)
    new_id = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                           allow_auto_topic_creation=False)).topics[0].topic_id
    w.close()
    assert new_id != topic_id
    other = Member(broker, group, topic, new_id)
    assert acquired(other.fetch()) == []
    produce_one_batch(broker, topic, 3)
    assert acquired(other.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]
    for member in (m, other):
        member.wire.close()

def test_a_member_has_a_share_session_on_each_node_it_fetches_from(tmp_path):
    """`serve --nodes 3`: a member fetching from two leaders holds a share session on each, with its own
    epochs, as each Kafka broker has its own share session cache; opening one on a node neither breaks
    nor releases what the member holds (a new session on a node only replaces the old one there, as in
    Kafka). One session for the process made the
    second node's epoch 0 replace the first's (whose next epoch then answered INVALID_SHARE_SESSION_EPOCH)
    and give back the records it held: librdkafka's 0170 and 0171 consumed them twice."""
    from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
    from kbroker.tests.integration.broker_process import free_ports

    port = free_ports(3)
    broker = BrokerProcess(tmp_path / "data", "--nodes", "3", "--num-partitions", "3", port=port)
    wires: dict[int, Wire] = {}
    try:
        topic, topic_id, group = setup(broker, 0)
        meta = Wire(broker.bootstrap)
        described = meta.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                     allow_auto_topic_creation=False))
        ports = {b.node_id: b.port for b in described.brokers}
        leaders = {p.partition_index: p.leader_id for p in described.topics[0].partitions}
        pa, pb = sorted(leaders)[:2]
        assert leaders[pa] != leaders[pb]  # Kafka's striped placement: each node leads one of three
        coordinator = meta.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
        meta.close()

        def wire(node: int) -> Wire:
            if node not in wires:
                wires[node] = Wire(f"127.0.0.1:{ports[node]}", client_id="share-nodes")
            return wires[node]

        member, other = str(uuid.uuid4()), str(uuid.uuid4())
        for m in (member, other):
            assert wire(coordinator.node_id).call(76, 1, ShareGroupHeartbeatRequest(
                group_id=group, member_id=m, member_epoch=0, rack_id=None,
                subscribed_topic_names=[topic])).error_code == 0

        def fetch(m: str, partition: int, epoch: int, acks=(), max_wait_ms=0):
            batches = [AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=list(t)) for f, l, t in acks]
            return wire(leaders[partition]).call(78, 1, ShareFetchRequest(
                group_id=group, member_id=m, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
                max_bytes=1 << 20, max_records=100, batch_size=100, forgotten_topics_data=[],
                topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(
                    partition_index=partition, acknowledgement_batches=batches)])]))

        assert fetch(member, pa, 0).error_code == 0 and fetch(member, pb, 0).error_code == 0
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for partition in (pa, pb):
            p.produce(topic, b"a", partition=partition)
            p.produce(topic, b"b", partition=partition)
        assert p.flush(30) == 0
        held_a = fetch(member, pa, 1, max_wait_ms=5_000)
        held_b = fetch(member, pb, 1, max_wait_ms=5_000)
        assert (held_a.error_code, held_b.error_code) == (0, 0)
        assert acquired(held_a) == acquired(held_b) == [(0, 1, 1)]
        # a new session on pb's node (epoch 0 again) only replaces the old one there, as Kafka's newContext:
        # what the member holds stays its own, on either node (compared with Kafka 4.4 on the wire:
        # differential/apis_share.py "a member holding records opens its session again")
        assert acquired(fetch(member, pb, 0)) == []
        assert acquired(fetch(other, pa, 0)) == [] and acquired(fetch(other, pb, 0)) == []
        kept = fetch(member, pb, 1, acks=[(0, 1, [1])])
        assert [q.acknowledge_error_code for t in kept.responses for q in t.partitions] == [0]
        acked = fetch(member, pa, 2, acks=[(0, 1, [1])])
        assert acked.error_code == 0
        assert [q.acknowledge_error_code for t in acked.responses for q in t.partitions] == [0]
    finally:
        for w in wires.values():
            w.close()
        broker.stop()
