"""OAUTHBEARER on real brokers (issue 38, item 1): the issue's forged token
(`{"alg":"none"}.{"sub":"admin","exp":...}.`) becomes nobody on a default SASL broker and on a
`--dev-security` one; signed tokens are checked against a JWKS from a file or over HTTPS (refreshed
for a key id it lacks); unsigned ones pass only under `--dev-unsecured-oauthbearer`, which warns at
every start."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kbroker.broker.security.dev_security import _pem_cert, _pem_key, issue, make_ca
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.sasl_wire import oauth_attempt
from kbroker.tests.integration.security_setup import AUDIENCE, ISSUER, OAuthKeys, oauth_flags

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def issues_token(sub: str = "admin") -> str:
    """The issue's token, byte for byte in shape: an unsecured JWS naming a super user."""
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return enc({"alg": "none"}) + "." + enc({"sub": sub, "exp": int(time.time()) + 3600}) + "."


def sasl_broker(tmp_path, *extra: str, env: dict | None = None) -> tuple[BrokerProcess, str]:
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", "--listeners",
                           f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                           "--authorizer-class-name", STANDARD_AUTHORIZER, "--super-users", "User:admin",
                           *extra, port=plain, listen_flag=False, env=env)
    return broker, f"127.0.0.1:{sasl}"


def test_the_issues_forged_token_on_a_default_sasl_broker(tmp_path):
    broker, sasl = sasl_broker(tmp_path)
    try:
        outcome, wire = oauth_attempt(sasl, issues_token())
        wire.close()
        assert outcome == "unsupported mechanism"  # not offered unless named, with a key set
    finally:
        broker.stop()


def test_forged_and_foreign_tokens_refused_signed_one_accepted_with_a_jwks_file(tmp_path):
    keys = OAuthKeys()
    keys.add("key-1")
    jwks = keys.write_jwks(tmp_path / "jwks.json")
    broker, sasl = sasl_broker(tmp_path, *oauth_flags(jwks))
    try:
        stranger = OAuthKeys()
        stranger.add("key-1")  # the same key id, another key
        for token in (issues_token(), stranger.token("admin"), keys.token("admin", aud="another-cluster"),
                      keys.token("admin", iss="https://evil.example"), keys.token("admin", now_s=time.time() - 7200)):
            outcome, wire = oauth_attempt(sasl, token)
            assert outcome == "refused" and wire.closed_by_peer(), token
        outcome, wire = oauth_attempt(sasl, keys.token("admin"))
        assert outcome == "authenticated"
        from kbroker.protocol.messages.metadata_request import MetadataRequest

        assert wire.call(3, 12, MetadataRequest(topics=None)).brokers  # served as User:admin
        wire.close()
        failures = broker.events("authentication_failed")
        assert sum(e.get("mechanism") == "OAUTHBEARER" for e in failures) == 5
        assert any("alg" in e.get("error", "") for e in failures)  # why the forged one was refused
    finally:
        broker.stop()


def librdkafka_outcome(conf: dict, timeout: float = 30.0) -> str:
    """"authenticated" once librdkafka reads metadata with `conf`, or the name of its first error."""
    from confluent_kafka import KafkaException, Producer

    errors: list = []
    p = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 500, "log_level": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.poll(0)  # serves error_cb
        if errors:
            return errors[0].name()
        try:
            p.list_topics(timeout=2)
            return "authenticated"
        except KafkaException:
            pass
    return "timed out"


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dev-oauth")
    broker = BrokerProcess(tmp / "data", "--dev-security", str(tmp / "dev"))
    yield broker, tmp / "dev"
    broker.stop()


