"""`kbroker serve --dev-security DIR`: a production-shaped secure broker for tests, in one flag.

At start-up this makes, in DIR: a throwaway CA (`ca.pem`), a broker certificate for localhost,
127.0.0.1 and the advertised host (`broker.pem`, certificate and key: the keystore), a client
certificate (`client.pem`, `client.key`, subject CN=dev-client), and SCRAM-SHA-256/512 users `admin`
and `app` with random passwords (kept in `users.json`, reused on the next start). It serves SSL
(client certificates requested) and SASL_SSL listeners beside PLAINTEXT (on the ports after the first
listener's, unless listeners of those protocols are configured) and, once they are bound, writes ready-to-use
client configs: `<protocol>.properties` for librdkafka (confluent-kafka, kcat -F) and
`kafka-python.json` with kafka-python/aiokafka keyword arguments per protocol.
Nothing here is for production: the CA key sits in DIR beside everything else.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import os
import secrets
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from .credentials import CredentialStore, ScramCredential

log = structlog.get_logger("kbroker.security")
USERS = ("admin", "app")
CLIENT_SUBJECT = "dev-client"
OAUTH_ISSUER = "kbroker-dev-security"
OAUTH_AUDIENCE = "kbroker"
TOKEN_LIFETIME_S = 24 * 3600


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def make_ca(common_name: str = "kbroker dev CA"):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def issue(ca_key, ca_cert, common_name: str, hosts: Sequence[str] = (), client: bool = False,
          organization: str | None = None):
    """A certificate signed by the CA: for a server (SANs for `hosts`) or a client."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = _key()
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                     else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    if hosts:
        sans: list[x509.GeneralName] = []
        for h in dict.fromkeys(hosts):
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        os.chmod(path, 0o600)


def _bindable(host: str, port: int) -> bool:
    """Whether the port is free now (the next port is taken otherwise): a port another program holds
    would make --dev-security a start-up error for no reason of the user's."""
    if port > 65535:
        raise ValueError("--dev-security: no free port after the first listener's")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def configure(config: Any) -> Any:
    """The settings `--dev-security DIR` serves with: an SSL and a SASL_SSL listener added unless some
    listener already uses the protocol (on the free ports after the first listener's, names SSL and
    SASL_SSL, or DEV_SSL/DEV_SASL_SSL when those are taken), the keystore and truststore in DIR, and
    client certificates requested on SSL listeners. Idempotent; the config unchanged without the flag."""
    if not config.dev_security:
        return config
    from ..listeners import parse_protocol_map

    d = Path(config.dev_security).resolve()
    current = config.listener_set()
    protocols = parse_protocol_map(config.listener_security_protocol_map, "listener.security.protocol.map")
    bind = [e.url() for e in current.bind]
    advertised = [current.advertised[e.name].url() for e in current.bind]
    used_ports = {e.port for e in current.bind}
    first = current.bind[0]
    adv_first = current.advertised[first.name]
    port = first.port
    for proto in ("SSL", "SASL_SSL"):
        if any(e.security_protocol == proto for e in current.bind):
            continue
        name = proto if proto not in protocols or protocols[proto] == proto else "DEV_" + proto
        if any(e.name == name for e in current.bind):
            name = "DEV_" + proto
        protocols[name] = proto
        while port in used_ports or not _bindable(first.host, port):
            port += 1
        used_ports.add(port)
        fmt = lambda host: f"[{host}]" if ":" in host else host  # noqa: E731
        bind.append(f"{name}://{fmt(first.host)}:{port}")
        advertised.append(f"{name}://{fmt(adv_first.host)}:{port}")
    changes: dict[str, Any] = {
        "listeners": ",".join(bind), "advertised_listeners": ",".join(advertised),
        "listener_security_protocol_map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
        "advertised_listener": "",
    }
    if not config.sasl_oauthbearer_jwks_endpoint_url and not config.dev_unsecured_oauthbearer:
        # OAUTHBEARER with tokens signed by DIR's own key (`DevSecurity.create` writes it and the tokens)
        changes["sasl_oauthbearer_jwks_endpoint_url"] = (d / "jwks.json").as_uri()
        changes["sasl_oauthbearer_expected_issuer"] = config.sasl_oauthbearer_expected_issuer or OAUTH_ISSUER
        changes["sasl_oauthbearer_expected_audience"] = config.sasl_oauthbearer_expected_audience or OAUTH_AUDIENCE
        default_mechanisms = str({f.name: f.default for f in dataclasses.fields(config)}["sasl_enabled_mechanisms"])
        if config.sasl_enabled_mechanisms == default_mechanisms:
            changes["sasl_enabled_mechanisms"] = default_mechanisms + ",OAUTHBEARER"
    if not config.ssl_keystore_location:
        changes["ssl_keystore_location"] = str(d / "broker.pem")
        changes["ssl_truststore_location"] = str(d / "ca.pem")
        if config.ssl_client_auth == "none":
            changes["ssl_client_auth"] = "requested"
    return dataclasses.replace(config, **changes)


