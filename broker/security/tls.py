"""TLS for listeners: an `ssl.SSLContext` from PEM files, and the principal of a client certificate.

`ssl.keystore.location` is a PEM file with the broker's certificate chain and private key (Kafka's
`ssl.keystore.type=PEM`), `ssl.truststore.location` the PEM CA certificates client certificates must
chain to. A client certificate's principal is `User:` plus its subject in RFC 2253 form
(`CN=alice,O=Example`), rewritten by `ssl.principal.mapping.rules` in Kafka's syntax:
`RULE:pattern/replacement/[LU]` entries (the pattern must match the whole name; `$1` refers to a
group; `/L` and `/U` fold case) and `DEFAULT`, separated by commas, the first rule that matches wins.
"""

from __future__ import annotations

import collections
import re
import ssl
from dataclasses import dataclass

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class _AlertingSSLObject(ssl.SSLObject):
    """An SSLObject whose failed server handshake first lets its TLS alert out.

    asyncio's (and uvloop's) TLS layer closes the connection at once when the handshake fails,
    dropping the alert OpenSSL has queued (`unknown ca`, `certificate required`), so the client only
    sees the connection drop. Kafka's clients expect the alert: librdkafka then reports "SSL
    handshake failed" instead of a broker that went away. Here the first failure is reported as
    "want read", which makes the TLS layer send what is queued (the alert); the client then closes,
    or the next attempt raises the saved error.
    """

    _failure: ssl.SSLError | None = None

    def do_handshake(self) -> None:
        if self._failure is not None:
            raise self._failure
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as e:
            if getattr(e, "reason", None) in _NOT_TLS:  # no TLS client to tell: fail at once
                raise
            self._failure = e
            _recent_failures.append(e)
            raise ssl.SSLWantReadError("alert queued") from None


_NOT_TLS = ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE")
# The last few handshake failures, for the log line of the connection the client then drops
_recent_failures: "collections.deque[ssl.SSLError]" = collections.deque(maxlen=64)


def take_recent_failure() -> ssl.SSLError | None:
    return _recent_failures.popleft() if _recent_failures else None


def server_context(keystore: str, truststore: str = "", client_auth: str = "none",
                   key_password: str | None = None) -> ssl.SSLContext:
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"ssl.client.auth must be required, requested or none, not {client_auth!r}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sslobject_class = _AlertingSSLObject
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(keystore, password=key_password or None)
    if truststore:
        ctx.load_verify_locations(cafile=truststore)
    elif client_auth != "none":
        raise ValueError("ssl.client.auth needs ssl.truststore.location (the CA client certificates chain to)")
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx


def subject_dn(der_certificate: bytes) -> str:
    from cryptography import x509

    return x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern | None  # None is DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        # Java's $1 group references; a literal $ is written \$
        out = re.sub(r"\\\$|\$(\d+)", lambda g: "$" if g.group(0) == "\\$" else (m.group(int(g.group(1))) or ""),
                     self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(,|$)")


class PrincipalMapper:
    """Kafka's SslPrincipalMapper over `ssl.principal.mapping.rules`."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text, pos = rules.strip() or "DEFAULT", 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
            if m.group(1) == "DEFAULT":
                self.rules.append(_Rule(None, "", ""))
            else:
                pattern = m.group(2).replace("\\/", "/")
                self.rules.append(_Rule(re.compile(pattern), m.group(3).replace("\\/", "/"), m.group(4)))
            pos = m.end()

    def principal_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise LookupError(f"No rules apply to {dn}")
