"""A broker with TLS and SASL listeners for the security tests: certificates made here with
`cryptography` (never committed), SCRAM users added with `kbroker user add`, PLAIN users in a file,
OAUTHBEARER tokens signed with a key whose JWKS file the broker reads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from kbroker.broker.security.dev_security import _pem_cert, _pem_key, issue, make_ca
from kbroker.tests.integration.broker_process import BrokerProcess, free_port

PASSWORDS = {"bob": "bob-scram-secret", "alice": "alice-plain-secret", "admin": "admin-secret",
             "reader": "reader-secret"}


@dataclass
class Pki:
    ca: Path
    broker: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # signed by a CA the broker does not trust
    rogue_key: Path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca("test CA")
    b_key, b_cert = issue(ca_key, ca_cert, "kbroker", ["localhost", "127.0.0.1"])
    c_key, c_cert = issue(ca_key, ca_cert, "client-app", client=True, organization="Example")
    r_ca_key, r_ca_cert = make_ca("rogue CA")
    r_key, r_cert = issue(r_ca_key, r_ca_cert, "intruder", client=True)
    files = {
        "ca.pem": _pem_cert(ca_cert), "broker.pem": _pem_cert(b_cert) + _pem_key(b_key),
        "client.pem": _pem_cert(c_cert), "client.key": _pem_key(c_key),
        "rogue.pem": _pem_cert(r_cert), "rogue.key": _pem_key(r_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    d = directory
    return Pki(d / "ca.pem", d / "broker.pem", d / "client.pem", d / "client.key", d / "rogue.pem", d / "rogue.key")


def add_user(data_dir: Path, name: str, *mechanisms: str, plain_file: Path | None = None) -> None:
    args = [sys.executable, "-m", "kbroker", "user", "add", name, "--password", PASSWORDS[name],
            "--data-dir", str(data_dir)]
    for m in mechanisms:
        args += ["--mechanism", m]
    if plain_file:
        args += ["--plain-users-file", str(plain_file)]
    subprocess.run(args, check=True, capture_output=True)


ISSUER, AUDIENCE = "https://issuer.test", "kbroker-tests"


@dataclass
class OAuthKeys:
    """Signing keys of a test identity provider and their JWKS (`write_jwks`)."""

    keys: dict[str, Any] = field(default_factory=dict)  # kid -> private key

    def add(self, kid: str, kind: str = "EC") -> str:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        self.keys[kid] = ec.generate_private_key(ec.SECP256R1()) if kind == "EC" else \
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return kid

    def jwks(self, kids: list[str] | None = None) -> dict:
        import jwt

        out = []
        for kid in kids or list(self.keys):
            key = self.keys[kid]
            algo = jwt.algorithms.ECAlgorithm if hasattr(key, "curve") else jwt.algorithms.RSAAlgorithm
            jwk = json.loads(algo.to_jwk(key.public_key()))
            jwk["kid"] = kid
            out.append(jwk)
        return {"keys": out}

    def write_jwks(self, path: Path, kids: list[str] | None = None) -> Path:
        path.write_text(json.dumps(self.jwks(kids)))
        return path

    def token(self, sub: str, kid: str | None = None, *, lifetime_s: int = 3600, now_s: float | None = None,
              **claims: Any) -> str:
        import jwt

        kid = kid or next(iter(self.keys))
        key = self.keys[kid]
        now = int(time.time() if now_s is None else now_s)
        body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime_s, **claims}
        return jwt.encode(body, key, algorithm="ES256" if hasattr(key, "curve") else "RS256",
                          headers={"kid": kid})


def oauth_flags(jwks_file: Path) -> list[str]:
    """Settings of a broker that takes OAUTHBEARER tokens of `OAuthKeys` (beside PLAIN and SCRAM)."""
    return ["--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "--sasl-oauthbearer-jwks-endpoint-url", jwks_file.as_uri(),
            "--sasl-oauthbearer-expected-issuer", ISSUER, "--sasl-oauthbearer-expected-audience", AUDIENCE]


@dataclass
class SecureBroker:
    broker: BrokerProcess
    pki: Pki
    ports: dict[str, int]  # protocol -> port
    oauth: OAuthKeys

    def address(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"


def start_secure_broker(tmp: Path, *extra: str) -> SecureBroker:
    pki = make_pki(tmp / "pki")
    data = tmp / "data"
    plain = tmp / "plain-users"
    add_user(data, "bob", "SCRAM-SHA-512", "SCRAM-SHA-256")
    for name in ("alice", "admin", "reader"):
        add_user(data, name, "PLAIN", plain_file=plain)
    oauth = OAuthKeys()
    oauth.add("key-1")
    jwks = oauth.write_jwks(tmp / "pki" / "jwks.json")
    ports = {p: free_port() for p in ("PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL")}
    listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items())
    broker = BrokerProcess(
        data, "--listeners", listeners, "--ssl-keystore-location", str(pki.broker),
        "--ssl-truststore-location", str(pki.ca), "--ssl-client-auth", "required",
        "--sasl-plain-users-file", str(plain), "--group-initial-rebalance-delay-ms", "0",
        "--ssl-handshake-timeout-ms", "2000", *oauth_flags(jwks), *extra, port=ports["PLAINTEXT"], listen_flag=False)
    return SecureBroker(broker, pki, ports, oauth)
