"""Wire connections that log in with SASL/PLAIN first (SaslHandshake v1, SaslAuthenticate v2)."""

from __future__ import annotations

from kbroker.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kbroker.tests.integration.wire import Wire


def plain_login(address: str, user: str, password: str, client_id: str = "sasl-wire-test") -> Wire:
    wire = Wire(address, client_id=client_id)
    hs = wire.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert hs.error_code == 0, hs
    auth = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
    assert auth.error_code == 0, auth
    return wire
