"""A deleted topic's committed offsets go with it, as in Kafka 4.4 (tests/reference/ compares the two):
on one kbroker node, also after a restart (the tombstones replayed), and on `serve --nodes 3`, through
confluent-kafka (the scenario: deleted_topic_offsets.py)."""

from __future__ import annotations

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.deleted_topic_offsets import EXPECTED, Scenario

pytest.importorskip("confluent_kafka")


def test_a_deleted_topics_offsets_are_gone_also_after_a_restart(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        scenario = Scenario()
        assert scenario.commit_then_delete(broker.bootstrap) == EXPECTED
        assert broker.events("deleted_topics_offsets_removed")
        broker.restart()
        assert scenario.observe(broker.bootstrap) == {k: v for k, v in EXPECTED.items() if k != "before"}


def test_a_deleted_topics_offsets_are_gone_on_three_nodes(tmp_path):
    with BrokerProcess(tmp_path / "data", "--nodes", "3") as broker:
        scenario = Scenario()
        assert scenario.commit_then_delete(broker.bootstrap) == EXPECTED
        broker.restart()
        assert scenario.observe(broker.bootstrap) == {k: v for k, v in EXPECTED.items() if k != "before"}
