"""A broker that has answered ApiVersions has imported only what serving needs: no handler but
ApiVersions', no request or response messages but its own, none of the pipeline, the admin CLI,
the code generator or the benchmarks, and none of the libraries only they (or only SASL, TLS
certificates, metrics, compressed batches, regex subscriptions) use. Runs the real `kbroker serve` in a subprocess, which writes the names of
its modules when it exits."""

from __future__ import annotations

import json
import sys

import pytest

from kbroker.protocol.messages import MODULES
from kbroker.tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

# `kbroker` as the installed script runs it, plus a dump of sys.modules at exit.
LAUNCHER = """
import atexit, json, os, sys
out = os.environ.get("KBROKER_TEST_MODULES_OUT")
if out:
    atexit.register(lambda: json.dump(sorted(sys.modules), open(out, "w")))
from kbroker.broker.cli import main
sys.argv[0] = "kbroker"
raise SystemExit(main())
"""

NOT_FOR_SERVING = ("pyspark", "pandas", "pyarrow", "numpy", "matplotlib", "rich", "pygments", "scramp",
                   "asn1crypto", "prometheus_client", "importlib.metadata", "kio",
                   # until a compressed batch or a regex subscription arrives
                   "cramjam", "lz4", "zstandard", "re2")

# The consumer-group (KIP-848) half of the coordinator: imported with the first command or record of
# the consumer protocol (coordinator/consumer_on_demand.py), so a broker with nothing stored has none.
ON_FIRST_USE = (# the group coordinator: built with the first group request or stored group (broker/app.py)
                "kbroker.coordinator.service", "kbroker.coordinator.classic", "kbroker.coordinator.runtime",
                "kbroker.coordinator.record_codec", "kbroker.coordinator.records", "kbroker.coordinator.commands",
                "kbroker.coordinator.consumer_machine", "kbroker.coordinator.consumer_heartbeat",
                "kbroker.coordinator.consumer_offsets", "kbroker.coordinator.migration",
                "kbroker.coordinator.assignors", "kbroker.coordinator.reconcile",
                "kbroker.coordinator.consumer_record_codec",
                # the transaction coordinator: built with the first transactional request (broker/app.py)
                "kbroker.broker.transactions", "kbroker.coordinator.txn.coordinator",
                # credentials, ACLs, TLS and SASL: a broker with only PLAINTEXT listeners and no
                # authorizer builds them with their first use (Broker.security)
                "kbroker.broker.security.service", "kbroker.broker.security.credentials",
                "kbroker.broker.security.acl_store", "kbroker.broker.security.tls",
                "kbroker.broker.security.sasl", "kbroker.broker.security.session")


def test_answering_api_versions_imports_only_what_serving_needs(tmp_path):
    launcher = tmp_path / "kbroker_launcher.py"
    launcher.write_text(LAUNCHER)
    dump = tmp_path / "modules.json"
    broker = BrokerProcess(tmp_path / "data", kbroker=[sys.executable, str(launcher)],
                           env={"KBROKER_TEST_MODULES_OUT": str(dump)})  # answers ApiVersions (probe)
    broker.stop()
    modules = set(json.loads(dump.read_text()))
    assert "kbroker.broker.server" in modules  # the dump is of a serving broker
    ours = {m for m in modules if m.startswith("kbroker.")}
    assert not {m for m in ours if m.split(".")[1] in ("pipeline", "admin", "tools", "bench", "tests")}
    assert not {m for m in modules for lib in NOT_FOR_SERVING if m == lib or m.startswith(lib + ".")}
    assert not modules & set(ON_FIRST_USE)
    assert not {m for m in ours if m.startswith("kbroker.protocol.messages.consumer_group_")}
    handlers = {m for m in ours if m.startswith("kbroker.broker.apis.")}
    assert handlers == {"kbroker.broker.apis.api_versions"}
    api_messages = {f"kbroker.protocol.messages.{name}" for name, _, kind, _ in MODULES
                    if kind in ("request", "response")}
    assert modules & api_messages == {"kbroker.protocol.messages.api_versions_request",
                                      "kbroker.protocol.messages.api_versions_response"}
