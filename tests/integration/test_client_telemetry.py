"""Client telemetry (KIP-714) with --client-metrics: librdkafka and the Java client push their own metrics
once the broker advertises GetTelemetrySubscriptions and PushTelemetry (both push by default), and /metrics
shows them per client instance; the APIs answer as Kafka 4.4's ClientMetricsManager does; a client cannot
grow the broker's memory without bound. Off by default, as in Kafka without a telemetry plugin."""

from __future__ import annotations

import struct
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from kbroker.protocol import compression, framing
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.get_telemetry_subscriptions_request import GetTelemetrySubscriptionsRequest
from kbroker.protocol.messages.push_telemetry_request import PushTelemetryRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_kafka_versions import api_versions, closed_after, table_of
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.kafka import java_command, kafka_libs

INTERVAL_MS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port = free_port()
    proc = BrokerProcess(tmp_path_factory.mktemp("telemetry") / "data", "--client-metrics",
                         "--client-metrics-interval-ms", str(INTERVAL_MS), "--metrics-listen", f"127.0.0.1:{port}")
    proc.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield proc
    proc.stop()


def scrape(broker) -> str:
    for attempt in range(50):  # the HTTP endpoint starts just after the Kafka listeners
        try:
            with urllib.request.urlopen(broker.metrics_url, timeout=10) as answer:
                return answer.read().decode()
        except urllib.error.URLError:
            if attempt == 49:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def series_of(text: str, client_id: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#") and f'client_id="{client_id}"' in line]


def test_off_by_default_as_in_kafka(tmp_path):
    with BrokerProcess(tmp_path / "data") as plain:
        assert not {71, 72} & set(table_of(api_versions(plain.bootstrap, 5)))
        assert closed_after(plain.bootstrap, framing.encode_request(71, 0, 1, "t", GetTelemetrySubscriptionsRequest()))


def test_advertised_with_client_metrics(broker):
    table = table_of(api_versions(broker.bootstrap, 5))
    assert table[71] == (0, 0) and table[72] == (0, 0)


def test_librdkafka_pushes_its_metrics(broker):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "rdkafka-telemetry"})
    found: list[str] = []
    for _ in range(300):  # librdkafka pushes every interval; give it several (a loaded machine: more)
        producer.produce("telemetry-rdkafka", b"x")
        producer.poll(0.1)
        found = series_of(scrape(broker), "rdkafka-telemetry")
        if any(line.startswith("org_apache_kafka_producer_record_queue_time_avg{") for line in found):
            break
    producer.flush(30)
    assert any(line.startswith("org_apache_kafka_producer_record_queue_time_avg{") for line in found), found
    assert all('client_instance_id="' in line for line in found)


