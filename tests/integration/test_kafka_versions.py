"""`--kafka-version X.Y` makes kbroker answer as that Kafka release: its ApiVersions table (APIs, versions,
features: protocol/kafka_releases.json, which tools/kafka_releases.py took from each release itself), and
its refusals (a version or an API outside it closes the connection, as Kafka closes it; an ApiVersions
it does not serve is answered in v0 with its own range). Without the flag the table is 4.4.0's
(tests/reference/test_kafka_versions.py holds it against the running Kafka 4.4.0) and older versions
are still served to clients that send them without asking.

What kbroker does not serve of a release's table is named here, with who builds it; the test holds
kbroker to exactly `release table - NOT_SERVED`."""

from __future__ import annotations

import socket

import pytest

from kbroker.broker.apis import SERVED
from kbroker.protocol import framing
from kbroker.protocol.kafka_releases import KafkaRelease, kafka_release, lines
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.fetch_request import FetchRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

# APIs of Kafka's broker listener that kbroker does not serve (yet), and why.
NOT_SERVED = {
    80: "AddRaftVoter: KIP-853's quorum whose voters change; kbroker's is itself alone (DescribeQuorum)",
    81: "RemoveRaftVoter: KIP-853's quorum whose voters change; kbroker's is itself alone (DescribeQuorum)",
    94: "UnregisterController: KIP-853's quorum whose voters change; kbroker's is itself alone (DescribeQuorum)",
}
# APIs served below the release's newest version: api key -> (newest version served, why)
OLDER_VERSIONS: dict[int, tuple[int, str]] = {}
# Features of a release that kbroker does not claim, and why.
NOT_CLAIMED: dict[str, str] = {}

# Features claimed below a release's highest level: feature -> (highest level claimed, why).
CAPPED = {"kraft.version": (0, "KIP-853's quorum whose voters change (1); kbroker's is itself alone")}


def expected_apis(release: KafkaRelease) -> dict[int, tuple[int, int]]:
    out = {}
    for key, (low, high) in release.apis.items():
        if key in NOT_SERVED:
            continue
        newest = OLDER_VERSIONS.get(key, (high, ""))[0]
        out[key] = (low, min(high, newest))
    return out


def expected_features(release: KafkaRelease) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    def cap(name: str, level: int) -> int:
        return min(level, CAPPED.get(name, (level, ""))[0])

    supported = {name: (low, cap(name, high)) for name, (low, high) in release.supported_features.items()
                 if name not in NOT_CLAIMED}
    finalized = {name: cap(name, level) for name, level in release.finalized_features.items()
                 if name not in NOT_CLAIMED}
    return supported, {name: level for name, level in finalized.items() if level > 0}


def api_versions(bootstrap: str, version: int):
    wire = Wire(bootstrap)
    try:
        return wire.call(18, version, ApiVersionsRequest(client_software_name="kbroker-test", client_software_version="1"))
    finally:
        wire.close()


def table_of(answer) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def features_of(answer) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    return ({f.name: (f.min_version, f.max_version) for f in answer.supported_features},
            {f.name: f.max_version_level for f in answer.finalized_features})


