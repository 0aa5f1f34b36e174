"""A TLS listener's keystore changed at run time, asked of Kafka 4.4 itself and of kbroker alike: the
same IncrementalAlterConfigs steps on `listener.name.ssl.ssl.keystore.location` (a new certificate
for the same subject, a file that does not load, a certificate for another subject, the same location
again after the file was renewed in place), each answered alike, and the certificate a new TLS
handshake is shown after each step the same. (Kafka applies an accepted change a moment later, once its
broker has the controller's record: the new certificate is awaited there.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kbroker.broker.security.dev_security import make_ca
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_tls_reload import LOCATION, alter, keystore, presented
from kbroker.tests.reference.kafka import KafkaProcess, kafka_libs

WAIT_S = 30  # a bound for Kafka's broker to apply its controller's record, not a timing


def steps(bootstrap: str, tls_port: int, files: dict[str, Path], ca, serials: dict[int, str]) -> list[tuple]:
    """What each step answers and which certificate (by file) a new handshake then shows."""
    out = []

    def shown(expected: str | None) -> str:
        deadline = time.monotonic() + WAIT_S
        while (name := serials.get(presented(tls_port), "?")) != expected and expected is not None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return name

    for step, target, expect in (("new", "second", "second"), ("broken", "broken", None),
                                 ("other_subject", "other", None), ("renewed", "second", "renewed")):
        if step == "renewed":
            serials[keystore(files["second"], ca)] = "renewed"
        code, message = alter(bootstrap, (LOCATION, str(files[target])))
        where = str(files["first"].parent)  # each broker's files are in a directory of their own
        out.append((step, code, message and message.replace(where, "<dir>"), shown(expect)))
    return out


def test_a_keystore_changed_at_run_time_as_kafka_changes_it(tmp_path):
    if kafka_libs() is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    ca = make_ca("test CA")
    results = []
    for side in ("kafka", "kbroker"):
        files = {name: tmp_path / side / f"{name}.pem" for name in ("first", "second", "other", "broken")}
        files["first"].parent.mkdir()
        serials = {keystore(files["first"], ca): "first", keystore(files["second"], ca): "second",
                   keystore(files["other"], ca, "someone-else"): "other"}
        files["broken"].write_text("not a keystore\n")
        if side == "kafka":
            kafka = KafkaProcess(tmp_path / "kafka", start=False)
            tls_port = kafka.add_listener("SSL", **{"ssl.keystore.type": "PEM",
                                                    "ssl.keystore.location": str(files["first"])})
            kafka.start()
            try:
                assert serials[presented(tls_port)] == "first"
                results.append(steps(kafka.bootstrap, tls_port, files, ca, serials))
            finally:
                kafka.stop()
        else:
            plain, tls_port = free_port(), free_port()
            with BrokerProcess(tmp_path / "data", "--listeners",
                               f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
                               "--ssl-keystore-location", str(files["first"]), port=plain, listen_flag=False) as broker:
                assert serials[presented(tls_port)] == "first"
                results.append(steps(broker.bootstrap, tls_port, files, ca, serials))
    kafka_steps, kbroker_steps = results
    assert kbroker_steps == kafka_steps
    assert [s[3] for s in kafka_steps] == ["second", "second", "second", "renewed"]
