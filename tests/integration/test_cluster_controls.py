"""The cluster controls kfake (`kcl fake`) has and the first round lacked (issue 41): add a node, cut one
client off from one node, count each node's requests; over HTTP through kbroker.admin.cluster.ClusterControls
and from the CLI (`kbroker test node-add|cut-off|requests`), each one `cluster_control` event."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.tests.integration.cluster_scenarios import start_cluster
from kbroker.tests.integration.wire import Wire


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # a spare port after the three for the node added at run time
    broker, controls, port = start_cluster(tmp_path_factory.mktemp("controls"), spare_ports=1)
    yield broker, controls, port
    broker.stop()


def _metadata(address: str, client_id: str = "controls-test", *topics: str):
    wire = Wire(address, client_id=client_id)
    try:
        return wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics] or None,
                                                allow_auto_topic_creation=False))
    finally:
        wire.close()


def test_request_counts_per_node(cluster) -> None:
    _, controls, port = cluster
    before = {n["node_id"]: n for n in controls.request_counts()["nodes"]}
    for _ in range(3):
        _metadata(f"127.0.0.1:{port + 1}")
    after = {n["node_id"]: n for n in controls.request_counts()["nodes"]}
    assert after[2]["requests"]["Metadata"] - before[2]["requests"].get("Metadata", 0) == 3
    assert after[3]["total"] == before[3]["total"] and after[1]["total"] == before[1]["total"]
    assert controls.describe()["nodes"][1]["requests"] == after[2]["total"]


def test_one_client_cut_off_from_one_node(cluster) -> None:
    broker, controls, port = cluster
    cut = Wire(f"127.0.0.1:{port + 1}", client_id="cut-me")
    assert cut.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)).brokers
    event = controls.cut_off(2, "cut-me")
    assert event["connections_closed"] == 1 and cut.closed_by_peer()
    cut.close()
    again = Wire(f"127.0.0.1:{port + 1}", client_id="cut-me")
    try:
        again.send(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert again.closed_by_peer(), "a cut-off client's request was answered"
    finally:
        again.close()
    assert _metadata(f"127.0.0.1:{port}", "cut-me").brokers  # the other nodes still answer it
    assert _metadata(f"127.0.0.1:{port + 1}", "someone-else").brokers  # and node 2 answers the others
    controls.cut_off(2, "cut-me", cut=False)
    assert _metadata(f"127.0.0.1:{port + 1}", "cut-me").brokers
    assert [e["control"] for e in broker.events("cluster_control")][-2:] == ["cut_off_client", "restore_client"]


def test_a_node_added_serves_and_is_placed_on(cluster) -> None:
    _, controls, port = cluster
    added = controls.add_node()
    assert added["node"] == 4 and list(added["listeners"].values()) == [f"127.0.0.1:{port + 3}"]
    for node in range(4):
        md = _metadata(f"127.0.0.1:{port + node}")
        assert sorted((b.node_id, b.port) for b in md.brokers) == [(n + 1, port + n) for n in range(4)]
    wire = Wire(f"127.0.0.1:{port + 3}")
    try:
        made = wire.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(name="after-add", num_partitions=8,
                                                                           replication_factor=2)], timeout_ms=10000))
        assert made.topics[0].error_code == 0, made.topics[0].error_message
    finally:
        wire.close()
    parts = _metadata(f"127.0.0.1:{port}", "controls-test", "after-add").topics[0].partitions
    assert Counter(p.leader_id for p in parts) == {1: 2, 2: 2, 3: 2, 4: 2}  # Kafka's striping over 4 nodes


def test_the_cli_drives_the_new_controls(cluster) -> None:
    _, controls, port = cluster

    def kbroker(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "kbroker", "test", *args, "--admin-url", controls.admin_url,
                               "--token", controls.token or ""], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    kbroker("cut-off", "1", "cli-client")
    assert json.loads(kbroker("cluster", "--json"))["nodes"][0]["cut_off_clients"] == ["cli-client"]
    kbroker("cut-off", "1", "cli-client", "--mend")
    assert json.loads(kbroker("cluster", "--json"))["nodes"][0]["cut_off_clients"] == []
    time.sleep(0.1)
    counts = json.loads(kbroker("requests", "--json"))
    assert {n["node_id"] for n in counts["nodes"]} >= {1, 2, 3}
