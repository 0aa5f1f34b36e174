"""Certificate principals (Kafka's ssl.principal.mapping.rules) and the --dev-security settings."""

from __future__ import annotations

import dataclasses

import pytest

from kbroker.broker.config import BrokerConfig
from kbroker.broker.security.dev_security import _pem_cert, configure, issue, make_ca
from kbroker.broker.security.tls import PrincipalMapper, subject_dn


def test_subject_is_rfc2253_most_specific_first():
    from cryptography.hazmat.primitives.serialization import Encoding

    ca_key, ca = make_ca()
    _, cert = issue(ca_key, ca, "alice", client=True, organization="Example")
    # issued as (CN, O); RFC 2253, as Java's X500Principal.getName() gives it, lists the last RDN first
    assert subject_dn(cert.public_bytes(Encoding.DER)) == "O=Example,CN=alice"
    assert _pem_cert(cert).startswith(b"-----BEGIN CERTIFICATE-----")


@pytest.mark.parametrize("rules,dn,name", [
    ("DEFAULT", "CN=alice,O=Example", "CN=alice,O=Example"),
    ("RULE:^CN=(.*?),O=(.*)$/$1@$2/,DEFAULT", "CN=alice,O=Example", "alice@Example"),
    ("RULE:^CN=(.*?),O=(.*)$/$1/L,DEFAULT", "CN=Alice,O=Example", "alice"),
    ("RULE:^CN=(.*?),O=(.*)$/$1/U", "CN=Alice,O=Example", "ALICE"),
    ("RULE:^CN=([^,]*).*$/$1/, DEFAULT", "OU=x", "OU=x"),  # the rule does not match: DEFAULT
])
def test_mapping_rules(rules, dn, name):
    assert PrincipalMapper(rules).principal_name(dn) == name


def test_no_rule_matches_is_refused_and_bad_rules_are_errors():
    with pytest.raises(LookupError):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").principal_name("O=x")
    with pytest.raises(ValueError):
        PrincipalMapper("RULE:broken")


def test_dev_security_adds_ssl_and_sasl_ssl_listeners_next_to_the_first(tmp_path):
    cfg = dataclasses.replace(BrokerConfig(), listen="127.0.0.1:19092", dev_security=str(tmp_path / "dev"))
    out = configure(cfg)
    listeners = out.listener_set()
    assert [(e.name, e.security_protocol, e.port) for e in listeners.bind] == [
        ("PLAINTEXT", "PLAINTEXT", 19092), ("SSL", "SSL", 19093), ("SASL_SSL", "SASL_SSL", 19094)]
    assert out.ssl_keystore_location.endswith("broker.pem") and out.ssl_client_auth == "requested"
    assert configure(out).listener_set() == listeners  # idempotent
    assert configure(BrokerConfig()) == BrokerConfig()  # nothing without the flag


def test_dev_security_skips_ports_in_use(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = dataclasses.replace(BrokerConfig(), listen=f"127.0.0.1:{port - 1}", dev_security=str(tmp_path))
        ports = [e.port for e in configure(cfg).listener_set().bind]
    assert ports[0] == port - 1 and port not in ports[1:] and all(p > port - 1 for p in ports[1:])