def closed_after(bootstrap: str, frame: bytes) -> bool:
    """Send one request frame; True when the broker closes the connection without an answer."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame)
        try:
            return sock.recv(4) == b""
        except ConnectionResetError:
            return True


def test_not_served_names_only_apis_kbroker_lacks():
    """The exemptions cannot hide a served API (else the tables below could not fail for it)."""
    assert not set(NOT_SERVED) & set(SERVED)
    assert all(SERVED[key][2] == newest for key, (newest, _) in OLDER_VERSIONS.items())


# Which way each test sets the version: the flag, the environment variable, or the TOML file.
HOW = {"3.9": "env", "4.0": "toml"}


@pytest.mark.parametrize("line", lines())
def test_kafka_version_answers_as_that_release(line, tmp_path):
    release = kafka_release(line)
    args: list[str] = []
    env = None
    if HOW.get(line) == "env":
        env = {"KBROKER_KAFKA_VERSION": line}
    elif HOW.get(line) == "toml":
        (tmp_path / "kbroker.toml").write_text(f'kafka_version = "{release.release}"\n')
        args = ["--config", str(tmp_path / "kbroker.toml")]
    else:
        args = ["--kafka-version", line]
    top = release.apis[18][1]
    with BrokerProcess(tmp_path / "data", *args, env=env) as broker:
        answer = api_versions(broker.bootstrap, top)
        assert answer.error_code == 0
        assert table_of(answer) == expected_apis(release)
        assert features_of(answer) == expected_features(release)

        # An ApiVersions above the release's is answered in v0 with the release's range (KIP-511).
        correlation, body = framing.decode_response(18, 0, _call_raw(broker.bootstrap, 18, top + 1))
        assert body.error_code == 35 and table_of(body) == {18: (0, top)}
        # A Fetch newer than the release serves closes the connection, as that Kafka closes it.
        fetch_top = release.apis[1][1]
        assert closed_after(broker.bootstrap, framing.encode_request(
            1, fetch_top + 1, 1, "t", FetchRequest(max_wait_ms=0, min_bytes=0, topics=[])))
        # An API kbroker serves that the release did not have is unknown to it: closed too.
        newer = [key for key in SERVED if key not in release.apis]
        if newer:
            assert closed_after(broker.bootstrap, _frame_of(newer[0]))

        if 68 in release.apis:
            # Kafka 3.7-3.9 advertise the consumer protocol's APIs but, by default, answer them
            # UNSUPPORTED_VERSION (asked of 3.9.2); from 4.0 group.version 1 is finalized and they serve
            on = "group.version" in release.finalized_features
            answer = _heartbeat(broker.bootstrap)
            assert (answer.error_code == 0) == on and (answer.error_code == 35) == (not on)

        kafka = pytest.importorskip("kafka")
        consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap)
        try:  # kafka-python's version inference reads the table; it knows releases up to 4.3
            assert consumer.config["api_version"] == min(release.version, (4, 3))
        finally:
            consumer.close()


def test_without_kafka_version_older_versions_are_still_served(tmp_path):
    """The default advertises 4.4.0's table but still serves what clients send without asking:
    Fetch v3 (Kafka 4 serves 4 and up) is answered, where `--kafka-version 4.4` closes it."""
    frame = framing.encode_request(1, 3, 1, "t", FetchRequest(max_wait_ms=0, min_bytes=0, topics=[]))
    with BrokerProcess(tmp_path / "lenient") as broker:
        assert table_of(api_versions(broker.bootstrap, 5))[1][0] == 4
        assert not closed_after(broker.bootstrap, frame)
    with BrokerProcess(tmp_path / "strict", "--kafka-version", "4.4") as broker:
        assert closed_after(broker.bootstrap, frame)


def test_kafka_version_refuses_unknown_releases(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kbroker", "serve", "--data-dir", str(tmp_path / "d"),
                          "--kafka-version", "2.8"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--kafka-version: '2.8' is not a Kafka release kbroker can answer as" in out.stderr + out.stdout


def _call_raw(bootstrap: str, api_key: int, version: int) -> bytes:
    """An ApiVersions of any version (its body empty, as a version the broker cannot know), its answer frame."""
    import struct

    from kbroker.tests.integration.wire import read_frame

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        frame = struct.pack(">hhih", api_key, version, 1, 1) + b"t" + b"\x00" + b"\x00"
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        return read_frame(sock)


def _frame_of(api_key: int) -> bytes:
    """A request of `api_key` at its lowest served version, with an empty body."""
    module = __import__(f"kbroker.protocol.messages.{SERVED[api_key][0]}_request", fromlist=["SPEC"])
    return framing.encode_request(api_key, SERVED[api_key][1], 1, "t", module.SPEC.struct.cls())


# What Kafka 3.9.2 answered (asked with tools/kafka_releases.py's jars), for message.format.version at
# create time: accepted values are kept as written, refused ones get its message.
KAFKA_3_9_MESSAGE_FORMAT_VERSIONS = {
    "0.10.0.0": None, "2.8.1": None, "3.0-IV1": None, "0.10.0": None, "2.8-IV1": None, "1.0.5.6": None,
    "0.8.0": None, "3.9": None,
    "garbage": "Invalid value garbage for configuration message.format.version: Version garbage is not a valid version",
    "4.0": "Invalid value 4.0 for configuration message.format.version: Version 4.0 is not a valid version",
    "3.10": "Invalid value 3.10 for configuration message.format.version: Version 3.10 is not a valid version",
    "0.10.0-IV9": "Invalid value 0.10.0-IV9 for configuration message.format.version: Version 0.10.0-IV9 is not a "
                  "valid version",
    "0.10": "Invalid value 0.10 for configuration message.format.version: Version 0.10 is not a valid version",
}


def test_kafka_3_accepts_and_ignores_message_format_version(tmp_path):
    """librdkafka's 0092 against a Kafka 3 broker: produce, alter the topic's message.format.version to
    0.10.0.0 (AlterConfigs, as its test does), produce more, and consume every message. Kafka 3.x
    validates the value as a MetadataVersion (0.10.0.0 is 0.10.0), keeps it as written, and ignores it."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    with BrokerProcess(tmp_path / "data", "--kafka-version", "3.9", "--group-initial-rebalance-delay-ms", "0") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for i, (value, refusal) in enumerate(KAFKA_3_9_MESSAGE_FORMAT_VERSIONS.items()):
            future = admin.create_topics([NewTopic(f"mfv-{i}", 1, 1, config={"message.format.version": value})])
            if refusal is None:
                future[f"mfv-{i}"].result(30)
                res = ConfigResource(ConfigResource.Type.TOPIC, f"mfv-{i}")
                entry = admin.describe_configs([res])[res].result(30)["message.format.version"]
                assert (entry.value, entry.is_default) == (value, False)
            else:
                with pytest.raises(KafkaException) as refused:
                    future[f"mfv-{i}"].result(30)
                assert refused.value.args[0].str() == refusal

        topic = "0092_mixed_msgver"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        default = admin.describe_configs([res])[res].result(30)["message.format.version"]
        assert (default.value, default.is_default) == ("3.0-IV1", True)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
        for n in range(60):
            producer.produce(topic, value=b"%d" % n, partition=0)
            producer.flush(30)  # one message per batch, as 0092
            if n == 30:
                altered = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"message.format.version": "0.10.0.0"})
                admin.alter_configs([altered])[altered].result(30)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "0092", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        seen = []
        try:
            for _ in range(240):
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    seen.append(int(msg.value()))
                if len(seen) == 60:
                    break
        finally:
            consumer.close()
        assert seen == list(range(60))
        assert admin.describe_configs([res])[res].result(30)["message.format.version"].value == "0.10.0.0"


def _heartbeat(bootstrap: str):
    from kbroker.protocol.messages import consumer_group_heartbeat_request as cgh

    wire = Wire(bootstrap)
    try:
        return wire.call(68, 0, cgh.ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="m" * 22, member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=["t"], server_assignor=None, topic_partitions=[]))
    finally:
        wire.close()
