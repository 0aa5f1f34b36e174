"""Trailing bytes after a request's body (issue 38, item 9): the same frames to Apache Kafka 4.4 and
to kbroker. Kafka parses the body and ignores what follows (RequestContext.parseRequest reads what
the schema needs; nothing checks the rest): the request is answered and the connection stays open.
kbroker answers the same way and says so once per connection (`request_trailing_bytes`)."""

from __future__ import annotations

import struct
import time

import pytest

from kbroker.protocol import framing
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

TRAILING = b"\x01\x02\x03\x04\x05"
# (api key, version, body): a flexible and a classic version, and OffsetCommit v8, which kbroker
# parses on its own fast path (protocol/offset_commit_fast.py)
FRAMES = [
    (18, 3, ApiVersionsRequest("t", "1")),
    (3, 1, MetadataRequest(topics=None)),
    (3, 12, MetadataRequest(topics=None)),
    (8, 8, OffsetCommitRequest("trailing-group", -1, "", None, -1, [OffsetCommitRequestTopic(
        "trailing-topic", partitions=[OffsetCommitRequestPartition(0, 1, -1, "")])])),
]


def logged(broker: BrokerProcess, name: str, count: int) -> list[dict]:
    """The broker's `name` events, once `count` are in its log (a line lands a moment after the answer)."""
    deadline = time.monotonic() + 10
    while len(broker.events(name)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # and no more than that
    return broker.events(name)


def answers_with_trailing_bytes(address: str) -> list[tuple[int, int, object]]:
    """Each frame with TRAILING appended, on one connection: (api, correlation id, decoded answer);
    then an ApiVersions without trailing bytes, which must be answered too (the connection is open)."""
    wire = Wire(address)
    out = []
    try:
        for correlation, (api, version, body) in enumerate(FRAMES, start=1):
            frame = framing.encode_request(api, version, correlation, "trailing", body)[4:] + TRAILING
            wire.sock.sendall(struct.pack(">i", len(frame)) + frame)
            got, answer = framing.decode_response(api, version, wire.read_frame())
            out.append((api, got, answer))
        wire.correlation = 100
        assert wire.call(18, 3, ApiVersionsRequest("t", "1")).error_code == 0
    finally:
        wire.close()
    return out


def test_kafka_and_kbroker_answer_a_request_with_trailing_bytes_and_keep_the_connection(kafka_reference, tmp_path):
    kafka = answers_with_trailing_bytes(kafka_reference.bootstrap)
    with BrokerProcess(tmp_path / "data") as broker:
        ours = answers_with_trailing_bytes(broker.bootstrap)
        events = logged(broker, "request_trailing_bytes", 1)
    assert [(api, c) for api, c, _ in kafka] == [(api, c) for api, c, _ in ours] == [
        (api, i) for i, (api, _, _) in enumerate(FRAMES, start=1)]
    assert kafka[0][2].error_code == ours[0][2].error_code == 0  # ApiVersions: answered in full
    assert len(events) == 1, events  # once per connection, however many such requests
    assert events[0]["trailing_bytes"] == len(TRAILING) and events[0]["api"] == 18 and events[0]["answered"]


def test_the_fast_offset_commit_parse_sees_trailing_bytes(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        wire = Wire(broker.bootstrap)
        api, version, body = FRAMES[3]
        frame = framing.encode_request(api, version, 1, "trailing", body)[4:] + TRAILING
        wire.sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert framing.decode_response(api, version, wire.read_frame())[0] == 1
        wire.close()
        events = logged(broker, "request_trailing_bytes", 1)
    assert [(e["api"], e["version"], e["trailing_bytes"]) for e in events] == [(8, 8, len(TRAILING))]


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
