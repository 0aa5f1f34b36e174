"""A broker that has answered ApiVersions has imported only what serving needs: no handler but
ApiVersions', no request or response messages but its own, none of the pipeline, the admin CLI,
the code generator or the benchmarks, and none of the libraries only they (or only SASL, TLS
certificates, metrics, compressed batches, regex subscriptions) use. Runs the real `kbroker serve` in a subprocess, which writes the names of
its modules when it exits."""

from __future__ import annotations

import json
import sys

import pytest

from kbroker.broker.apis import HELPERS
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

NOT_FOR_SERVING = ("construct",  # the codec is compiled ahead of time (protocol/compiled/)
                   "pyspark", "pandas", "pyarrow", "numpy", "matplotlib", "rich", "pygments", "scramp",
                   "asn1crypto", "prometheus_client", "importlib.metadata", "kio",
                   # until a compressed batch or a regex subscription arrives
                   "cramjam", "lz4", "zstandard", "re2")

# The consumer-group (KIP-848) half of the coordinator: imported with the first command or record of
# the consumer protocol (coordinator/groups/consumer/consumer_on_demand.py), so a broker with nothing stored has none.
ON_FIRST_USE = (# the group coordinator: built with the first group request or stored group (broker/app.py)
                "kbroker.coordinator.groups.service", "kbroker.coordinator.groups.classic.classic", "kbroker.coordinator.runtime.runtime",
                "kbroker.protocol.records.codec", "kbroker.protocol.records.classic_records", "kbroker.coordinator.groups.commands",
                "kbroker.coordinator.groups.consumer.consumer_machine", "kbroker.coordinator.groups.consumer.consumer_heartbeat",
                "kbroker.coordinator.groups.consumer.consumer_describe", "kbroker.coordinator.groups.consumer.migration",
                "kbroker.coordinator.groups.consumer.assignors", "kbroker.coordinator.groups.consumer.reconcile",
                "kbroker.protocol.records.consumer_codec",
                # the transaction coordinator: built with the first transactional request (broker/app.py)
                "kbroker.broker.coordinators.transactions", "kbroker.coordinator.txn.coordinator",
                "kbroker.coordinator.txn.service", "kbroker.coordinator.txn.shard",
                "kbroker.broker.coordinators.txn_recovery", "kbroker.coordinator.groups.shard",
                "kbroker.coordinator.groups.offset_store", "kbroker.coordinator.runtime.partition",
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
    assert "kbroker.broker.network.server" in modules  # the dump is of a serving broker
    ours = {m for m in modules if m.startswith("kbroker.")}
    assert not {m for m in ours if m.split(".")[1] in ("pipeline", "admin", "tools", "bench", "tests")}
    assert not {m for m in modules for lib in NOT_FOR_SERVING if m == lib or m.startswith(lib + ".")}
    assert not modules & set(ON_FIRST_USE), sorted(modules & set(ON_FIRST_USE))
    assert not {m for m in ours if m.startswith("kbroker.protocol.messages.consumer_group_")}
    handlers = {m for m in ours if m.startswith("kbroker.broker.apis.") and m.rsplit(".", 1)[1] not in HELPERS}
    assert handlers == {"kbroker.broker.apis.api_versions"}
    api_messages = {f"kbroker.protocol.messages.{name}" for name, _, kind, _ in MODULES
                    if kind in ("request", "response")}
    assert modules & api_messages == {"kbroker.protocol.messages.api_versions_request",
                                      "kbroker.protocol.messages.api_versions_response"}


def test_serving_real_clients_never_imports_construct(tmp_path):
    """Produce, consume in a group, commit and describe with librdkafka: every message the client
    sends is decoded by the codec `make codegen` compiled with construct, not by compiling it here;
    and with no authorizer configured, the ACL checks are never installed."""
    from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    launcher = tmp_path / "kbroker_launcher.py"
    launcher.write_text(LAUNCHER)
    dump = tmp_path / "modules.json"
    broker = BrokerProcess(tmp_path / "data", kbroker=[sys.executable, str(launcher)],
                           env={"KBROKER_TEST_MODULES_OUT": str(dump)})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("aot", 2, 1)])["aot"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(10):
            producer.produce("aot", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "aot-group",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["aot"])
        got = []
        while len(got) < 10:
            msg = consumer.poll(30)
            assert msg is not None and msg.error() is None, msg and msg.error()
            got.append(msg.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("aot", 0), TopicPartition("aot", 1)], timeout=30)
        consumer.close()
        assert sorted(got) == sorted(b"v%d" % i for i in range(10))
        assert sum(tp.offset for tp in committed) == 10
        assert admin.describe_consumer_groups(["aot-group"])["aot-group"].result(30).group_id == "aot-group"
        # KIP-430 without an authorizer: every operation the resource supports, as Kafka answers
        [topic] = admin.describe_topics(TopicCollection(["aot"]), include_authorized_operations=True).values()
        assert len(topic.result(30).authorized_operations) == 8  # READ ... ALTER_CONFIGS
        assert len(admin.describe_cluster(include_authorized_operations=True).result(30).authorized_operations) == 7
    finally:
        broker.stop()
    modules = set(json.loads(dump.read_text()))
    assert "kbroker.protocol.compiled.produce_request" in modules  # the dump is of a broker that served
    assert "kbroker.protocol.compiled.offset_commit_request" in modules or \
        "kbroker.protocol.messages.offset_commit_request" in modules
    assert not {m for m in modules if m == "construct" or m.startswith("construct.")}
    assert "kbroker.protocol.compiler" not in modules
    # With no authorizer configured, no ACL check is installed (broker/routing.py build_router)
    assert not modules & {"kbroker.broker.security.api_checks", "kbroker.broker.security.txn_group_admin_checks"}
