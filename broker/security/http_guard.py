"""Who may use the broker's HTTP endpoint (`--metrics-listen`, broker/operations/admin_http.py): not a web page.

A browser lets any page send a `text/plain` POST to 127.0.0.1 without asking (no CORS preflight),
and DNS rebinding lets a page's own name point at 127.0.0.1 and read the answers. So every request
must name, in its Host header, an address the endpoint listens on (for one bound to loopback:
`localhost` or a loopback address; bound to every interface: an IP address, `localhost`, or a name of
`--metrics-allowed-hosts`); an `Origin`, if sent, must be the endpoint's own; a request that changes
state must be `application/json` (which a page cannot send cross-site without a preflight, and the
endpoint answers no preflight); and the test controls (`POST /v1/test/...`) need the bearer token
printed at start or set with `--test-controls-token` (`Authorization: Bearer ...`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_FILE = "test-controls.token"  # in the data directory, readable by its owner only
SAFE_METHODS = ("GET", "HEAD")


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    reason: str


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def host_name(host_header: str) -> str:
    """The name or address of a Host header value, without its port, lower case."""
    text = host_header.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    return text.rpartition(":")[0] if text.count(":") == 1 else text


class HttpGuard:
    def __init__(self, bind_host: str, allowed_hosts: str = "", token: str | None = None) -> None:
        self.bind_host = bind_host.strip("[]").lower()
        names = {h.strip().lower() for h in allowed_hosts.split(",") if h.strip()}
        self.any_host = "*" in names
        self.allowed_names = frozenset(names - {"*"})
        self.token = token

    def host_allowed(self, name: str) -> bool:
        if self.any_host or name in self.allowed_names:
            return True
        bound, ip = _ip(self.bind_host), _ip(name)
        loopback_name = name == "localhost" or (ip is not None and ip.is_loopback)
        if self.bind_host == "localhost" or (bound is not None and bound.is_loopback):
            return loopback_name
        if self.bind_host in ("", "0.0.0.0", "::"):
            return loopback_name or ip is not None  # an address literal cannot be rebound to another
        return name == self.bind_host or (ip is not None and bound is not None and ip == bound)

    def refusal(self, method: str, path: list[str], headers: dict[str, str]) -> Refusal | None:
        """Why this request is refused (before its body is read as JSON), or None."""
        host = headers.get("host")
        if not host:
            return Refusal(400, "no Host header")
        name = host_name(host)
        if not self.host_allowed(name):
            return Refusal(403, f"Host {host!r} is not an address this endpoint listens on (a DNS rebinding "
                                f"page?); name it in --metrics-allowed-hosts if it is yours")
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme != "http" or (parts.hostname or "") != name or \
                    (parts.port or 80) != _port(host):
                return Refusal(403, f"cross-site request refused: Origin {origin!r} is not this endpoint")
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return Refusal(403, f"cross-site request refused (Sec-Fetch-Site: {headers['sec-fetch-site']})")
        if method not in SAFE_METHODS:
            ctype = headers.get("content-type", "").partition(";")[0].strip().lower()
            if ctype != "application/json":
                return Refusal(415, f"a {method} takes Content-Type: application/json, not {ctype or 'none'}")
        if path[:2] == ["v1", "test"] and self.token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                return Refusal(401, f"test controls need Authorization: Bearer TOKEN (the token the broker printed "
                                    f"at start, in <data-dir>/{TOKEN_FILE}, or --test-controls-token)")
        return None


def _port(host_header: str) -> int:
    text = host_header.strip()
    tail = text.rpartition("]")[2] if text.startswith("[") else text
    if tail.count(":") == 1:
        try:
            return int(tail.rpartition(":")[2])
        except ValueError:
            return -1
    return 80


def test_controls_token(data_dir: Path, given: str) -> tuple[str, Path]:
    """The token (`given`, or a new random one) and the file in the data directory it is written to,
    readable by its owner only, so that `kbroker test ...` run by that owner finds it."""
    token = given or secrets.token_urlsafe(24)
    path = data_dir / TOKEN_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file of looser mode is not reused as it was
        os.write(fd, token.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token, path
