"""Re-authentication (KIP-368, connections.max.reauth.ms): librdkafka re-authenticates on its open
connections and keeps producing; a client that does not is disconnected at its next request."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker
from kbroker.tests.integration.wire import Wire

REAUTH_MS = 2000


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("reauth"), "--connections-max-reauth-ms", str(REAUTH_MS))
    yield sb
    sb.broker.stop()


def test_the_broker_describes_its_reauthentication_time(secure):
    """librdkafka's 0142 learns whether (and how often) to re-authenticate from the broker's
    connections.max.reauth.ms in DescribeConfigs, and skips the test when no broker reports it:
    reported here as set (STATIC_BROKER_CONFIG), as Kafka reports a server.properties value."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    admin = AdminClient({"bootstrap.servers": secure.broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entry = admin.describe_configs([res])[res].result(30)["connections.max.reauth.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == (str(REAUTH_MS), ConfigSource.STATIC_BROKER_CONFIG.value, True)


@pytest.mark.parametrize("protocol,mechanism,user", [("SASL_SSL", "SCRAM-SHA-512", "bob"),
                                                     ("SASL_PLAINTEXT", "PLAIN", "alice")])
def test_librdkafka_reauthenticates_and_keeps_producing(secure, protocol, mechanism, user):
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({"bootstrap.servers": secure.address(protocol), "security.protocol": protocol,
                  "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": PASSWORDS[user],
                  "ssl.ca.location": str(secure.pki.ca), "error_cb": errors.append})
    topic = f"reauth-{protocol.lower()}"
    delivered: list = []
    end = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < end:  # keep the connection busy across several session lifetimes
        p.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        p.poll(0.1)
    assert p.flush(30) == 0
    assert errors == [] and delivered and all(err is None for err in delivered)
    reauths = [e for e in secure.broker.events("sasl_authenticated")
               if e.get("reauthentication") and e.get("principal") == f"User:{user}"]
    assert reauths, "no re-authentication was logged"
    assert not [e for e in secure.broker.events("request_rejected") if "expired" in e.get("error", "")]


def test_a_client_that_does_not_reauthenticate_is_disconnected(secure):
    w = Wire(secure.address("SASL_PLAINTEXT"))
    assert w.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    auth = w.call(36, 1, SaslAuthenticateRequest(auth_bytes=f"\0alice\0{PASSWORDS['alice']}".encode()))
    assert auth.error_code == 0 and 0 < auth.session_lifetime_ms <= REAUTH_MS
    assert w.call(3, 12, MetadataRequest(topics=None)).brokers
    time.sleep(auth.session_lifetime_ms / 1000 + 0.2)
    w.send(3, 12, MetadataRequest(topics=None))
    assert w.closed_by_peer()
