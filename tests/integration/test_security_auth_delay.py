"""A failed authentication is answered after `connection.failed.authentication.delay.ms` (issue 38,
item 8), as Kafka's Selector delays it: the answer and the close wait on a timer, and neither the
event loop nor other clients wait with them."""

from __future__ import annotations

import time

from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.security_setup import PASSWORDS, add_user
from kbroker.tests.integration.wire import Wire


def broker_with_sasl(tmp_path, *extra: str) -> tuple[BrokerProcess, str]:
    data, plain_file = tmp_path / "data", tmp_path / "plain-users"
    add_user(data, "alice", "PLAIN", plain_file=plain_file)
    add_user(data, "bob", "SCRAM-SHA-512")
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(data, "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                           "--sasl-plain-users-file", str(plain_file), *extra, port=plain, listen_flag=False)
    return broker, f"127.0.0.1:{sasl}"


def wrong_password(address: str) -> Wire:
    """A connection that has sent a wrong PLAIN password and not read the answer yet."""
    wire = Wire(address)
    assert wire.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    wire.send(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"))
    return wire


def test_a_wrong_password_is_answered_after_the_delay_and_others_are_served_meanwhile(tmp_path):
    broker, sasl = broker_with_sasl(tmp_path, "--connection-failed-authentication-delay-ms", "3000")
    try:
        started = time.monotonic()
        waiting = [wrong_password(sasl) for _ in range(10)]
        # meanwhile another client is served at once, and as often as it asks
        other = Wire(broker.bootstrap)
        for _ in range(50):
            assert other.call(18, 3, ApiVersionsRequest("t", "1")).error_code == 0
        served_at = time.monotonic()
        answered_at = []
        for wire in waiting:
            r = wire.receive(36, 2)
            answered_at.append(time.monotonic())
            assert r.error_code == 58 and "Invalid username or password" in r.error_message  # SASL_AUTHENTICATION_FAILED
            assert wire.closed_by_peer()
        # ordering, not speed: the other client finished before any failure was answered
        assert served_at < min(answered_at)
        assert min(answered_at) - started >= 3.0  # never sooner than the delay (a lower bound only)
        alice = Wire(sasl)  # the right password is not delayed
        assert alice.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        t0 = time.monotonic()
        assert alice.call(36, 2, SaslAuthenticateRequest(auth_bytes=f"\0alice\0{PASSWORDS['alice']}".encode())
                          ).error_code == 0
        assert time.monotonic() - t0 < 3.0
        other.close()
        alice.close()
    finally:
        broker.stop()


def test_kafkas_default_delay_for_a_wrong_scram_proof_and_an_unknown_mechanism(tmp_path):
    import scramp

    broker, sasl = broker_with_sasl(tmp_path)
    try:
        wire = Wire(sasl)
        assert wire.call(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
        client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "not-bobs")
        first = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
        client.set_server_first(first.auth_bytes.decode())
        t0 = time.monotonic()
        r = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        assert r.error_code == 58 and time.monotonic() - t0 >= 0.1  # connection.failed.authentication.delay.ms
        wire.close()
        wire = Wire(sasl)
        t0 = time.monotonic()
        assert wire.call(17, 1, SaslHandshakeRequest(mechanism="GSSAPI")).error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert time.monotonic() - t0 >= 0.1
        wire.close()
    finally:
        broker.stop()


def test_a_failed_v0_exchange_closes_after_the_delay_too(tmp_path):
    import struct

    broker, sasl = broker_with_sasl(tmp_path, "--connection-failed-authentication-delay-ms", "1000")
    try:
        wire = Wire(sasl)
        assert wire.call(17, 0, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = b"\0alice\0wrong"
        t0 = time.monotonic()
        wire.sock.sendall(struct.pack(">i", len(token)) + token)  # v0: a bare token, no header
        wire.sock.settimeout(10)
        try:
            assert wire.sock.recv(1) == b""
        except ConnectionResetError:
            pass
        assert time.monotonic() - t0 >= 1.0
        wire.close()
    finally:
        broker.stop()