@dataclasses.dataclass
class DevSecurity:
    directory: Path
    config: Any
    passwords: dict[str, str]

    @classmethod
    def create(cls, config: Any) -> "DevSecurity":
        """Make the CA, certificates and users in DIR (`config` is already `configure()`d)."""
        d = Path(config.dev_security).resolve()
        d.mkdir(parents=True, exist_ok=True)
        listeners = config.listener_set()
        hosts = ["localhost", "127.0.0.1", "::1"] + [e.host for e in listeners.advertised.values() if e.host]
        ca_key, ca_cert = make_ca()
        b_key, b_cert = issue(ca_key, ca_cert, "kbroker", hosts)
        c_key, c_cert = issue(ca_key, ca_cert, CLIENT_SUBJECT, client=True)
        _write(d / "ca.pem", _pem_cert(ca_cert))
        _write(d / "ca.key", _pem_key(ca_key), private=True)
        _write(d / "broker.pem", _pem_cert(b_cert) + _pem_key(b_key), private=True)
        _write(d / "client.pem", _pem_cert(c_cert))
        _write(d / "client.key", _pem_key(c_key), private=True)
        users_file = d / "users.json"
        passwords = json.loads(users_file.read_text()) if users_file.exists() else {}
        for user in USERS:
            passwords.setdefault(user, secrets.token_urlsafe(18))
        _write(users_file, json.dumps(passwords, indent=1).encode(), private=True)
        tokens = _oauth_tokens(d) if config.sasl_oauthbearer_jwks_endpoint_url == (d / "jwks.json").as_uri() else []
        log.info("dev_security_created", directory=str(d), users=list(USERS),
                 client_principal="User:CN=" + CLIENT_SUBJECT, oauthbearer_tokens=tokens or None)
        return cls(d, config, passwords)

    def add_users(self, credentials: CredentialStore) -> None:
        """SCRAM users `admin` and `app` with DIR/users.json's passwords, unless the data directory has
        credentials of theirs already: those are kept (the operator's, or ours from an earlier start),
        and a start says which ones DIR/users.json's password does not open."""
        upserts = []
        for user, password in self.passwords.items():
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                existing = credentials.scram(user, mech)
                if existing is None:
                    upserts.append((user, mech, ScramCredential.from_password(mech, password)))
                elif not _opens(existing, mech, password):
                    log.warning("dev_security_user_kept", user=user, mechanism=mech,
                                detail=f"the data directory's {mech} credential of {user} is kept; the password "
                                       f"in {self.directory / 'users.json'} (and the client configs) does not "
                                       f"match it")
        if upserts:
            credentials.apply_scram(upserts, [])

    def write_client_configs(self, endpoints: list[tuple[str, str]]) -> None:
        d, user, password = self.directory, "app", self.passwords["app"]
        python: dict[str, dict] = {}
        for protocol, address in endpoints:
            props = {"bootstrap.servers": address, "security.protocol": protocol}
            kw: dict[str, Any] = {"bootstrap_servers": address, "security_protocol": protocol}
            if protocol in ("SSL", "SASL_SSL"):
                props["ssl.ca.location"] = str(d / "ca.pem")
                kw["ssl_cafile"] = str(d / "ca.pem")
            if protocol == "SSL":
                props["ssl.certificate.location"] = str(d / "client.pem")
                props["ssl.key.location"] = str(d / "client.key")
                kw["ssl_certfile"], kw["ssl_keyfile"] = str(d / "client.pem"), str(d / "client.key")
            if protocol.startswith("SASL_"):
                props.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password})
                kw.update({"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
                           "sasl_plain_password": password})
            text = "".join(f"{k}={v}\n" for k, v in props.items())
            _write(d / f"{protocol.lower()}.properties", text.encode(), private=True)
            python[protocol] = kw
        _write(d / "kafka-python.json", json.dumps(python, indent=1).encode(), private=True)
        log.info("dev_security_client_configs", directory=str(d), protocols=[p for p, _ in endpoints])


def _opens(cred: ScramCredential, mechanism: str, password: str) -> bool:
    """Whether `password` is the one the stored credential was made from."""
    import hmac

    again = ScramCredential.from_password(mechanism, password, cred.iterations, salt=cred.salt)
    return hmac.compare_digest(again.stored_key, cred.stored_key)


def _oauth_tokens(d: Path) -> list[str]:
    """DIR's OAUTHBEARER signing key (`oauth.key`, kept across starts), its key set (`jwks.json`, which
    the broker verifies tokens with) and a token per user (`admin.jwt`, `app.jwt`, issued anew at each
    start for TOKEN_LIFETIME_S). The files written, by name."""
    import hashlib
    import time

    import jwt
    from cryptography.hazmat.primitives import serialization

    from cryptography.hazmat.primitives.asymmetric import ec

    key_file = d / "oauth.key"
    if key_file.exists():
        loaded = serialization.load_pem_private_key(key_file.read_bytes(), None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_file} is not the EC key --dev-security made")
        key = loaded
    else:
        key = _key()
        _write(key_file, _pem_key(key), private=True)
    public_der = key.public_key().public_bytes(serialization.Encoding.DER,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    kid = hashlib.sha256(public_der).hexdigest()[:16]
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "alg": "ES256", "use": "sig"})
    _write(d / "jwks.json", json.dumps({"keys": [jwk]}, indent=1).encode())
    now = int(time.time())
    written = []
    for user in USERS:
        claims = {"sub": user, "iss": OAUTH_ISSUER, "aud": OAUTH_AUDIENCE, "iat": now, "nbf": now,
                  "exp": now + TOKEN_LIFETIME_S}
        _write(d / f"{user}.jwt", jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid}).encode(),
               private=True)
        written.append(f"{user}.jwt")
    return written
