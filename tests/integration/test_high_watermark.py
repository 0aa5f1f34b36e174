"""The high watermark is the durable offset, and leader epochs are real, against a real broker process.

With `--flush always` an acknowledgement promises the records are on disk, so that is also all a
consumer may read: a record appended but not yet fsynced stays invisible to Fetch and ListOffsets,
its producer waits, and a long-polling fetch wakes when the fsync moves the high watermark, not when
the append moved the log end. The fsync is held for real by a test control (`POST
/v1/test/storage/fsync/hold`: the fsync is called and does not return until released).

Leader epochs: a re-election (`POST /v1/test/topics/T/partitions/P/elect`) opens a new term; Metadata,
ListOffsets and OffsetForLeaderEpoch answer it, Fetch and ListOffsets fence a client that names the
old one, and all of it survives a restart.
"""

from __future__ import annotations

import select
import time
import urllib.request

import pytest

from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.broker_process import post_control as control
from kbroker.tests.integration.test_request_bounds import create_topic
from kbroker.tests.integration.wire import Wire

PRODUCE_V, FETCH_V, LIST_OFFSETS_V, METADATA_V, EPOCH_V = 9, 12, 7, 12, 4


@pytest.fixture
def broker(tmp_path):
    admin_port = free_port()
    with BrokerProcess(tmp_path / "data", "--flush", "always", "--test-controls",
                       "--metrics-listen", f"127.0.0.1:{admin_port}", "--offsets-topic-num-partitions", "1") as b:
        b.admin_url = f"http://127.0.0.1:{admin_port}"
        b.token = (b.data_dir / "test-controls.token").read_text().strip()
        yield b


def produce_request(topic: str, value: bytes, acks: int = -1) -> ProduceRequest:
    batch = rb.encode_batch([rb.Record(0, int(time.time() * 1000), None, value)])
    return ProduceRequest(None, acks, 30000, [TopicProduceData(topic, partition_data=[PartitionProduceData(0, batch)])])


def fetch_request(topic: str, offset: int, max_wait_ms: int, current_leader_epoch: int = -1) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchTopic(topic=topic, partitions=[
                            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                           current_leader_epoch=current_leader_epoch)])])


def values(records: bytes | None) -> list[bytes | None]:
    return [r.value for _, batch in rb.decode_batches(bytes(records or b"")) for r in batch]


def latest(wire: Wire, topic: str, current_leader_epoch: int = -1):
    return wire.call(2, LIST_OFFSETS_V, ListOffsetsRequest(-1, 0, [ListOffsetsTopic(topic, [
        ListOffsetsPartition(0, current_leader_epoch, -1)])])).topics[0].partitions[0]


def silent(wire: Wire, seconds: float = 1.0) -> bool:
    """Nothing has arrived on the connection (an answer the broker must not give yet)."""
    readable, _, _ = select.select([wire.sock], [], [], seconds)
    return not readable


def test_a_consumer_never_reads_past_the_durable_offset(broker):
    topic = "durable-only"
    wire = Wire(broker.bootstrap)
    create_topic(wire, topic)
    first = wire.call(0, PRODUCE_V, produce_request(topic, b"durable"))
    assert first.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    held = control(broker, "storage/fsync/hold", {"seconds": 120})
    assert held["held"]
    long_poll = Wire(broker.bootstrap, timeout=60)  # parked before the record arrives
    long_poll.send(1, FETCH_V, fetch_request(topic, 1, max_wait_ms=110_000))
    producer = Wire(broker.bootstrap, timeout=60)
    producer.send(0, PRODUCE_V, produce_request(topic, b"in the page cache only"))
    deadline = time.monotonic() + 30
    while control(broker, "storage/fsync/status")["waiting"] < 1:  # its fsync has started and is held
        assert time.monotonic() < deadline, "the append's fsync never started"
        time.sleep(0.05)

    # Appended, not durable: no consumer sees it, the producer is not answered, the long poll waits.
    now = wire.call(1, FETCH_V, fetch_request(topic, 0, max_wait_ms=0)).responses[0].partitions[0]
    assert now.error_code == ErrorCode.NONE
    assert values(now.records) == [b"durable"] and now.high_watermark == 1
    assert latest(wire, topic).offset == 1
    past = wire.call(1, FETCH_V, fetch_request(topic, 1, max_wait_ms=0)).responses[0].partitions[0]
    assert past.error_code == ErrorCode.NONE and not past.records and past.high_watermark == 1
    assert silent(producer), "acknowledged before its fsync"
    assert silent(long_poll), "the long poll woke when the log end moved, before the high watermark"

    control(broker, "storage/fsync/release")
    # The fsync completes: the high watermark moves, which wakes the long poll (its max wait is far off).
    woke = long_poll.receive(1, FETCH_V).responses[0].partitions[0]
    assert woke.error_code == ErrorCode.NONE and woke.high_watermark == 2
    assert values(woke.records) == [b"in the page cache only"]
    acked = producer.receive(0, PRODUCE_V).responses[0].partition_responses[0]
    assert acked.error_code == ErrorCode.NONE and acked.base_offset == 1
    assert latest(wire, topic).offset == 2


