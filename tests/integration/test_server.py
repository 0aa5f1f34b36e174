"""The server as a user meets it: a broker subprocess, real clients, and bad input over raw sockets."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from kbroker.protocol import framing
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.wire import closed_by_peer
from kbroker.tests.integration.wire import read_frame as _read_frame

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("server") / "data", "--create-topics", "pipelined:1") as b:
        yield b


def _connect(broker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=10)
    sock.settimeout(10)
    return sock


def _assert_closed(sock: socket.socket) -> None:
    assert closed_by_peer(sock, timeout=10)


def _rejections(broker, start: int) -> list[dict]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = [e for e in broker.log_lines()[start:] if e.get("event") == "request_rejected"]
        if found:
            return found
        time.sleep(0.05)
    return []


# -- real clients ----------------------------------------------------------------------------------

def test_confluent_kafka_admin_list_topics(broker) -> None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert list(md.brokers) == [1]
    assert md.brokers[1].host == "127.0.0.1" and md.brokers[1].port == broker.port
    assert md.controller_id == 1
    assert md.cluster_id


def test_kafka_python_describe_cluster(broker) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="it-describe")
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["controller_id"] == 1
    assert cluster["brokers"][0]["port"] == broker.port
    assert cluster["cluster_id"] == (broker.data_dir / "meta.properties").read_text().split("cluster.id=")[1].split()[0]


async def test_aiokafka_bootstrap(broker) -> None:
    from aiokafka import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
    await client.bootstrap()
    try:
        assert [b.nodeId for b in client.cluster.brokers()] == [1]
    finally:
        await client.close()


def test_cluster_id_survives_restart(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as b:
        first = (b.data_dir / "meta.properties").read_text()
        b.restart()
        assert (b.data_dir / "meta.properties").read_text() == first
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
        assert md.cluster_id in first


# -- framing and ordering ------------------------------------------------------------------------------

def test_pipelined_requests_are_answered_in_order(broker) -> None:
    sock = _connect(broker)
    requests = []
    for cid in range(1, 21):
        if cid % 2:
            requests.append(framing.encode_request(18, 3, cid, "order", ApiVersionsRequest("order", "1")))
        else:
            requests.append(framing.encode_request(3, 12, cid, "order", MetadataRequest(topics=None)))
    sock.sendall(b"".join(requests))
    seen = []
    for cid in range(1, 21):
        frame = _read_frame(sock)
        api, version = (18, 3) if cid % 2 else (3, 12)
        correlation, _ = framing.decode_response(api, version, frame)
        seen.append(correlation)
    assert seen == list(range(1, 21))
    sock.close()


def test_api_versions_v3_reports_features_as_kafka_4(broker) -> None:
    """Kafka writes the features as tagged fields (SupportedFeatures 0, FinalizedFeaturesEpoch 1,
    FinalizedFeatures 2) and no tagged field at its default (ZkMigrationReady false); group.version 1
    (the KIP-848 consumer group protocol) is finalized; v0-v2 answers carry no features."""
    sock = _connect(broker)
    sock.sendall(framing.encode_request(18, 3, 7, "tags", ApiVersionsRequest("tags", "1")))
    frame = _read_frame(sock)
    correlation, body = framing.decode_response(18, 3, frame)
    assert correlation == 7 and body.error_code == 0
    supported = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in body.finalized_features}
    assert supported["metadata.version"] == (7, 33)  # 3.3-IV3 .. 4.4-IV0, as Kafka 4.4.0
    assert finalized["metadata.version"] == (33, 33) and body.finalized_features_epoch >= 0
    # KAFKA-17492: a feature whose minimum is 0 is left out below v4 (its finalized level stays)
    assert "group.version" not in supported and finalized["group.version"] == (1, 1)
    assert all(low >= 1 for low, _ in supported.values())
    assert not body.zk_migration_ready
    served = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert served[68] == (0, 1) and served[69] == (0, 1)
    sock.sendall(framing.encode_request(18, 4, 8, "tags", ApiVersionsRequest("tags", "1")))
    correlation, body = framing.decode_response(18, 4, _read_frame(sock))
    supported = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
    assert supported["group.version"] == (0, 1) and supported["kraft.version"] == (0, 0)
    sock.sendall(framing.encode_request(18, 2, 9, "tags", ApiVersionsRequest()))
    correlation, body = framing.decode_response(18, 2, _read_frame(sock))
    assert correlation == 9 and body.supported_features == [] and body.finalized_features_epoch == -1
    served = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert served[18] == (0, 5) and served[3] == (0, 13)
    sock.close()


# -- bad input -----------------------------------------------------------------------------------------

def test_unsupported_api_versions_version_gets_v0_answer(broker) -> None:
    sock = _connect(broker)
    # A version we don't serve: header v2 (flexible), body we can't know; the answer is v0.
    frame = struct.pack(">hhih", 18, 99, 5, 1) + b"c" + b"\x00" + b"\x00"
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    correlation, body = framing.decode_response(18, 0, _read_frame(sock))
    assert correlation == 5
    assert body.error_code == 35  # UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 5)]
    sock.close()


@pytest.mark.parametrize(("label", "payload", "error"), [
    ("oversized frame", struct.pack(">i", 104857600 + 1), "frame size out of bounds"),
    ("negative size", struct.pack(">i", -5), "frame size out of bounds"),
    ("unknown api key", None, "unknown api key"),
    ("unsupported version", None, "unsupported version"),
    ("undecodable body", None, "undecodable body"),
    ("short header", struct.pack(">i", 3) + b"\x00\x12\x00", "shorter than a header"),
])
def test_bad_input_closes_only_that_connection(broker, label: str, payload: bytes | None, error: str) -> None:
    if label == "unknown api key":
        frame = struct.pack(">hhih", 9999, 0, 1, -1)
        payload = struct.pack(">i", len(frame)) + frame
    elif label == "unsupported version":
        frame = struct.pack(">hhih", 3, 99, 1, -1) + b"\x00"
        payload = struct.pack(">i", len(frame)) + frame
    elif label == "undecodable body":
        # Metadata v4: header, then a topic count of 1000 with no topics behind it
        frame = struct.pack(">hhih", 3, 4, 1, 3) + b"bad" + struct.pack(">i", 1000)
        payload = struct.pack(">i", len(frame)) + frame
    bystander = _connect(broker)
    start = len(broker.log_lines())
    victim = _connect(broker)
    victim.sendall(payload)
    _assert_closed(victim)
    events = _rejections(broker, start)
    assert events, f"no request_rejected event for {label}"
    assert error in events[0]["error"]
    assert events[0]["peer"].startswith("127.0.0.1:")
    # The broker is alive and other connections are untouched.
    bystander.sendall(framing.encode_request(18, 3, 42, "bystander", ApiVersionsRequest("b", "1")))
    assert framing.decode_response(18, 3, _read_frame(bystander))[0] == 42
    bystander.close()
    assert broker.probe()


def test_rejection_event_carries_request_identity(broker) -> None:
    start = len(broker.log_lines())
    sock = _connect(broker)
    frame = struct.pack(">hhih", 3, 99, 1234, 6) + b"who-am" + b"\x00"
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    _assert_closed(sock)
    event = _rejections(broker, start)[0]
    assert (event["api"], event["version"], event["correlation_id"], event["client_id"]) == (3, 99, 1234, "who-am")


def test_a_silent_connection_does_not_stall_others(broker) -> None:
    silent = _connect(broker)
    silent.sendall(struct.pack(">i", 1000) + b"\x00\x03")  # a frame that never completes
    assert broker.probe()
    silent.close()


# -- life cycle --------------------------------------------------------------------------------------

def test_sigterm_exits_zero_within_five_seconds(tmp_path) -> None:
    b = BrokerProcess(tmp_path / "data")
    sock = _connect(b)
    started = time.monotonic()
    b.proc.send_signal(signal.SIGTERM)
    code = b.proc.wait(timeout=10)
    assert code == 0
    assert time.monotonic() - started < 5
    assert b.events("broker_stopped")
    sock.close()


def test_probe_exit_codes(broker) -> None:
    ok = subprocess.run([sys.executable, "-m", "kbroker", "probe", broker.bootstrap], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    closed = subprocess.run([sys.executable, "-m", "kbroker", "probe", f"127.0.0.1:{free_port()}",
                             "--timeout", "1"], capture_output=True)
    assert closed.returncode == 1


def test_help_documents_every_option() -> None:
    import dataclasses

    from kbroker.broker.config import BrokerConfig

    # wide enough that argparse never wraps a long env name (Kafka's transaction settings) mid-word
    env = {**os.environ, "COLUMNS": "250"}
    out = subprocess.run([sys.executable, "-m", "kbroker", "serve", "--help"], capture_output=True, text=True, env=env)
    assert out.returncode == 0
    for f in dataclasses.fields(BrokerConfig):
        assert "--" + f.name.replace("_", "-") in out.stdout
        assert "KBROKER_" + f.name.upper() in out.stdout


def test_flags_win_over_environment_over_toml(tmp_path) -> None:
    toml = tmp_path / "kbroker.toml"
    toml.write_text('node_id = 7\n"group.initial.rebalance.delay.ms" = 11\nnum_partitions = 5\n')
    from kbroker.broker.config import load_config

    cfg = load_config({"num_partitions": "9"}, str(toml), env={"KBROKER_NODE_ID": "8", "KBROKER_NUM_PARTITIONS": "6"})
    assert (cfg.node_id, cfg.num_partitions, cfg.group_initial_rebalance_delay_ms) == (8, 9, 11)
    with pytest.raises(ValueError):
        load_config({}, None, env={"KBROKER_LOG_FORMAT": "xml"})


def test_toml_and_env_configure_a_real_broker(tmp_path) -> None:
    port = free_port()
    toml = tmp_path / "kbroker.toml"
    toml.write_text(f'listen = "127.0.0.1:{port}"\nnode_id = 3\n')
    b = BrokerProcess(tmp_path / "data", "--config", str(toml), port=port,
                      env={"KBROKER_ADVERTISED_LISTENER": f"localhost:{port}"})
    try:
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
        assert list(md.brokers) == [3]
        assert md.brokers[3].host == "localhost"
    finally:
        b.stop()


def test_pipelined_produces_share_fsyncs_but_answer_in_order(broker) -> None:
    """A Produce waiting for its fsync lets the connection start the next request (so pipelined
    acknowledgements share an fsync); every response still leaves in request order."""
    from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kbroker.protocol.record_batch import Record, encode_batch

    sock = _connect(broker)
    frames, expected = [], []
    for cid in range(1, 41):
        if cid % 4 == 0:
            frames.append(framing.encode_request(3, 12, cid, "pipe", MetadataRequest(topics=None)))
            expected.append((cid, 3, 12))
        else:
            batch = encode_batch([Record(0, int(time.time() * 1000), b"k%d" % cid, b"v%d" % cid)])
            req = ProduceRequest(None, -1, 5000, [TopicProduceData("pipelined", partition_data=[
                PartitionProduceData(0, batch)])])
            frames.append(framing.encode_request(0, 9, cid, "pipe", req))
            expected.append((cid, 0, 9))
    sock.sendall(b"".join(frames))
    offsets = []
    for cid, api, version in expected:
        correlation, body = framing.decode_response(api, version, _read_frame(sock))
        assert correlation == cid
        if api == 0:
            part = body.responses[0].partition_responses[0]
            assert part.error_code == 0
            offsets.append(part.base_offset)
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets) == 30
    sock.close()


def _known_but_unserved_versions(broker) -> list[tuple[int, int]]:
    """(api key, version) pairs our definitions know but the broker does not serve."""
    from kbroker.broker.routing import build_router

    out = []
    for key, _, high in build_router().supported():
        spec = framing.response_spec(key)
        out.extend((key, v) for v in spec.versions if v > high and key != 18)
    return out


def test_unsupported_version_with_a_top_level_error_is_answered_and_the_connection_stays(broker) -> None:
    from kbroker.broker.network.server import _unsupported_version_answer

    pairs = [(k, v) for k, v in _known_but_unserved_versions(broker) if _unsupported_version_answer(k, v, 0)]
    if not pairs:
        pytest.skip("every version our definitions know is served")
    key, version = pairs[0]
    sock = _connect(broker)
    request = framing.request_spec(key).struct.cls()
    sock.sendall(framing.encode_request(key, version, 77, "too-new", request))
    correlation, body = framing.decode_response(key, version, _read_frame(sock))
    assert (correlation, body.error_code) == (77, 35)  # UNSUPPORTED_VERSION, in the version sent
    sock.sendall(framing.encode_request(18, 3, 78, "same-conn", ApiVersionsRequest("b", "1")))
    assert framing.decode_response(18, 3, _read_frame(sock))[0] == 78
    sock.close()


def test_unsupported_version_answer_needs_a_top_level_error_code() -> None:
    from kbroker.broker.network.server import _unsupported_version_answer

    assert _unsupported_version_answer(22, 99, 1) is None  # newer than our definitions: close
    assert _unsupported_version_answer(15, 6, 1) is None  # DescribeGroups: errors only per group
    frame = _unsupported_version_answer(22, 6, 9)  # InitProducerId v6: a top-level error code
    correlation, body = framing.decode_response(22, 6, frame[4:])
    assert (correlation, body.error_code) == (9, 35)