def test_java_client_pushes_its_metrics(broker, tmp_path):
    if kafka_libs() is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text("rootLogger.level = ERROR\n")
    out = subprocess.run(java_command(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", "telemetry-java", "--num-records", "40",
        "--record-size", "10", "--throughput", "10", "--command-property", f"bootstrap.servers={broker.bootstrap}",
        "client.id=java-telemetry", "enable.metrics.push=true", heap="256m", log4j=log4j),
        capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    found = series_of(scrape(broker), "java-telemetry")
    assert any(line.startswith("org_apache_kafka_producer_record_queue_time_avg{") for line in found), found


def _metrics_data(count: int, name: str = "test.gauge") -> bytes:
    """An OTLP MetricsData with one gauge of `count` points, each with its own attribute value."""
    def field(number: int, payload: bytes) -> bytes:
        return _uvarint(number << 3 | 2) + _uvarint(len(payload)) + payload

    points = b"".join(
        field(1, field(7, field(1, b"n") + field(2, field(1, str(i).encode()))) + _uvarint(4 << 3 | 1)
              + struct.pack("<d", float(i)))
        for i in range(count))
    metric = field(1, name.encode()) + field(5, points)
    return field(1, field(2, field(2, metric)))


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_the_apis_answer_as_kafka_4_4s_client_metrics_manager(broker):
    """The order of ClientMetricsManager's checks, each error code as Kafka answers it."""
    wire = Wire(broker.bootstrap, client_id="wire-telemetry")

    def get(instance: uuid.UUID):
        return wire.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=instance))

    def push(instance: uuid.UUID, sub: int, payload: bytes = b"", codec: int = 0, terminating: bool = False) -> int:
        return wire.call(72, 0, PushTelemetryRequest(client_instance_id=instance, subscription_id=sub,
                                                     terminating=terminating, compression_type=codec,
                                                     metrics=payload)).error_code

    first = get(uuid.UUID(int=0))  # no id yet: one is handed out
    assert first.error_code == 0 and first.client_instance_id != uuid.UUID(int=0)
    assert (first.accepted_compression_types, first.push_interval_ms, first.telemetry_max_bytes,
            first.requested_metrics) == ([4, 3, 1, 2], INTERVAL_MS, 1048576, ["*"])
    me, sub = first.client_instance_id, first.subscription_id
    assert get(me).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # sooner than the interval
    assert push(me, sub + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert get(me).error_code == 0  # at once after UNKNOWN_SUBSCRIPTION_ID
    # (that Get did not restart the interval: Kafka moves its time only when it came after one)
    assert push(me, sub) == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # a second push within the interval
    assert push(me, sub, b"x" * 1048577, terminating=True) == ErrorCode.TELEMETRY_TOO_LARGE
    assert push(me, sub, terminating=True) == ErrorCode.INVALID_REQUEST  # nothing after terminating
    assert push(uuid.UUID(int=0), 0) == ErrorCode.INVALID_REQUEST

    other = get(uuid.UUID(int=0))
    assert push(other.client_instance_id, other.subscription_id, codec=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    garbled = get(uuid.UUID(int=0))
    assert push(garbled.client_instance_id, garbled.subscription_id, b"\xff\xff not protobuf") == ErrorCode.INVALID_RECORD
    third = get(uuid.UUID(int=0))
    payload = compression.compress(compression.COMPRESSION_ZSTD, _metrics_data(3, "wire.gauge"))
    assert push(third.client_instance_id, third.subscription_id, payload, codec=compression.COMPRESSION_ZSTD) == 0
    shown = [line for line in series_of(scrape(broker), "wire-telemetry") if line.startswith("wire_gauge{")]
    assert len(shown) == 3 and f'client_instance_id="{third.client_instance_id}"' in shown[0]
    wire.close()


def test_a_client_cannot_grow_the_brokers_memory(broker):
    """One push of 5,000 distinct series keeps at most 2,000 of them (the per-instance bound); the rest
    are counted as dropped."""
    wire = Wire(broker.bootstrap, client_id="greedy-client")
    answer = wire.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
    error = wire.call(72, 0, PushTelemetryRequest(
        client_instance_id=answer.client_instance_id, subscription_id=answer.subscription_id, terminating=False,
        compression_type=compression.COMPRESSION_GZIP,
        metrics=compression.compress(compression.COMPRESSION_GZIP, _metrics_data(5000, "greedy.gauge")))).error_code
    assert error == 0
    text = scrape(broker)
    assert len([line for line in series_of(text, "greedy-client") if line.startswith("greedy_gauge{")]) == 2000
    dropped = next(line for line in text.splitlines() if line.startswith("kbroker_client_telemetry_dropped_series_total"))
    assert float(dropped.split()[-1]) >= 3000
    wire.close()


def test_hostile_payloads_are_invalid_records_not_crashes(broker):
    wire = Wire(broker.bootstrap, client_id="hostile-client")
    rng = __import__("random").Random(43)
    for i in range(30):
        answer = wire.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        if i % 3 == 0:  # valid framing up to a lie about a length
            junk = b"\x0a\xff\xff\xff\x0f" + junk
        error = wire.call(72, 0, PushTelemetryRequest(
            client_instance_id=answer.client_instance_id, subscription_id=answer.subscription_id,
            terminating=False, compression_type=i % 5, metrics=junk)).error_code
        assert error in (0, ErrorCode.INVALID_RECORD)
    assert table_of(api_versions(broker.bootstrap, 5))[72] == (0, 0)  # still serving
    wire.close()
