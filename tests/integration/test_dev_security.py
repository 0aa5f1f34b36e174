"""`kbroker serve --dev-security DIR`: a secure broker in one flag. The client configs it writes work
as they are: librdkafka properties over SASL_SSL (confluent-kafka) and SSL (kcat -F), kafka-python
keyword arguments over SSL with the client certificate."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dev")
    broker = BrokerProcess(tmp / "data", "--dev-security", str(tmp / "dev"), "--group-initial-rebalance-delay-ms", "0")
    yield broker, tmp / "dev"
    broker.stop()


def properties(path) -> dict:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_writes_certificates_users_and_client_configs(dev):
    _, d = dev
    for name in ("ca.pem", "broker.pem", "client.pem", "client.key", "users.json", "plaintext.properties",
                 "ssl.properties", "sasl_ssl.properties", "kafka-python.json"):
        assert (d / name).is_file(), name
    sasl = properties(d / "sasl_ssl.properties")
    assert sasl["security.protocol"] == "SASL_SSL" and sasl["sasl.mechanism"] == "SCRAM-SHA-512"
    assert sasl["sasl.password"] == json.loads((d / "users.json").read_text())["app"]


def test_confluent_kafka_over_sasl_ssl_from_the_written_properties(dev):
    from confluent_kafka import Consumer, Producer

    _, d = dev
    conf = properties(d / "sasl_ssl.properties")
    p = Producer(conf)
    for i in range(3):
        p.produce("dev-t", f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "dev-g", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["dev-t"])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == [b"v0", b"v1", b"v2"]


def test_kafka_python_over_ssl_with_the_client_certificate(dev):
    from kafka import KafkaConsumer, KafkaProducer

    _, d = dev
    kw = json.loads((d / "kafka-python.json").read_text())["SSL"]
    p = KafkaProducer(**kw)
    p.send("dev-ssl", b"hello").get(timeout=30)
    p.close()
    c = KafkaConsumer("dev-ssl", group_id="dev-ssl-g", auto_offset_reset="earliest", **kw)
    got, deadline = [], time.monotonic() + 60
    while not got and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=1000).values():
            got.extend(r.value for r in records)
    c.close()
    assert got == [b"hello"]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make system-deps)")
def test_kcat_with_the_written_properties(dev):
    _, d = dev
    subprocess.run(["kcat", "-F", str(d / "ssl.properties"), "-P", "-t", "dev-kcat"], input=b"a\nb\n", check=True,
                   timeout=60, capture_output=True)
    out = subprocess.run(["kcat", "-F", str(d / "sasl_ssl.properties"), "-C", "-t", "dev-kcat", "-e", "-f", "%s\n"],
                         check=True, timeout=60, capture_output=True)
    assert out.stdout.decode().split() == ["a", "b"]


def test_existing_scram_users_keep_their_passwords_and_a_start_says_so(tmp_path):
    """An operator's `admin` made before --dev-security keeps its password (the flag used to give it
    users.json's random one without a word); `app`, new, gets users.json's."""
    import sys

    from kbroker.tests.integration.test_security_oauthbearer import librdkafka_outcome

    data, d = tmp_path / "data", tmp_path / "dev"
    subprocess.run([sys.executable, "-m", "kbroker", "user", "add", "admin", "--password", "operators-own",
                    "--data-dir", str(data)], check=True, capture_output=True)
    broker = BrokerProcess(data, "--dev-security", str(d))
    try:
        conf = {k: v for k, v in properties(d / "sasl_ssl.properties").items()}
        users = json.loads((d / "users.json").read_text())
        assert librdkafka_outcome({**conf, "sasl.username": "admin", "sasl.password": "operators-own"}) \
            == "authenticated"
        assert librdkafka_outcome({**conf, "sasl.username": "app", "sasl.password": users["app"]}) == "authenticated"
        kept = broker.events("dev_security_user_kept")
        assert {(e["user"], e["mechanism"]) for e in kept} == {("admin", "SCRAM-SHA-256"), ("admin", "SCRAM-SHA-512")}
        broker.restart()  # app's credential from the first start matches users.json: only admin is named again
        assert {e["user"] for e in broker.events("dev_security_user_kept", start=2)} == {"admin"}
    finally:
        broker.stop()
