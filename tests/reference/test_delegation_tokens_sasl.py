"""The delegation token APIs on an authenticated connection, asked of Kafka 4.4 itself. With Kafka's
defaults (no delegation.token.secret.key) tokens are off: a SASL connection may ask for them, and every
request is answered DELEGATION_TOKEN_AUTH_DISABLED by its controller, with the times at 0 (on PLAINTEXT the
broker itself refuses, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED with the times at -1, which the differential wire
level compares). kbroker answers the same, field by field."""

from __future__ import annotations

import dataclasses

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.sasl_wire import plain_login
from kbroker.tests.integration.security_setup import PASSWORDS, add_user
from kbroker.tests.reference.differential.craft import (
    CREATE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
    make,
)
from kbroker.tests.reference.kafka import KafkaProcess, kafka_libs

REQUESTS = [
    (CREATE_DELEGATION_TOKEN, 3, make(CREATE_DELEGATION_TOKEN, renewers=[], max_lifetime_ms=-1)),
    (CREATE_DELEGATION_TOKEN, 3, make(CREATE_DELEGATION_TOKEN, owner_principal_type="User",
                                      owner_principal_name="bob", renewers=[], max_lifetime_ms=-1)),
    (CREATE_DELEGATION_TOKEN, 1, make(CREATE_DELEGATION_TOKEN, renewers=[{"principal_type": "User",
                                                                          "principal_name": "bob"}],
                                      max_lifetime_ms=60000)),
    (RENEW_DELEGATION_TOKEN, 2, make(RENEW_DELEGATION_TOKEN, hmac=b"hmac", renew_period_ms=1000)),
    (EXPIRE_DELEGATION_TOKEN, 2, make(EXPIRE_DELEGATION_TOKEN, hmac=b"hmac", expiry_time_period_ms=-1)),
    (DESCRIBE_DELEGATION_TOKEN, 3, make(DESCRIBE_DELEGATION_TOKEN, owners=None)),
    (DESCRIBE_DELEGATION_TOKEN, 1, make(DESCRIBE_DELEGATION_TOKEN, owners=[{"principal_type": "User",
                                                                            "principal_name": "alice"}])),
]


def _answers(address: str) -> list[dict]:
    wire = plain_login(address, "alice", PASSWORDS["alice"])
    try:
        out = []
        for api_key, version, request in REQUESTS:
            answer = dataclasses.asdict(wire.call(api_key, version, request))
            answer.pop("throttle_time_ms", None)
            answer.pop("unknown_tagged_fields", None)
            out.append({"api": api_key, "version": version, **answer})
        return out
    finally:
        wire.close()


def test_token_requests_on_sasl_are_answered_as_kafka_answers_them(tmp_path):
    if kafka_libs() is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    kafka = KafkaProcess(tmp_path / "kafka", start=False)
    kafka_sasl = kafka.add_listener("SASL_PLAINTEXT", **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORDS["alice"]}";',
    })
    kafka.start()
    try:
        theirs = _answers(f"127.0.0.1:{kafka_sasl}")
    finally:
        kafka.stop()
    plain = tmp_path / "plain-users"
    add_user(tmp_path / "data", "alice", "PLAIN", plain_file=plain)
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    with BrokerProcess(tmp_path / "data", "--listeners", ",".join(f"{p}://127.0.0.1:{n}" for p, n in ports.items()),
                       "--sasl-plain-users-file", str(plain), port=ports["PLAINTEXT"], listen_flag=False):
        ours = _answers(f"127.0.0.1:{ports['SASL_PLAINTEXT']}")
    assert ours == theirs
    assert {a["error_code"] for a in theirs} == {61}  # DELEGATION_TOKEN_AUTH_DISABLED
    assert theirs[0]["issue_timestamp_ms"] == 0  # not the broker's -1 of a refusal on PLAINTEXT
