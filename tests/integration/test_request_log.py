"""The request log (broker/operations/request_log.py): with --log-requests, one `request` line per
answered request, as Kafka's kafka.request.logger at DEBUG; off by default; no credentials in it."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer

from kbroker.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.security_setup import PASSWORDS, add_user
from kbroker.tests.integration.wire import Wire

FIELDS = {"api", "api_key", "version", "correlation_id", "client_id", "peer", "principal", "listener", "queue_ms",
          "handling_ms", "send_ms", "response_bytes", "level"}


def _broker_with_sasl(tmp_path, *extra: str, env: dict[str, str] | None = None) -> tuple[BrokerProcess, str]:
    data, plain_file = tmp_path / "data", tmp_path / "plain-users"
    add_user(data, "alice", "PLAIN", plain_file=plain_file)
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(data, "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                           "--sasl-plain-users-file", str(plain_file), "--profile", "test", *extra, port=plain,
                           listen_flag=False, env=env)
    return broker, f"127.0.0.1:{sasl}"


def _produce_and_consume(bootstrap: str, client_id: str, **security: str) -> None:
    """A real client (librdkafka) produces one record and reads it back in a group."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, **security})
    producer.produce("reqlog", b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": "reqlog-group",
                         "auto.offset.reset": "earliest", **security})
    consumer.subscribe(["reqlog"])
    deadline = time.monotonic() + 30
    got = None
    while got is None and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got = message.value()
    consumer.close()
    assert got == b"v"


def _requests_of(broker: BrokerProcess, client_id: str) -> list[dict]:
    return [e for e in broker.events("request") if e.get("client_id") == client_id]


def test_a_real_clients_requests_are_logged_with_kafkas_fields_and_no_credentials(tmp_path):
    broker, sasl = _broker_with_sasl(tmp_path, "--log-requests", "--log-level", "info")
    try:
        _produce_and_consume(broker.bootstrap, "reqlog-plain")
        password = PASSWORDS["alice"]
        _produce_and_consume(sasl, "reqlog-sasl", **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                                      "sasl.username": "alice", "sasl.password": password})
        wire = Wire(sasl, client_id="reqlog-wrong")  # a wrong password: answered with its error code
        assert wire.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        assert wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0not-the-password")).error_code == 58
        wire.close()
        time.sleep(0.5)  # the lines of the last answers are written as they leave
    finally:
        broker.stop()
    plain = _requests_of(broker, "reqlog-plain")
    apis = {e["api"] for e in plain}
    assert {"ApiVersions", "Metadata", "Produce", "FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch",
            "Fetch"} <= apis, apis  # librdkafka's classic group protocol (its default)
    for line in plain:
        assert FIELDS <= line.keys(), line
        assert line["level"] == "debug"  # written at debug although --log-level is info (a logger of its own)
        assert line["principal"] == "User:ANONYMOUS" and line["listener"] == "PLAINTEXT"
        assert line["peer"].startswith("127.0.0.1:")
        assert min(line["queue_ms"], line["handling_ms"], line["send_ms"]) >= 0
        assert line["response_bytes"] > 0
    produce = next(e for e in plain if e["api"] == "Produce")
    assert produce["api_key"] == 0 and produce["version"] >= 3 and "errors" not in produce
    # the first JoinGroup of a member (v4+) is answered MEMBER_ID_REQUIRED: the line says so
    assert any(e["api"] == "JoinGroup" and e.get("errors") == {"MEMBER_ID_REQUIRED": 1} for e in plain)
    correlation_ids = [e["correlation_id"] for e in plain]
    assert len(set(correlation_ids)) > 1

    sasl_lines = _requests_of(broker, "reqlog-sasl")
    authenticate = [e for e in sasl_lines if e["api"] == "SaslAuthenticate"]
    assert authenticate and all(e["listener"] == "SASL_PLAINTEXT" for e in sasl_lines)
    assert authenticate[0]["principal"] == "User:alice"  # written after the answer: the connection's principal
    assert any(e["api"] == "Produce" and e["principal"] == "User:alice" for e in sasl_lines)
    wrong = [e for e in _requests_of(broker, "reqlog-wrong") if e["api"] == "SaslAuthenticate"]
    assert wrong and wrong[0]["errors"] == {"SASL_AUTHENTICATION_FAILED": 1}
    assert wrong[0]["principal"] == "User:ANONYMOUS"
    text = broker.dump_log(tail=100000)
    assert password not in text and "not-the-password" not in text  # no SASL payload reaches the log


def test_off_by_default_and_on_by_kafkas_request_logger_level(tmp_path):
    broker, _ = _broker_with_sasl(tmp_path / "off", "--log-level", "debug")
    try:
        _produce_and_consume(broker.bootstrap, "reqlog-off")
    finally:
        broker.stop()
    assert broker.events("connection_open")  # debug lines are written: the request lines are not
    assert broker.events("request") == []
    # the apache/kafka image's way to turn the request logger on
    broker, _ = _broker_with_sasl(tmp_path / "on", env={"KAFKA_LOG4J_LOGGERS": "kafka.request.logger=DEBUG"})
    try:
        _produce_and_consume(broker.bootstrap, "reqlog-on")
        time.sleep(0.5)
    finally:
        broker.stop()
    assert any(e["api"] == "Produce" for e in _requests_of(broker, "reqlog-on"))
