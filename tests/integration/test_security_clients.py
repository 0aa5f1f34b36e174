"""Real clients over TLS and SASL: confluent-kafka, kafka-python, aiokafka and kcat each produce,
consume in a group and commit over SASL_SSL/SCRAM-SHA-512, SASL_PLAINTEXT/PLAIN, SSL with a client
certificate, and OAUTHBEARER with a signed token; a wrong password, an expired token and an
untrusted certificate each fail with the client's authentication error, quickly, not by timing out."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest

from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker

N = 5
CASES = ("scram_sasl_ssl", "plain_sasl_plaintext", "ssl_client_cert", "oauthbearer")


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("secure"))
    yield sb
    sb.broker.stop()


def librdkafka_conf(sb, case: str) -> dict:
    if case == "scram_sasl_ssl":
        return {"bootstrap.servers": sb.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": PASSWORDS["bob"],
                "ssl.ca.location": str(sb.pki.ca)}
    if case == "plain_sasl_plaintext":
        return {"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORDS["alice"]}
    if case == "ssl_client_cert":
        return {"bootstrap.servers": sb.address("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(sb.pki.ca),
                "ssl.certificate.location": str(sb.pki.client_cert), "ssl.key.location": str(sb.pki.client_key)}
    token = sb.oauth.token("carol")
    return {"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _config: (token, time.time() + 3600)}


def kafka_python_conf(sb, case: str) -> dict:
    if case == "scram_sasl_ssl":
        return {"bootstrap_servers": sb.address("SASL_SSL"), "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
                "sasl_plain_password": PASSWORDS["bob"], "ssl_cafile": str(sb.pki.ca)}
    if case == "plain_sasl_plaintext":
        return {"bootstrap_servers": sb.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": PASSWORDS["alice"]}
    if case == "ssl_client_cert":
        return {"bootstrap_servers": sb.address("SSL"), "security_protocol": "SSL", "ssl_cafile": str(sb.pki.ca),
                "ssl_certfile": str(sb.pki.client_cert), "ssl_keyfile": str(sb.pki.client_key)}
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Signed(AbstractTokenProvider):
        def token(self):
            return sb.oauth.token("carol")

    return {"bootstrap_servers": sb.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Signed()}


def aiokafka_conf(sb, case: str) -> dict:
    from aiokafka.helpers import create_ssl_context

    if case == "scram_sasl_ssl":
        return {"bootstrap_servers": sb.address("SASL_SSL"), "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
                "sasl_plain_password": PASSWORDS["bob"], "ssl_context": create_ssl_context(cafile=str(sb.pki.ca))}
    if case == "plain_sasl_plaintext":
        return {"bootstrap_servers": sb.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": PASSWORDS["alice"]}
    if case == "ssl_client_cert":
        return {"bootstrap_servers": sb.address("SSL"), "security_protocol": "SSL",
                "ssl_context": create_ssl_context(cafile=str(sb.pki.ca), certfile=str(sb.pki.client_cert),
                                                  keyfile=str(sb.pki.client_key))}
    from aiokafka.abc import AbstractTokenProvider

    class Signed(AbstractTokenProvider):
        async def token(self):
            return sb.oauth.token("carol")

    return {"bootstrap_servers": sb.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Signed()}


def committed_offset(sb, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": sb.broker.bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def names(case: str, client: str) -> tuple[str, str]:
    tag = f"{client}-{case}-{uuid.uuid4().hex[:6]}"
    return "t-" + tag, "g-" + tag


@pytest.mark.parametrize("case", CASES)
def test_confluent_kafka(secure, case):
    from confluent_kafka import Consumer, Producer

    topic, group = names(case, "ck")
    conf = librdkafka_conf(secure, case)
    p = Producer(conf)
    for i in range(N):
        p.produce(topic, f"m{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == [f"m{i}".encode() for i in range(N)]
    assert committed_offset(secure, group, topic) == N


@pytest.mark.parametrize("case", CASES)
def test_kafka_python(secure, case):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic, group = names(case, "kp")
    conf = kafka_python_conf(secure, case)
    p = KafkaProducer(**conf)
    for i in range(N):
        p.send(topic, f"m{i}".encode()).get(timeout=30)
    p.close()
    c = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **conf)
    got, deadline = [], time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=1000).values():
            got.extend(r.value for r in records)
    c.commit()
    assert c.committed(TopicPartition(topic, 0)) == N
    c.close()
    assert got == [f"m{i}".encode() for i in range(N)]


@pytest.mark.parametrize("case", CASES)
def test_aiokafka(secure, case):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, group = names(case, "aio")

    async def run():
        p = AIOKafkaProducer(**aiokafka_conf(secure, case))
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, f"m{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             **aiokafka_conf(secure, case))
        await c.start()
        got = []
        try:
            async with asyncio.timeout(60):
                while len(got) < N:
                    for records in (await c.getmany(timeout_ms=1000)).values():
                        got.extend(r.value for r in records)
            await c.commit()
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == [f"m{i}".encode() for i in range(N)]
    assert committed_offset(secure, group, topic) == N


# kcat 1.7 (librdkafka 2.0.2, built without OIDC) can send only unsecured OAUTHBEARER tokens, which the
# broker refuses unless --dev-unsecured-oauthbearer (test_security_oauthbearer.py runs kcat with that)
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make system-deps)")
@pytest.mark.parametrize("case", [c for c in CASES if c != "oauthbearer"])
def test_kcat(secure, case):
    topic, group = names(case, "kcat")
    conf = librdkafka_conf(secure, case)
    args = ["kcat", "-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    lines = "".join(f"m{i}\n" for i in range(N))
    subprocess.run(args + ["-P", "-t", topic], input=lines.encode(), check=True, timeout=60, capture_output=True)
    out = subprocess.run(args + ["-X", "auto.offset.reset=earliest", "-G", group, "-c", str(N), "-f", "%s\n", topic],
                         check=True, timeout=60, capture_output=True)
    assert out.stdout.decode().split() == [f"m{i}" for i in range(N)]
    assert committed_offset(secure, group, topic) == N


def auth_error(conf: dict) -> tuple[object, float]:
    """The first error librdkafka reports for this config, and how long it took."""
    from confluent_kafka import Producer

    errors = []
    p = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    start = time.monotonic()
    while not errors and time.monotonic() - start < 30:
        p.poll(0.2)
    return (errors[0] if errors else None), time.monotonic() - start


def test_wrong_password_is_an_authentication_error(secure):
    from confluent_kafka import KafkaError

    err, took = auth_error({**librdkafka_conf(secure, "scram_sasl_ssl"), "sasl.password": "wrong"})
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in err.str()
    assert took < 10
    events = secure.broker.events("authentication_failed")
    assert any(e.get("principal") == "bob" and e.get("mechanism") == "SCRAM-SHA-512" for e in events)
    assert not any("wrong" in str(e) for e in events)  # never the secret


def test_expired_token_is_an_authentication_error(secure):
    from confluent_kafka import KafkaError

    conf = librdkafka_conf(secure, "oauthbearer")
    expired = secure.oauth.token("carol", lifetime_s=60, now_s=time.time() - 3600)
    # librdkafka refuses to send a token it knows expired; so the token claims a lifetime the broker checks
    conf["oauth_cb"] = lambda _cfg: (expired, time.time() + 3600)
    err, took = auth_error(conf)
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert took < 10


def test_untrusted_client_certificate_fails_the_handshake(secure):
    from confluent_kafka import KafkaError

    conf = {**librdkafka_conf(secure, "ssl_client_cert"), "ssl.certificate.location": str(secure.pki.rogue_cert),
            "ssl.key.location": str(secure.pki.rogue_key)}
    err, took = auth_error(conf)
    # the broker's TLS alert reaches the client (with TLS 1.3 librdkafka reads it after its own side of the
    # handshake, so it reports it on receive, as it does against a JVM broker)
    assert err is not None and err.code() in (KafkaError._SSL, KafkaError._TRANSPORT), err
    assert "alert unknown ca" in err.str()
    assert took < 10
    deadline = time.monotonic() + 10  # the broker logs once the client has hung up
    while not any("CERTIFICATE_VERIFY_FAILED" in e.get("error", "")
                  for e in secure.broker.events("tls_handshake_failed")):
        assert time.monotonic() < deadline, secure.broker.events("tls_handshake_failed")
        time.sleep(0.1)


def test_untrusted_broker_certificate_fails_the_handshake(secure, tmp_path):
    from confluent_kafka import KafkaError

    from kbroker.broker.security.dev_security import _pem_cert, make_ca

    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(_pem_cert(make_ca("another CA")[1]))
    err, took = auth_error({**librdkafka_conf(secure, "scram_sasl_ssl"), "ssl.ca.location": str(other_ca)})
    # librdkafka files its own verification failure under _SSL or _TRANSPORT depending on timing
    assert err is not None and err.code() in (KafkaError._SSL, KafkaError._TRANSPORT), err
    assert "certificate verify failed" in err.str()
    assert took < 10


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make system-deps)")
def test_kcat_wrong_password_is_an_authentication_error(secure):
    conf = {**librdkafka_conf(secure, "scram_sasl_ssl"), "sasl.password": "wrong"}
    args = ["kcat", "-b", conf.pop("bootstrap.servers"), "-m", "5"]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    out = subprocess.run(args + ["-L"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "SASL authentication error: Authentication failed during authentication due to invalid credentials" \
        in out.stderr


def test_aiokafka_wrong_password_is_an_authentication_error(secure, caplog):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run():
        p = AIOKafkaProducer(**{**aiokafka_conf(secure, "scram_sasl_ssl"), "sasl_plain_password": "wrong"})
        try:
            with pytest.raises(KafkaConnectionError):
                await p.start()
        finally:
            await p.stop()

    start = time.monotonic()
    asyncio.run(run())
    assert time.monotonic() - start < 10
    assert "SaslAuthenticationFailed" in caplog.text
