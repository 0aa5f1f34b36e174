"""SASL mechanisms as sans-IO server state machines: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER.

Each exchange takes client tokens and returns server tokens (`evaluate`); it ends `complete` with a
`principal`, or raises `AuthenticationFailed` carrying Kafka's message and the principal the client
attempted (never a secret). The SCRAM exchange itself is scramp's; what is ours is Kafka's framing
around it: saslname unescaping, the minimum iteration count, and Kafka's error messages.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Protocol

from .credentials import CredentialStore, ScramCredential
from .oauth import InvalidToken, TokenValidator

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# kbroker's own bound on one SCRAM message (Kafka has only sasl.server.max.receive.size, 512 KiB): a
# real client-first is a name, a nonce and perhaps `tokenauth=true`, some hundred bytes
MAX_SCRAM_MESSAGE_BYTES = 16384
ALL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")


class AuthenticationFailed(Exception):
    """The client failed to authenticate; `str(self)` is the message Kafka sends back."""

    def __init__(self, message: str, attempted: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.attempted = attempted
        self.reason = reason or message  # what the log says; may be more precise than the client's message


class SaslExchange(Protocol):
    mechanism: str
    complete: bool
    principal: str | None  # "User:name" once complete
    credential_expiry_ms: int | None  # wall-clock ms when the credential ends (OAUTHBEARER tokens)

    def evaluate(self, token: bytes) -> bytes: ...


class PlainExchange:
    """RFC 4616: one message `authzid NUL authcid NUL passwd`, checked against the PLAIN users file."""

    mechanism = "PLAIN"

    def __init__(self, store: CredentialStore) -> None:
        self.store = store
        self.complete = False
        self.principal: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("Authentication failed: PLAIN exchange already complete")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got %d" % len(parts))
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified", user)
        if not self.store.check_plain(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password", user,
                                       self.store.plain_refusal())
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", user)
        self.complete, self.principal = True, "User:" + user
        return b""


class ScramExchange:
    """RFC 5802 through scramp: client-first, server-first, client-final, server-final."""

    def __init__(self, mechanism: str, store: CredentialStore) -> None:
        self.mechanism = mechanism
        self.store = store
        self.complete = False
        self.principal: str | None = None
        self.credential_expiry_ms: int | None = None
        self._user: str | None = None
        self._unknown = False
        import scramp  # imported by the first SCRAM exchange, not by every broker start

        # an alphanumeric server nonce like Kafka's: older librdkafka (kcat 1.7) mishandles '+', '/', '='
        self._server = scramp.ScramMechanism(mechanism).make_server(self._lookup, s_nonce=secrets.token_hex(16))
        self._step = 0

    def _lookup(self, escaped: str) -> tuple[bytes, bytes, bytes, int]:
        user = _unescape_saslname(escaped)
        self._user = user
        cred: ScramCredential | None = self.store.scram(user, self.mechanism)
        if cred is None:
            self._unknown = True
            raise KeyError(user)
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> bytes:
        import scramp

        if len(token) > MAX_SCRAM_MESSAGE_BYTES:
            raise AuthenticationFailed(f"Authentication failed: SCRAM message of {len(token)} bytes "
                                       f"(at most {MAX_SCRAM_MESSAGE_BYTES})")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Authentication failed: SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                self._refuse_unknown_user(text)
                self._server.set_client_first(text)
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._step = 2
                self._accept_librdkafka_nonce(text)
                self._server.set_client_final(text)
                final = self._server.get_server_final().encode()
                self.complete, self.principal = True, "User:" + (self._user or "")
                return final
        except (scramp.ScramException, ValueError, IndexError, KeyError) as e:
            if self._user is None:
                raise AuthenticationFailed(f"Authentication failed: invalid SCRAM client-first message ({e})") \
                    from None
            # Kafka answers an unknown user and a wrong proof alike, so users cannot be probed for
            reason = self.store.refusal(self._user) if self._unknown else f"invalid credentials ({e})"
            raise AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}", self._user, reason) from None
        raise AuthenticationFailed("Authentication failed: SCRAM exchange already complete", self._user)


    def _refuse_unknown_user(self, client_first: str) -> None:
        """The user is looked up as Kafka's ScramSaslServer looks it up (the saslname unescaped, no
        SASLprep) before scramp SASLpreps it, character by character: a name no credential has costs a
        dict lookup, and SASLprep only ever runs on names an operator created."""
        _gs2, _, rest = client_first.partition(",")
        _authzid, _, bare = rest.partition(",")
        if bare.startswith("m="):  # a reserved extension RFC 5802 says to refuse; scramp says so
            return
        if not bare.startswith("n="):
            return
        name = bare[2:].partition(",")[0]
        user = _unescape_saslname(name)
        if self.store.scram(user, self.mechanism) is None:
            self._user, self._unknown = user, True
            raise KeyError(user)

    def _accept_librdkafka_nonce(self, client_final: str) -> None:
        # librdkafka before 2.6.1 (kcat 1.7 in Debian and Ubuntu) answers with its own nonce prepended
        # to the full nonce (client + server). Kafka 3.8.1-3.9 accept a nonce that ends with the
        # expected one; so do we. The proof still covers the message exactly as the client sent it.
        nonce = str(self._server.nonce)
        for attr in client_final.split(","):
            if attr.startswith("r="):
                sent = attr[2:]
                if sent != nonce and sent.endswith(nonce):
                    self._server.nonce = type(self._server.nonce)(sent)
                return


def _unescape_saslname(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ValueError("invalid username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


class OAuthBearerExchange:
    """RFC 7628: the client's bearer token, checked by the listener's validator (security/oauth.py:
    signed JWTs against a JWKS; unsecured ones only under --dev-unsecured-oauthbearer).

    An invalid token is answered as Kafka answers it: first an error JSON as the server's challenge,
    then, once the client acknowledges with %x01, the failure.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator | None) -> None:
        self.validator = validator
        self.complete = False
        self.principal: str | None = None
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None
        self._reason: str | None = None
        self._attempted: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error, self._attempted, self._reason)
            raise AuthenticationFailed("Authentication failed: expected %x01 after an error challenge",
                                       self._attempted)
        if self.complete:
            raise AuthenticationFailed("Authentication failed: OAUTHBEARER exchange already complete")
        try:
            if self.validator is None:
                raise InvalidToken("OAUTHBEARER has no validator configured")
            valid = self.validator.validate(_bearer_token(token))
        except InvalidToken as e:
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            self._reason, self._attempted = str(e), e.attempted
            return self._error.encode()
        self.complete = True
        self.principal = "User:" + valid.principal
        self.credential_expiry_ms = valid.expiry_ms
        return b""


def _bearer_token(message: bytes) -> str:
    # gs2-header %x01 *(key=value %x01) %x01, one of the pairs being "auth=Bearer <token>"
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidToken("the client message is not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
        raise InvalidToken("the client message is not an OAUTHBEARER initial response")
    for pair in rest[:-2].split("\x01"):
        key, _, value = pair.partition("=")
        if key == "auth":
            scheme, _, jwt = value.partition(" ")
            if scheme.lower() == "bearer" and jwt:
                return jwt.strip()
    raise InvalidToken("the client message carries no bearer token")


def new_exchange(mechanism: str, store: CredentialStore, oauth: TokenValidator | None = None) -> SaslExchange:
    if mechanism == "PLAIN":
        return PlainExchange(store)
    if mechanism in SCRAM_MECHANISMS:
        return ScramExchange(mechanism, store)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerExchange(oauth)
    raise ValueError(f"unsupported SASL mechanism {mechanism}")
