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


def oauth_attempt(address: str, token: str, client_id: str = "sasl-wire-test") -> tuple[str, Wire]:
    """An OAUTHBEARER login (SaslHandshake v1, SaslAuthenticate v2) with `token`: "authenticated",
    "unsupported mechanism" or "refused", and the connection (closed by the broker unless authenticated)."""
    wire = Wire(address, client_id=client_id)
    hs = wire.call(17, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER"))
    if hs.error_code == 33:  # UNSUPPORTED_SASL_MECHANISM
        return "unsupported mechanism", wire
    assert hs.error_code == 0, hs
    auth = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
    if auth.error_code == 0 and not auth.auth_bytes:
        return "authenticated", wire
    # an invalid token: Kafka's error challenge first, then the failure once the client says %x01
    assert auth.error_code == 0 and b"invalid_token" in auth.auth_bytes, auth
    final = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=b"\x01"))
    assert final.error_code == 58, final  # SASL_AUTHENTICATION_FAILED
    return "refused", wire


def logs_in(address: str, mechanism: str, user: str, password: str) -> bool:
    """Whether `user` authenticates with `password` (PLAIN or SCRAM-SHA-256/512) on a fresh connection."""
    import scramp

    wire = Wire(address, client_id="sasl-wire-test")
    try:
        hs = wire.call(17, 1, SaslHandshakeRequest(mechanism=mechanism))
        assert hs.error_code == 0, hs
        if mechanism == "PLAIN":
            auth = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
            return auth.error_code == 0
        client = scramp.ScramClient([mechanism], user, password)
        first = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
        if first.error_code != 0:
            return False
        client.set_server_first(first.auth_bytes.decode())
        final = wire.call(36, 2, SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        if final.error_code != 0:
            return False
        client.set_server_final(final.auth_bytes.decode())  # the server proved it knows the credentials too
        return True
    finally:
        wire.close()
