"""A Produce whose batches are costly to check (millions of tiny records in a few KiB of gzip) is
checked on the broker's worker thread past a request's inline budget, against a real broker process:
other clients are answered meanwhile, and the verdicts are the ones the loop would have given."""

from __future__ import annotations

import select
import time

import pytest

from kbroker.bench.hostile_produce import raw_batch, tiny_records
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_request_bounds import create_topic, peak_rss_bytes
from kbroker.tests.integration.wire import Wire

MiB = 1 << 20
RECORDS = 2_000_000  # 14 MB inflated, 14 KiB of gzip: about a second of walking on the reference host


def gzip_batch(records: bytes, count: int) -> bytes:
    return raw_batch(records, count, rb.COMPRESSION_GZIP)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("checks") / "data", "--offsets-topic-num-partitions", "1")
    yield proc
    proc.stop()


def test_costly_batches_are_checked_while_other_clients_are_served(broker):
    wire = Wire(broker.bootstrap, timeout=120)
    create_topic(wire, "costly")
    costly = gzip_batch(tiny_records(RECORDS), RECORDS)
    lying = gzip_batch(tiny_records(RECORDS), RECORDS + 1)  # counts a record that is not there
    assert len(costly) < 64 * 1024
    wire.send(0, 9, ProduceRequest(None, -1, 30000, [TopicProduceData("costly", partition_data=[
        PartitionProduceData(0, batch) for batch in (costly, costly, lying, costly)])]))
    # Another client, while those batches are checked: answered before the Produce is. On the loop,
    # as before, its ApiVersions waited behind all four walks.
    other = Wire(broker.bootstrap)
    for _ in range(3):
        assert other.call(18, 3, ApiVersionsRequest("other", "1")).error_code == ErrorCode.NONE
    readable, _, _ = select.select([wire.sock], [], [], 0)
    assert not readable, "the Produce was answered before another client's ApiVersions"
    answer = wire.receive(0, 9).responses[0].partition_responses
    assert [p.error_code for p in answer] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_RECORD, ErrorCode.NONE]
    assert [p.base_offset for p in answer] == [0, RECORDS, -1, 2 * RECORDS]
    latest = other.call(2, 7, ListOffsetsRequest(-1, 0, [ListOffsetsTopic("costly", [
        ListOffsetsPartition(0, -1, -1)])])).topics[0].partitions[0]
    assert latest.offset == 3 * RECORDS
    assert broker.events("produce_batch_refused")
    wire.close()
    other.close()


def test_a_config_changed_while_a_batch_is_checked_is_the_one_it_is_checked_against(broker):
    """The topic turns compacted while its keyless batches are checked on the worker: the first
    batch's verdict, for the old config, is not used; each is answered as the new config says."""
    from kbroker.protocol.messages.alter_configs_request import (
        AlterableConfig,
        AlterConfigsRequest,
        AlterConfigsResource,
    )

    wire = Wire(broker.bootstrap, timeout=120)
    create_topic(wire, "turns-compact")
    keyless = gzip_batch(tiny_records(RECORDS), RECORDS)
    wire.send(0, 9, ProduceRequest(None, -1, 30000, [TopicProduceData("turns-compact", partition_data=[
        PartitionProduceData(0, keyless) for _ in range(3)])]))
    other = Wire(broker.bootstrap)
    change = AlterConfigsResource(resource_type=2, resource_name="turns-compact",
                                  configs=[AlterableConfig("cleanup.policy", "compact")])
    assert other.call(33, 2, AlterConfigsRequest(resources=[change], validate_only=False)).responses[0].error_code == 0
    readable, _, _ = select.select([wire.sock], [], [], 0)
    assert not readable, "the Produce was answered before the config changed"
    answer = wire.receive(0, 9).responses[0].partition_responses
    assert [p.error_code for p in answer] == [ErrorCode.INVALID_RECORD] * 3
    assert [e.batch_index for e in answer[0].record_errors] == list(range(1000))
    wire.close()
    other.close()


def test_a_lower_timestamp_bound_reads_millions_of_records_without_an_object_each(broker):
    wire = Wire(broker.bootstrap, timeout=120)
    create_topic(wire, "bounded", {"message.timestamp.before.max.ms": "3600000"})
    for delta, code in ((-3_500_000, ErrorCode.NONE), (-3_700_000, ErrorCode.INVALID_TIMESTAMP)):
        answer = wire.call(0, 9, ProduceRequest(None, -1, 30000, [TopicProduceData("bounded", partition_data=[
            PartitionProduceData(0, gzip_batch(tiny_records(RECORDS, delta), RECORDS))])]))
        assert answer.responses[0].partition_responses[0].error_code == code
    # Reading each record as an object (the whole batch decoded) peaked at 440 MiB for these two million.
    assert peak_rss_bytes(broker.proc.pid) < 200 * MiB
    wire.close()


