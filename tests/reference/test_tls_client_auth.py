"""ssl.client.auth=requested, asked of Kafka 4.4 itself: its SSL engine (JSSE with `want` client auth) takes
a client without a certificate and one with a trusted certificate, and refuses the handshake of a client
whose certificate comes from a CA it does not trust, in TLS 1.2 and 1.3. kbroker does the same.

(The alert differs: JSSE sends certificate_unknown, OpenSSL, under Python's ssl module, unknown_ca; both
are a failed TLS authentication to the client, and Python's ssl has no verify callback to choose it.)"""

from __future__ import annotations

import socket
import ssl
import struct

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.security_setup import make_pki
from kbroker.tests.reference.kafka import KafkaProcess, kafka_libs


def _outcomes(port: int, pki) -> dict[tuple[str, str], str]:
    """Per (client certificate, TLS version): "served" when the handshake succeeds and ApiVersions v0
    is answered, else "refused"."""
    out = {}
    for name, cert, key in (("none", None, None), ("trusted", pki.client_cert, pki.client_key),
                            ("unknown CA", pki.rogue_cert, pki.rogue_key)):
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = ssl.create_default_context(cafile=str(pki.ca))
            ctx.check_hostname = False
            ctx.minimum_version = ctx.maximum_version = version
            if cert is not None:
                ctx.load_cert_chain(str(cert), str(key))
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=15) as raw, \
                        ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                    frame = struct.pack(">hhih", 18, 0, 1, 1) + b"t"
                    tls.sendall(struct.pack(">i", len(frame)) + frame)
                    out[(name, version.name)] = "served" if len(tls.recv(4)) == 4 else "refused"
            except (ssl.SSLError, ConnectionError):
                out[(name, version.name)] = "refused"
    return out


def test_requested_client_auth_refuses_an_unknown_ca_as_kafka_does(tmp_path):
    if kafka_libs() is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    pki = make_pki(tmp_path / "pki")
    kafka = KafkaProcess(tmp_path / "kafka", start=False)
    kafka_ssl = kafka.add_listener("SSL", **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "requested",
    })
    kafka.start()
    try:
        theirs = _outcomes(kafka_ssl, pki)
    finally:
        kafka.stop()
    ports = {"PLAINTEXT": free_port(), "SSL": free_port()}
    with BrokerProcess(tmp_path / "data", "--listeners", ",".join(f"{p}://127.0.0.1:{n}" for p, n in ports.items()),
                       "--ssl-keystore-location", str(pki.broker), "--ssl-truststore-location", str(pki.ca),
                       "--ssl-client-auth", "requested", port=ports["PLAINTEXT"], listen_flag=False):
        ours = _outcomes(ports["SSL"], pki)
    assert ours == theirs
    assert {k: v for k, v in theirs.items() if v == "refused"} == {
        ("unknown CA", "TLSv1_2"): "refused", ("unknown CA", "TLSv1_3"): "refused"}
