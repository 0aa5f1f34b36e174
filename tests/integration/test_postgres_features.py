"""The finalized feature levels of a cluster over PostgreSQL are the cluster's (Kafka keeps them as
FeatureLevelRecords in its one metadata log, one epoch for the cluster): an UpdateFeatures through any
node is one transaction in the database (schema version 4, broker/storage/postgres/features.py), answered
after its COMMIT, notified to every node, whose image pass adopts it.

Three node processes over a real PostgreSQL, the poll ten minutes (so what nodes 2 and 3 do within the
test's bounded waits they do because they were told): Kafka 4.4's kafka-features.sh downgrades
share.version to 1 through node 1 and nodes 2 and 3 answer ApiVersions with it, under node 1's epoch; a
wire-level UpdateFeatures through node 2 turns share groups off and a ShareGroupHeartbeat to node 3
answers UNSUPPORTED_VERSION (on every node); the levels and the epoch survive a kill and restart of
every node; share groups come back on through node 3 on every node, a member joining at the group's
coordinator. No node writes features.json (the single node's file)."""

from __future__ import annotations

import time

from kbroker.tests.integration.test_postgres_configs_pushed import notifications
from kbroker.tests.integration.test_postgres_nodes import running_nodes, wait_for
from kbroker.tests.integration.test_share_version import (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, features,
                                                          heartbeat, set_share_version)
from kbroker.tests.integration.wire import Wire

POLL_MS = 600_000  # the safety net's poll: never within this test
WAIT_S = 30  # a bounded wait for what a notification brings (not a timing assert)
UNSUPPORTED_VERSION, INVALID_UPDATE_VERSION = 35, 95
RETRIABLE = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def kafka_features(bootstrap: str, *args: str) -> str:
    from kbroker.tests.reference.kafka import require_kafka_libs
    from kbroker.tests.reference.pair import FEATURES
    from kbroker.tests.reference.tool_runner import run_tool

    require_kafka_libs()
    out = run_tool(FEATURES, "--bootstrap-server", bootstrap, *args, timeout=120)
    assert out.returncode == 0, f"kafka-features {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout


def share_version_everywhere(nodes, level: int, epoch: int) -> bool:
    """Every node answers ApiVersions with share.version at `level` (0: not listed, as Kafka lists it)
    and the cluster's `epoch`."""
    for node in nodes.values():
        levels, seen = features(node.bootstrap)
        if (levels.get("share.version", 0), seen) != (level, epoch):
            return False
    return True


def update_share_version(bootstrap: str, level: int, kind: int) -> tuple[int, str | None]:
    from kbroker.protocol.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest

    w = Wire(bootstrap)
    try:
        answer = w.call(57, 1, UpdateFeaturesRequest(timeout_ms=10_000, feature_updates=[
            FeatureUpdateKey(feature="share.version", max_version_level=level, upgrade_type=kind)]))
        return answer.error_code, answer.error_message
    finally:
        w.close()


def start_again(node) -> None:
    """Start a killed node once its broker lease (5 s) has run out: until then its id is refused."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            node.start()
            return
        except RuntimeError as e:
            if "is held by a live broker" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def heartbeat_to_coordinator(nodes, group: str) -> int:
    """The error of a joining ShareGroupHeartbeat sent to the group's coordinator (FindCoordinator through
    node 1), asked again while the coordinator moves or loads (as a client retries)."""
    from kbroker.tests.integration.test_postgres_share import find

    deadline = time.monotonic() + WAIT_S
    while True:
        error, node = find(nodes[1], group, 0)
        code = heartbeat(nodes[node].bootstrap, group) if error == 0 else error
        if code not in RETRIABLE or time.monotonic() > deadline:
            return code
        time.sleep(0.2)


def test_a_share_version_change_through_one_node_is_the_clusters(postgres, tmp_path):
    database = postgres.create_database()
    url = postgres.url(database)
    with running_nodes(url, tmp_path, "--cluster-poll-ms", str(POLL_MS)) as nodes, notifications(url) as told:
        assert share_version_everywhere(nodes, 2, 1)  # the release's level, no change yet

        out = kafka_features(nodes[1].bootstrap, "downgrade", "--feature", "share.version=1")
        assert "share.version was downgraded to 1" in out, out
        assert features(nodes[1].bootstrap) == ({**features(nodes[1].bootstrap)[0], "share.version": 1}, 2)
        wait_for(lambda: share_version_everywhere(nodes, 1, 2), "nodes 2 and 3 answer share.version 1 in epoch 2",
                 WAIT_S)
        assert "finalized features share.version=1 in epoch 2" in told, told

        # through node 2, on the wire: share groups off on every node
        set_share_version(nodes[2].bootstrap, 0, UNSAFE_DOWNGRADE)
        wait_for(lambda: share_version_everywhere(nodes, 0, 3), "every node has share.version 0 in epoch 3", WAIT_S)
        assert [heartbeat(nodes[n].bootstrap, "g1") for n in (3, 1, 2)] == [UNSUPPORTED_VERSION] * 3
        for node in nodes.values():  # each node acted on it (its listeners: share groups off), as on one node
            assert [(e["old"], e["new"], e["epoch"]) for e in node.events("feature_level_changed")] == \
                [(2, 1, 2), (1, 0, 3)]
        # the level it has, asked again: Kafka's no-op (the epoch moves); a "downgrade" to a newer level is refused
        assert update_share_version(nodes[3].bootstrap, 0, SAFE_DOWNGRADE) == (0, None)
        code, message = update_share_version(nodes[1].bootstrap, 1, SAFE_DOWNGRADE)
        assert (code, "Can't downgrade to a newer version." in (message or "")) == (INVALID_UPDATE_VERSION, True)
        wait_for(lambda: share_version_everywhere(nodes, 0, 4), "the no-op's epoch on every node", WAIT_S)

        for node in nodes.values():  # every node killed (answered means committed) and started again
            node.kill()
        for node in nodes.values():
            start_again(node)
        wait_for(lambda: share_version_everywhere(nodes, 0, 4), "share.version 0 in epoch 4 after the restart",
                 WAIT_S)
        assert [heartbeat(nodes[n].bootstrap, "g1") for n in (1, 2, 3)] == [UNSUPPORTED_VERSION] * 3
        others = {name: level for name, level in features(nodes[2].bootstrap)[0].items()}
        assert others["group.version"] == 1  # the other features as they were

        set_share_version(nodes[3].bootstrap, 2, UPGRADE)
        wait_for(lambda: share_version_everywhere(nodes, 2, 5), "share.version 2 in epoch 5 on every node", WAIT_S)
        assert all(heartbeat(nodes[n].bootstrap, "g1") != UNSUPPORTED_VERSION for n in (1, 2, 3))
        assert heartbeat_to_coordinator(nodes, "g1") == 0  # a member joins the share group again
        assert not any((node.data_dir / "features.json").exists() for node in nodes.values())
        assert postgres.psql("SELECT string_agg(feature || '=' || level, ',') || ' ' || min(features_epoch) "
                             "FROM finalized_features, cluster", database) == "share.version=2 5"