def test_records_nobody_waits_for_still_become_readable(broker):
    """acks=0 under `--flush always`: no producer waits for the fsync, but the high watermark is the
    durable end, so the broker flushes them anyway and a waiting consumer gets them."""
    topic = "acks-zero"
    wire = Wire(broker.bootstrap)
    create_topic(wire, topic)
    long_poll = Wire(broker.bootstrap, timeout=60)
    long_poll.send(1, FETCH_V, fetch_request(topic, 0, max_wait_ms=110_000))
    fire_and_forget = Wire(broker.bootstrap)
    fire_and_forget.send(0, PRODUCE_V, produce_request(topic, b"nobody waits", acks=0))
    woke = long_poll.receive(1, FETCH_V).responses[0].partitions[0]
    assert values(woke.records) == [b"nobody waits"] and woke.high_watermark == 1


def test_a_new_leader_epoch_is_answered_fenced_and_kept(broker):
    topic = "epochs"
    wire = Wire(broker.bootstrap)
    create_topic(wire, topic)
    for value in (b"a", b"b"):
        wire.call(0, PRODUCE_V, produce_request(topic, value))
    assert control(broker, f"topics/{topic}/partitions/0/elect")["leader_epoch"] == 1
    wire.call(0, PRODUCE_V, produce_request(topic, b"c"))  # offset 2, appended in epoch 1

    def check(wire: Wire) -> None:
        metadata = wire.call(3, METADATA_V, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                            allow_auto_topic_creation=False))
        assert metadata.topics[0].partitions[0].leader_epoch == 1
        ends = wire.call(23, EPOCH_V, OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(
            topic, [OffsetForLeaderPartition(0, current_leader_epoch=-1, leader_epoch=e) for e in (0, 1, 2)])]))
        answered = [(p.leader_epoch, p.end_offset) for p in ends.topics[0].partitions]
        assert answered == [(0, 2), (1, 3), (-1, -1)]  # epoch 0 ended where epoch 1 began; 2 is unknown
        listed = latest(wire, topic, current_leader_epoch=1)
        assert (listed.error_code, listed.offset, listed.leader_epoch) == (ErrorCode.NONE, 3, 1)
        assert latest(wire, topic, current_leader_epoch=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert latest(wire, topic, current_leader_epoch=2).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        stale = wire.call(1, FETCH_V, fetch_request(topic, 0, 0, current_leader_epoch=0)).responses[0].partitions[0]
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH and not stale.records
        fresh = wire.call(1, FETCH_V, fetch_request(topic, 0, 0, current_leader_epoch=1)).responses[0].partitions[0]
        assert fresh.error_code == ErrorCode.NONE and values(fresh.records) == [b"a", b"b", b"c"]
        batches = [h.partition_leader_epoch for h, _ in rb.decode_batches(bytes(fresh.records))]
        assert batches == [0, 0, 1]

    check(wire)
    broker.restart()
    check(Wire(broker.bootstrap))
