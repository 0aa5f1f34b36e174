"""Request frames captured from real clients (tests/golden/capture.py) decode to what those clients
meant and re-encode to the very same bytes, with the header decoder the server reads every request with."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.protocol import codec, framing
from kbroker.protocol.messages import request_header

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FILES = sorted(GOLDEN.glob("*.hex"))


def _load(name: str) -> bytes:
    return bytes.fromhex((GOLDEN / name).read_text().strip())


def test_every_client_and_api_was_captured() -> None:
    names = {p.stem.rsplit("-v", 1)[0] for p in FILES}
    for client in ("kafka-python", "librdkafka"):
        for api in ("api_versions", "metadata", "join_group"):
            assert f"{client}-{api}" in names


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_golden_frame_round_trips(path: Path) -> None:
    frame = _load(path.name)
    req = framing.decode_request_header(frame)
    body = framing.decode_body(req)
    assert req.body_io.read() == b"", "bytes left after the body"
    head = codec.encode(request_header.SPEC, framing.request_header_version(req.spec, req.api_version), req.header)
    assert head + codec.encode(req.spec, req.api_version, body) == frame
    assert req.header.client_id.startswith("golden-")


def test_kafka_python_join_group_v7() -> None:
    req = framing.decode_request_header(_load("kafka-python-join_group-v7.hex"))
    body = framing.decode_body(req)
    assert (body.group_id, body.member_id, body.group_instance_id, body.protocol_type) == (
        "golden-group", "", None, "consumer")
    assert (body.session_timeout_ms, body.rebalance_timeout_ms) == (45000, 300000)
    assert [p.name for p in body.protocols] == ["range", "roundrobin"]
    assert b"golden-topic" in body.protocols[0].metadata


def test_librdkafka_join_group_v5_and_api_versions_v3() -> None:
    join = framing.decode_body(framing.decode_request_header(_load("librdkafka-join_group-v5.hex")))
    assert join.group_id == "golden-group-2" and join.protocol_type == "consumer"
    assert [p.name for p in join.protocols] == ["range", "roundrobin"]
    av = framing.decode_body(framing.decode_request_header(_load("librdkafka-api_versions-v3.hex")))
    assert av.client_software_name == "confluent-kafka-python"


def test_metadata_v12_for_all_topics_vs_none() -> None:
    rd = framing.decode_body(framing.decode_request_header(_load("librdkafka-metadata-v12.hex")))
    assert rd.topics == [] and rd.allow_auto_topic_creation is False


def test_sarama_and_kafkajs_were_captured() -> None:
    names = {p.stem.rsplit("-v", 1)[0] for p in FILES}
    for api in ("produce", "fetch", "join_group", "sync_group", "offset_commit", "offset_fetch", "list_offsets"):
        assert f"sarama-{api}" in names and f"kafkajs-{api}" in names
    assert {"kafkajs-delete_records", "kafkajs-describe_groups"} <= names


def test_sarama_offset_commit_v1_carries_a_commit_timestamp() -> None:
    # sarama 1.22 always commits with v1 (Kafka 3.9's range; Kafka 4 removed it): the layout comes
    # from our legacy overlay, and -1 (ReceiveTime) means "when the broker gets it".
    req = framing.decode_request_header(_load("sarama-offset_commit-v1.hex"))
    body = framing.decode_body(req)
    assert (body.group_id, body.generation_id_or_member_epoch > 0, body.member_id != "") == (
        "golden-sarama-group", True, True)
    parts = [p for t in body.topics for p in t.partitions]
    assert body.topics[0].name == "golden-topic" and parts
    assert {p.commit_timestamp for p in parts} == {-1}


def test_kafkajs_delete_records_v1() -> None:
    body = framing.decode_body(framing.decode_request_header(_load("kafkajs-delete_records-v1.hex")))
    assert [(t.name, [(p.partition_index, p.offset) for p in t.partitions]) for t in body.topics] == [
        ("golden-kjs", [(0, 1)])]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_cut_golden_body_is_malformed_at_every_length(path: Path) -> None:
    """Wherever a real client's request body ends early (in a fixed-width field, a length, a string, a
    tagged-field count), decoding raises MalformedMessage, the one error the connection answers."""
    from kbroker.protocol.wire import MalformedMessage

    req = framing.decode_request_header(_load(path.name))
    body = req.body_io.read()
    for cut in range(len(body)):
        with pytest.raises(MalformedMessage):
            codec.decode(req.spec, req.api_version, body[:cut])


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_server_reads_each_golden_frame_with_the_decoder_tested_here(path: Path, monkeypatch) -> None:
    """The connection (broker/network/connection.py) has no header decoder of its own: it reads the
    golden frame's header through protocol/framing.py's, to the header decode_request_header gives."""
    import types

    from kbroker.broker.network import connection as connection_module
    from kbroker.broker.network.answers import ApiTable
    from kbroker.broker.network.router import Router

    frame = _load(path.name)
    req = framing.decode_request_header(frame)
    seen = []

    def spy(data: bytes, flexible: bool) -> tuple[str, int]:
        seen.append(flexible)
        return framing.read_client_id(data, flexible)

    monkeypatch.setattr(connection_module, "read_client_id", spy)
    router = Router()
    router.register(types.SimpleNamespace(API_KEY=req.api_key, VERSIONS=(req.api_version, req.api_version),
                                          handle=lambda ctx, request: None))
    conn = connection_module.Connection(ApiTable(router), "127.0.0.1:5000", 1 << 20)
    conn.receive(len(frame).to_bytes(4, "big") + frame)
    request = conn.next_request()
    assert request is not None and seen == [framing.request_header_flexible(req.api_key, req.api_version)]
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        req.header.request_api_key, req.header.request_api_version, req.header.correlation_id, req.header.client_id)
    assert request.body == framing.decode_body(req)
