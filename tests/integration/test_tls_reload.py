"""A TLS listener's keystore changed at run time (issue 43), as Kafka's dynamic SSL reload does: with
`listener.name.ssl.ssl.keystore.location` set on the broker through IncrementalAlterConfigs, the next
TLS handshake on a real broker process presents the new certificate; a keystore that does not load,
or a certificate for another subject, is refused in Kafka's words and changes nothing; the same
location set again after the file was renewed in place reloads it; a restart keeps the new one."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from cryptography import x509

from kbroker.broker.security.dev_security import _pem_cert, _pem_key, issue, make_ca
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.wire import Wire

BROKER, SET, INVALID_REQUEST = 4, 0, 42
LOCATION = "listener.name.ssl.ssl.keystore.location"


def alter(bootstrap: str, *configs: tuple[str, str]) -> tuple[int, str | None]:
    wire = Wire(bootstrap)
    try:
        answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            BROKER, "1", [AlterableConfig(n, SET, v) for n, v in configs])], validate_only=False)).responses[0]
    finally:
        wire.close()
    return answer.error_code, answer.error_message


def presented(port: int) -> int:
    """The serial number of the certificate a new TLS handshake is shown."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=15) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def keystore(path: Path, ca, common_name: str = "kbroker") -> int:
    """A PEM keystore (certificate, then key) for `common_name`, signed by `ca`; its serial number."""
    key, cert = issue(*ca, common_name, ["localhost", "127.0.0.1"])
    path.write_bytes(_pem_cert(cert) + _pem_key(key))
    return cert.serial_number


def test_a_new_keystore_is_presented_by_the_next_handshake(tmp_path):
    ca = make_ca("test CA")
    first = keystore(tmp_path / "first.pem", ca)
    second = keystore(tmp_path / "second.pem", ca)
    keystore(tmp_path / "other.pem", ca, "someone-else")
    (tmp_path / "broken.pem").write_text("not a keystore\n")
    plain, tls_port = free_port(), free_port()
    with BrokerProcess(tmp_path / "data", "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
                       "--ssl-keystore-location", str(tmp_path / "first.pem"), port=plain, listen_flag=False) as broker:
        assert presented(tls_port) == first
        assert alter(broker.bootstrap, (LOCATION, str(tmp_path / "second.pem"))) == (0, None)
        assert presented(tls_port) == second
        (reload,) = broker.events("tls_keystore_reloaded")
        assert reload["listener"] == "SSL" and reload["subject"] == "CN=kbroker"

        # refused, and nothing changes: a file that does not load, another subject
        wrapped = ("Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic config update "
                   "of SSLFactory failed: {} for configuration Invalid dynamic configuration")
        assert alter(broker.bootstrap, (LOCATION, str(tmp_path / "broken.pem"))) == (INVALID_REQUEST, wrapped.format(
            "org.apache.kafka.common.errors.InvalidConfigurationException: Failed to load PEM SSL keystore "
            f"{tmp_path / 'broken.pem'}"))
        assert alter(broker.bootstrap, (LOCATION, str(tmp_path / "other.pem"))) == (INVALID_REQUEST, wrapped.format(
            "org.apache.kafka.common.config.ConfigException: Keystore DistinguishedName does not match:  "
            "existing={alias=kafka, DN=CN=kbroker}, new={alias=kafka, DN=CN=someone-else}"))
        assert presented(tls_port) == second
        # ... unless the subject may change
        assert alter(broker.bootstrap, (LOCATION, str(tmp_path / "other.pem")),
                     ("listener.name.ssl.ssl.allow.dn.changes", "true")) == (0, None)
        assert presented(tls_port) != second
        assert alter(broker.bootstrap, (LOCATION, str(tmp_path / "second.pem"))) == (0, None)

        # renewed in place: the same location named again reloads the changed file
        renewed = keystore(tmp_path / "second.pem", ca)
        assert presented(tls_port) == second
        assert alter(broker.bootstrap, (LOCATION, str(tmp_path / "second.pem"))) == (0, None)
        assert presented(tls_port) == renewed

        broker.restart()
        assert presented(tls_port) == renewed
