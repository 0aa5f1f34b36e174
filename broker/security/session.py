"""One connection's authentication, as Kafka's SaslServerAuthenticator runs it (sans-IO).

On a SASL listener a connection starts unauthenticated: only ApiVersions and SaslHandshake are
accepted, then SaslAuthenticate (SaslHandshake v1) or raw tokens (SaslHandshake v0, the framing
old clients use: each token a 4-byte length and bytes, with no request header). Anything else, a
second handshake, an unknown mechanism or a failed exchange ends the connection after the answer.
With `connections.max.reauth.ms` set, a session lasts that long (or until its OAUTHBEARER token
expires, if sooner); the client re-authenticates on the same connection with a new handshake, as
the same principal, and a request that arrives after the session expired closes the connection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import structlog

from .credentials import CredentialStore
from .oauth import TokenValidator
from .sasl import AuthenticationFailed, SaslExchange, new_exchange
from ...protocol.errors import ErrorCode

log = structlog.get_logger("kbroker.security")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
ANONYMOUS = "User:ANONYMOUS"
MAX_LOGGED_NAME = 256


@dataclass(slots=True)
class AuthResult:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


class ConnectionAuth:
    def __init__(self, *, sasl: bool, mechanisms: tuple[str, ...], credentials: CredentialStore | None,
                 peer: str, listener: str, reauth_ms: int = 0, principal: str = ANONYMOUS,
                 clock_ms: Callable[[], int] | None = None, oauth: TokenValidator | None = None) -> None:
        self.sasl = sasl
        self.mechanisms = mechanisms
        self.credentials = credentials
        self.oauth = oauth  # OAUTHBEARER's token validator (security/oauth.py)
        self.peer, self.listener = peer, listener
        self.reauth_ms = reauth_ms
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.principal = principal  # ANONYMOUS, or the certificate's, until SASL names one
        self.authenticated = not sasl
        self.raw_tokens = False  # SaslHandshake v0: the next frames are bare tokens
        self.close_after_response = False
        self.session_expiry_ms: int | None = None
        self._exchange: SaslExchange | None = None

    # --- gate: what may be read next ---
    def refusal(self, api_key: int) -> str | None:
        """Why this request may not be served on this connection now (the connection closes), or None."""
        if not self.sasl:
            return None
        if self._exchange is not None and not self._exchange.complete:
            if api_key != SASL_AUTHENTICATE:
                return f"unexpected request of api {api_key} during SASL authentication"
            return None
        if not self.authenticated:
            if api_key in (API_VERSIONS, SASL_HANDSHAKE):
                return None
            return f"unexpected request of api {api_key} before SASL authentication"
        if self.session_expiry_ms is not None and self.clock_ms() >= self.session_expiry_ms \
                and api_key != SASL_HANDSHAKE:
            return "SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate"
        return None

    def max_frame_bytes(self, normal: int, before_auth: int) -> int:
        """Before authentication a frame is bounded by `sasl.server.max.receive.size`, as in Kafka."""
        return normal if self.authenticated else min(normal, before_auth)

    # --- SaslHandshake ---
    def handshake(self, mechanism: str, version: int) -> tuple[int, list[str]]:
        enabled = list(self.mechanisms)
        if not self.sasl:
            self.close_after_response = True
            self._log_failure(mechanism, None, "SaslHandshake on a listener without SASL")
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if self._exchange is not None and not self._exchange.complete:
            self.close_after_response = True
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in self.mechanisms:
            self.close_after_response = True
            self._log_failure(mechanism, None, "unsupported SASL mechanism")
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        assert self.credentials is not None
        self._exchange = new_exchange(mechanism, self.credentials, self.oauth)
        self.raw_tokens = version == 0
        return ErrorCode.NONE, enabled

    # --- SaslAuthenticate (v1 handshake) and raw tokens (v0) ---
    def authenticate(self, token: bytes) -> AuthResult:
        exchange = self._exchange
        if exchange is None or exchange.complete:
            self.close_after_response = True
            message = ("SaslAuthenticate request received after successful authentication" if self.authenticated
                       else "Unexpected SaslAuthenticate request before SaslHandshake")
            return AuthResult(ErrorCode.ILLEGAL_SASL_STATE, message, b"", 0)
        try:
            challenge = exchange.evaluate(token)
            if exchange.complete:
                self._complete(exchange)
        except AuthenticationFailed as e:
            self.close_after_response = True
            self._log_failure(exchange.mechanism, e.attempted, e.reason)
            return AuthResult(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e), b"", 0)
        lifetime = 0
        if exchange.complete and self.session_expiry_ms is not None:
            lifetime = max(1, self.session_expiry_ms - self.clock_ms())
        return AuthResult(ErrorCode.NONE, None, challenge, lifetime)

    def raw_token(self, token: bytes) -> bytes | None:
        """A v0 token; the answer to write back (length-prefixed, no header), or None to close."""
        result = self.authenticate(token)
        if self._exchange is not None and self._exchange.complete:
            self.raw_tokens = False
        return result.auth_bytes if result.error_code == ErrorCode.NONE else None

    def _complete(self, exchange: SaslExchange) -> None:
        principal = exchange.principal or ANONYMOUS
        if self.authenticated and self.sasl and principal != self.principal:
            raise AuthenticationFailed(f"Cannot change principals during re-authentication from {self.principal}: "
                                       f"{principal}", principal)
        now = self.clock_ms()
        expiry = None
        if self.reauth_ms > 0:
            expiry = now + self.reauth_ms
            if exchange.credential_expiry_ms is not None:
                expiry = min(expiry, exchange.credential_expiry_ms)
        reauth = self.authenticated
        self.principal, self.authenticated, self.session_expiry_ms = principal, True, expiry
        # a first authentication is routine (debug); a re-authentication (KIP-368) is worth seeing
        (log.info if reauth else log.debug)("sasl_authenticated", peer=self.peer, listener=self.listener,
                                            mechanism=exchange.mechanism, principal=principal,
                                            reauthentication=reauth, session_ms=self.reauth_ms or None)

    def _log_failure(self, mechanism: str, attempted: str | None, error: str) -> None:
        if attempted is not None and len(attempted) > MAX_LOGGED_NAME:  # a 512 KiB name is one line, not 512 KiB
            attempted = f"{attempted[:MAX_LOGGED_NAME]}... ({len(attempted)} characters)"
        log.warning("authentication_failed", peer=self.peer, listener=self.listener, mechanism=mechanism,
                    principal=attempted, error=error[:1000])
