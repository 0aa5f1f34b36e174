"""max.connections.per.ip holds on TLS listeners too, and a refused connection costs no TLS handshake."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from kbroker.protocol import framing
from kbroker.protocol.frames import FrameReader, recv_frame
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.tests.integration.security_setup import start_secure_broker
from kbroker.tests.integration.wire import closed_by_peer


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("limits"), "--max-connections-per-ip", "2")
    yield sb
    sb.broker.stop()


def tls_connect(sb) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(sb.pki.ca))
    ctx.load_cert_chain(str(sb.pki.client_cert), str(sb.pki.client_key))
    raw = socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(framing.encode_request(18, 3, 1, "t", ApiVersionsRequest("t", "1")))
    _, body = framing.decode_response(18, 3, recv_frame(s.recv, FrameReader()))
    assert body.error_code == 0
    return s


def test_third_tls_connection_from_one_ip_is_refused_before_the_handshake(secure):
    kept = [tls_connect(secure), tls_connect(secure)]
    raw = socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=10)
    assert closed_by_peer(raw, timeout=5)  # closed without a ServerHello: we sent nothing, it sent nothing
    deadline = time.monotonic() + 5
    while not any("max.connections.per.ip=2" in e.get("reason", "")
                  for e in secure.broker.events("connection_refused")):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for s in kept:
        s.close()
    deadline = time.monotonic() + 30
    while True:  # room again once the broker has seen the others leave (not a fixed sleep: load)
        try:
            tls_connect(secure).close()
            break
        except (OSError, EOFError, AssertionError):
            assert time.monotonic() < deadline, "still refused 30 s after the other connections closed"
            time.sleep(0.2)
