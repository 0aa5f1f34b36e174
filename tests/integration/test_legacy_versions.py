"""Kafka 3.9's versions that Kafka 4 removed, proven with an independent encoding: kafka-python's
hand-written protocol classes for the old versions (`kafka.protocol.old`) build the requests and
parse our responses, and our codec must produce the very same request bytes."""

from __future__ import annotations

import socket
import time

import pytest

from kbroker.protocol import codec
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import read_frame

pytest.importorskip("kafka")
from kafka.protocol.old import admin, commit, list_offsets, offset_for_leader_epoch  # noqa: E402

CLIENT = "legacy-test"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("legacy") / "data", "--num-partitions", "1")
    yield proc
    proc.stop()


class OldClient:
    def __init__(self, broker) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def call(self, request):
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id=CLIENT)
        self.sock.sendall(request.encode(header=True, framed=True))
        frame = read_frame(self.sock)
        response_class = request.header.get_response_class() if hasattr(request.header, "get_response_class") else None
        response_class = response_class or _response_class(request)
        return response_class.decode(frame, header=True)


def _response_class(request):
    module = __import__(type(request).__module__, fromlist=["x"])
    return getattr(module, type(request).__name__.replace("Request", "Response"))


def _ours(api_key: int, version: int, old_request) -> bytes:
    """Our codec's encoding of the body kafka-python encoded (decoded with our spec, re-encoded)."""
    from kbroker.protocol import framing

    body = old_request.encode()
    spec = framing.request_spec(api_key)
    decoded = codec.decode(spec, version, body)
    return codec.encode(spec, version, decoded)


def _produce(broker, topic: str, count: int) -> None:
    from kbroker.protocol.messages import produce_request as pr
    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap)
    for i in range(count):
        batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v%d" % i)])
        r = wire.call(0, 9, pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            pr.TopicProduceData(name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
        assert r.responses[0].partition_responses[0].error_code == 0


def test_create_topics_v0_and_delete_topics_v0(broker):
    client = OldClient(broker)
    req = admin.CreateTopicsRequest_v0(create_topic_requests=[("legacy-created", 2, 1, [], [])], timeout=5000)
    assert _ours(19, 0, req) == req.encode()
    r = client.call(req)
    assert [tuple(t)[:2] for t in r.topic_errors] == [("legacy-created", 0)]
    r = client.call(admin.DeleteTopicsRequest_v0(topics=["legacy-created"], timeout=5000))
    assert [tuple(t) for t in r.topic_error_codes] == [("legacy-created", 0)]


def test_offset_commit_v0_v1_and_offset_fetch_v0(broker):
    client = OldClient(broker)
    client.call(admin.CreateTopicsRequest_v0(create_topic_requests=[("legacy-offsets", 1, 1, [], [])], timeout=5000))
    v1 = commit.OffsetCommitRequest_v1(group_id="legacy-group", generation_id_or_member_epoch=-1, member_id="",
                                       topics=[("legacy-offsets", [(0, 42, 1700000000000, "from v1")])])
    assert _ours(8, 1, v1) == v1.encode()
    r = client.call(v1)
    assert [(t[0], [tuple(p) for p in t[1]]) for t in r.topics] == [("legacy-offsets", [(0, 0)])]
    fetch0 = commit.OffsetFetchRequest_v0(group_id="legacy-group", topics=[("legacy-offsets", [0])])
    assert _ours(9, 0, fetch0) == fetch0.encode()
    r = client.call(fetch0)
    assert [tuple(p) for p in r.topics[0][1]] == [(0, 42, "from v1", 0)]
    v0 = commit.OffsetCommitRequest_v0(group_id="legacy-group", topics=[("legacy-offsets", [(0, 43, "from v0")])])
    assert _ours(8, 0, v0) == v0.encode()
    assert client.call(v0).topics[0][1][0][1] == 0
    assert [tuple(p) for p in client.call(fetch0).topics[0][1]] == [(0, 43, "from v0", 0)]


def test_list_offsets_v0_old_style_offsets(broker):
    client = OldClient(broker)
    client.call(admin.CreateTopicsRequest_v0(create_topic_requests=[("legacy-lo", 1, 1, [], [])], timeout=5000))
    _produce(broker, "legacy-lo", 3)
    req = list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[("legacy-lo", [(0, -1, 10)])])
    assert _ours(2, 0, req) == req.encode()
    latest = client.call(req)
    # one segment holding data: the log end offset, then the segment's base offset
    assert [tuple(p) for p in latest.topics[0][1]] == [(0, 0, [3, 0])]
    earliest = client.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[("legacy-lo", [(0, -2, 10)])]))
    assert [tuple(p) for p in earliest.topics[0][1]] == [(0, 0, [0])]
    one = client.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[("legacy-lo", [(0, -1, 1)])]))
    assert [tuple(p) for p in one.topics[0][1]] == [(0, 0, [3])]


def test_describe_configs_v0_reports_is_default(broker):
    client = OldClient(broker)
    client.call(admin.CreateTopicsRequest_v0(
        create_topic_requests=[("legacy-cfg", 1, 1, [], [("retention.ms", "1000")])], timeout=5000))
    req = admin.DescribeConfigsRequest_v0(resources=[(2, "legacy-cfg", ["retention.ms", "segment.bytes"])])
    assert _ours(32, 0, req) == req.encode()
    r = client.call(req)
    (result,) = r.resources
    assert result[0] == 0
    configs = {c[0]: c for c in result[4]}
    # (name, value, read_only, is_default, is_sensitive)
    assert configs["retention.ms"][1:4] == ("1000", False, False)
    assert configs["segment.bytes"][3] is True


def test_offset_for_leader_epoch_v0_v1(broker):
    client = OldClient(broker)
    client.call(admin.CreateTopicsRequest_v0(create_topic_requests=[("legacy-epoch", 1, 1, [], [])], timeout=5000))
    _produce(broker, "legacy-epoch", 2)
    req0 = offset_for_leader_epoch.OffsetForLeaderEpochRequest_v0(topics=[("legacy-epoch", [(0, 0)])])
    assert _ours(23, 0, req0) == req0.encode()
    r0 = client.call(req0)
    assert [tuple(p) for p in r0.topics[0][1]] == [(0, 0, 2)]  # (error, partition, end offset)
    r1 = client.call(offset_for_leader_epoch.OffsetForLeaderEpochRequest_v1(topics=[("legacy-epoch", [(0, 0)])]))
    assert [tuple(p) for p in r1.topics[0][1]] == [(0, 0, 0, 2)]  # (error, partition, epoch, end offset)


def test_describe_log_dirs_v0(broker):
    client = OldClient(broker)
    r = client.call(admin.DescribeLogDirsRequest_v0(topics=None))
    (log_dir,) = r.results if hasattr(r, "results") else r.log_dirs
    assert log_dir[0] == 0 and log_dir[1] == str(broker.data_dir.resolve())
