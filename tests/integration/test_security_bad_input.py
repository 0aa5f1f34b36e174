"""Bad input on TLS and SASL listeners closes only that connection, with one log line: garbage in a
SASL exchange, an oversized token, a request before authentication, an unknown mechanism, a TLS
handshake that stalls (bounded by ssl.handshake.timeout.ms), a plaintext client on a TLS port.
Also the v0 handshake (bare tokens) old clients use."""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from kbroker.protocol import framing
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.frames import FrameReader, recv_frame
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker
from kbroker.tests.integration.wire import Wire, closed_by_peer


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("bad"))
    yield sb
    sb.broker.stop()


def peer_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def events_for(sb, name: str, peer: str, wait: float = 5.0) -> list[dict]:
    deadline = time.monotonic() + wait
    while True:
        found = [e for e in sb.broker.events(name) if e.get("peer") == peer]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def still_serving(sb) -> None:
    for protocol in ("SASL_PLAINTEXT",):
        w = Wire(sb.address(protocol))
        assert w.call(18, 3, ApiVersionsRequest("t", "1")).error_code == 0
        w.close()
    assert sb.broker.probe()


def test_garbage_in_a_scram_exchange_fails_and_closes(secure):
    w = Wire(secure.address("SASL_PLAINTEXT"))
    assert w.call(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
    r = w.call(36, 2, SaslAuthenticateRequest(auth_bytes=b"\xff\x00garbage,,=="))
    assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and r.error_message
    assert w.closed_by_peer()
    assert len(events_for(secure, "authentication_failed", peer_of(w.sock))) == 1
    still_serving(secure)


def test_oversized_token_before_authentication_closes(secure):
    w = Wire(secure.address("SASL_PLAINTEXT"))
    w.sock.sendall(struct.pack(">i", 600_000) + b"x" * 1024)  # > sasl.server.max.receive.size (524288)
    assert w.closed_by_peer()
    [event] = events_for(secure, "request_rejected", peer_of(w.sock))
    assert event["error"] == "frame size out of bounds" and event["max_bytes"] == 524288
    still_serving(secure)


def test_request_before_authentication_closes(secure):
    w = Wire(secure.address("SASL_PLAINTEXT"))
    w.send(3, 12, MetadataRequest(topics=None))
    assert w.closed_by_peer()
    [event] = events_for(secure, "request_rejected", peer_of(w.sock))
    assert "before SASL authentication" in event["error"]
    still_serving(secure)


def test_unknown_mechanism_is_answered_then_closed(secure):
    w = Wire(secure.address("SASL_PLAINTEXT"))
    r = w.call(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
    assert r.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert set(r.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}  # as configured
    assert w.closed_by_peer()


def test_v0_handshake_then_bare_tokens(secure):
    w = Wire(secure.address("SASL_PLAINTEXT"))
    assert w.call(17, 0, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    token = f"\0alice\0{PASSWORDS['alice']}".encode()
    w.sock.sendall(struct.pack(">i", len(token)) + token)
    assert w.read_frame() == b""  # the bare (empty) server token
    assert w.call(18, 3, ApiVersionsRequest("t", "1")).error_code == 0
    assert w.call(3, 12, MetadataRequest(topics=None)).brokers  # authenticated now
    w2 = Wire(secure.address("SASL_PLAINTEXT"))
    w2.call(17, 0, SaslHandshakeRequest(mechanism="PLAIN"))
    w2.sock.sendall(struct.pack(">i", 11) + b"\0alice\0nope")
    assert w2.closed_by_peer()


def test_stalled_tls_handshake_is_bounded(secure):
    s = socket.create_connection(("127.0.0.1", secure.ports["SSL"]))
    start = time.monotonic()
    assert closed_by_peer(s, timeout=15)  # --ssl-handshake-timeout-ms 2000 in these tests
    assert time.monotonic() - start < 10
    [event] = events_for(secure, "tls_handshake_failed", peer_of(s))
    assert "timed out" in event["error"]
    still_serving(secure)


def test_plaintext_client_on_a_tls_port(secure):
    s = socket.create_connection(("127.0.0.1", secure.ports["SASL_SSL"]))
    s.sendall(framing.encode_request(18, 3, 1, "plain", ApiVersionsRequest("plain", "1")))
    assert closed_by_peer(s, timeout=5)
    [event] = events_for(secure, "tls_handshake_failed", peer_of(s))
    assert "not a TLS client" in event["error"]
    still_serving(secure)


def test_tls_listener_serves_after_all_that(secure):
    ctx = ssl.create_default_context(cafile=str(secure.pki.ca))
    ctx.load_cert_chain(str(secure.pki.client_cert), str(secure.pki.client_key))
    with socket.create_connection(("127.0.0.1", secure.ports["SSL"])) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(framing.encode_request(18, 3, 1, "tls", ApiVersionsRequest("tls", "1")))
            _, body = framing.decode_response(18, 3, recv_frame(s.recv, FrameReader()))
            assert body.error_code == 0