def test_list_offsets_walks_a_batch_of_a_million_records_and_refuses_a_partition_named_twice(broker):
    """A timestamp search through a batch of tiny records reads their offsets and timestamps without
    building them; a partition named in two topic entries is INVALID_REQUEST in both, as in Kafka,
    and is not searched (one 444-byte request naming it 20 times searched it 20 times: 85 s)."""
    wire = Wire(broker.bootstrap, timeout=120)
    create_topic(wire, "searched")
    count = 1_000_000
    batch = bytearray(gzip_batch(tiny_records(count, last_timestamp_delta=1000), count))
    fields = list(rb.HEADER_STRUCT.unpack_from(batch, 0))
    base_timestamp = fields[7]
    fields[8] = base_timestamp + 1000  # maxTimestamp: the last record's, as a producer writes it
    rb.HEADER_STRUCT.pack_into(batch, 0, *fields)
    rb._U32.pack_into(batch, rb.CRC_OFFSET, rb.compute_crc(batch, 0, len(batch)))
    answer = wire.call(0, 9, ProduceRequest(None, -1, 30000, [TopicProduceData("searched", partition_data=[
        PartitionProduceData(0, bytes(batch))])]))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    found = wire.call(2, 7, ListOffsetsRequest(-1, 0, [ListOffsetsTopic("searched", [
        ListOffsetsPartition(0, -1, base_timestamp + 1)])])).topics[0].partitions[0]
    assert (found.error_code, found.offset, found.timestamp) == (ErrorCode.NONE, count - 1, base_timestamp + 1000)
    twice = wire.call(2, 7, ListOffsetsRequest(-1, 0, [
        ListOffsetsTopic("searched", [ListOffsetsPartition(0, -1, base_timestamp + 1)]) for _ in range(2)]))
    assert [p.error_code for t in twice.topics for p in t.partitions] == [ErrorCode.INVALID_REQUEST] * 2
    wire.close()


def _with_max_timestamp(batch: bytes, max_timestamp: int) -> bytes:
    """The batch with its header's max timestamp set (what a producer claims), CRC made to match."""
    out = bytearray(batch)
    fields = list(rb.HEADER_STRUCT.unpack_from(out, 0))
    fields[8] = max_timestamp
    rb.HEADER_STRUCT.pack_into(out, 0, *fields)
    rb._U32.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def test_timestamp_searches_through_a_costly_batch_hold_no_other_client(broker):
    """ListOffsets by timestamp (and -3, the max timestamp) landing in a batch of two million records
    walks it on the offset-search worker: another client is answered meanwhile, and the answers are
    the loop's. A batch whose header claims a later timestamp than any of its records holds is walked
    in vain, and the search goes on in the batches after it."""
    now = int(time.time() * 1000)
    wire = Wire(broker.bootstrap, timeout=120)
    honest = _with_max_timestamp(raw_batch(tiny_records(RECORDS, last_timestamp_delta=5), RECORDS,
                                           rb.COMPRESSION_GZIP, timestamp=now), now + 5)
    lying = _with_max_timestamp(raw_batch(tiny_records(RECORDS), RECORDS, rb.COMPRESSION_GZIP, timestamp=now), now + 5)
    after = rb.encode_batch([rb.Record(0, now + 5, None, b"after")])
    for topic, batches in (("searched-far", [honest]), ("lied-to", [lying, after])):
        create_topic(wire, topic)
        for batch in batches:
            produced = wire.call(0, 9, ProduceRequest(None, -1, 60000, [TopicProduceData(topic, partition_data=[
                PartitionProduceData(0, batch)])]))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    def search(topic: str, timestamp: int) -> ListOffsetsRequest:
        return ListOffsetsRequest(-1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, timestamp)])])

    other = Wire(broker.bootstrap)
    for topic, timestamp, expected in (("searched-far", now + 5, (RECORDS - 1, now + 5)),
                                       ("searched-far", -3, (RECORDS - 1, now + 5)),
                                       ("lied-to", now + 5, (RECORDS, now + 5))):
        wire.send(2, 7, search(topic, timestamp))
        for _ in range(3):
            assert other.call(18, 3, ApiVersionsRequest("other", "1")).error_code == ErrorCode.NONE
        readable, _, _ = select.select([wire.sock], [], [], 0)
        assert not readable, f"the search of {topic} for {timestamp} was answered before another client's ApiVersions"
        found = wire.receive(2, 7).topics[0].partitions[0]
        assert (found.error_code, found.offset, found.timestamp) == (ErrorCode.NONE, *expected), (topic, timestamp)
    wire.close()
    other.close()