def test_dev_security_refuses_the_forged_token_and_accepts_the_tokens_it_signed(dev):
    broker, d = dev
    props = dict(line.split("=", 1) for line in (d / "sasl_ssl.properties").read_text().splitlines())
    base = {"bootstrap.servers": props["bootstrap.servers"], "security.protocol": "SASL_SSL",
            "ssl.ca.location": props["ssl.ca.location"], "sasl.mechanism": "OAUTHBEARER"}
    # librdkafka's own unsecured token: {"alg":"none"}.{"sub":"admin",...}.
    forged = {**base, "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=admin"}
    assert librdkafka_outcome(forged) == "_AUTHENTICATION"
    token = (d / "app.jwt").read_text()
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["alg"] == "ES256"
    assert librdkafka_outcome({**base, "oauth_cb": lambda _cfg: (token, time.time() + 3600)}) == "authenticated"
    assert (d / "admin.jwt").is_file() and (d / "oauth.key").stat().st_mode & 0o077 == 0
    started = broker.events("dev_security_created")[-1]
    assert started["oauthbearer_tokens"] == ["admin.jwt", "app.jwt"]


def test_unsigned_tokens_only_under_the_dev_setting_which_warns_at_every_start(tmp_path):
    broker, sasl = sasl_broker(tmp_path, "--sasl-enabled-mechanisms", "OAUTHBEARER", "--dev-unsecured-oauthbearer")
    try:
        outcome, wire = oauth_attempt(sasl, issues_token())
        wire.close()
        assert outcome == "authenticated"
        if shutil.which("kcat"):  # kcat 1.7 sends only unsecured tokens: it works here, and only here
            args = ["kcat", "-b", sasl, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
                    "-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=admin"]
            subprocess.run(args + ["-P", "-t", "unsigned"], input=b"a\n", check=True, timeout=60, capture_output=True)
            out = subprocess.run(args + ["-C", "-t", "unsigned", "-e", "-f", "%s\n"], check=True, timeout=60,
                                 capture_output=True)
            assert out.stdout.split() == [b"a"]
        broker.restart()
        for start in (1, 2):
            warned = [line for line in broker.log_lines(start) if line.get("event") == "oauthbearer_unsecured_tokens_accepted"]
            assert len(warned) == 1 and warned[0]["level"] == "warning", start
    finally:
        broker.stop()


class _Jwks(BaseHTTPRequestHandler):
    body = b""
    fetches = 0

    def do_GET(self):  # noqa: N802
        type(self).fetches += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_jwks_over_https_is_fetched_and_refetched_for_a_key_it_lacks(tmp_path):
    ca_key, ca = make_ca("idp CA")
    key, cert = issue(ca_key, ca, "idp", ["127.0.0.1"])
    (tmp_path / "ca.pem").write_bytes(_pem_cert(ca))
    (tmp_path / "idp.pem").write_bytes(_pem_cert(cert) + _pem_key(key))
    keys = OAuthKeys()
    keys.add("key-1")
    handler = type("Jwks", (_Jwks,), {"body": json.dumps(keys.jwks()).encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "idp.pem")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}/jwks.json"
    broker, sasl = sasl_broker(
        tmp_path, "--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-endpoint-url", url,
        "--sasl-oauthbearer-expected-issuer", ISSUER, "--sasl-oauthbearer-expected-audience", AUDIENCE,
        env={"SSL_CERT_FILE": str(tmp_path / "ca.pem")})  # the broker trusts the identity provider's CA
    try:
        deadline = time.monotonic() + 30
        while not broker.events("oauth_jwks_loaded"):
            assert time.monotonic() < deadline, broker.dump_log()
            time.sleep(0.05)
        assert oauth_attempt(sasl, keys.token("admin"))[0] == "authenticated"
        keys.add("key-2")  # the provider rotates: its key set now has both
        handler.body = json.dumps(keys.jwks()).encode()
        fetched = handler.fetches
        assert oauth_attempt(sasl, keys.token("admin", "key-2"))[0] == "refused"  # unknown yet: refetch asked
        while oauth_attempt(sasl, keys.token("admin", "key-2"))[0] != "authenticated":
            assert time.monotonic() < deadline, broker.dump_log()
            time.sleep(0.1)
        assert handler.fetches == fetched + 1
        assert broker.events("oauth_jwks_loaded")[-1]["key_ids"] == ["key-1", "key-2"]
    finally:
        broker.stop()
        server.shutdown()
