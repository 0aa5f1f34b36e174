"""A deleted topic's committed offsets, Apache Kafka 4.4 as the judge: groups commit offsets of a topic
(one plainly, one in a transaction still open when the topic goes), the topic is deleted and created
again under its name, and confluent-kafka's `committed()` is asked of both brokers. Kafka answers -1001
(no offset) for the old topic's partitions, the transaction's pending offset included
(GroupCoordinatorService.onMetadataUpdate -> OffsetMetadataManager.onTopicsDeleted), and keeps the
groups' offsets of other topics; kbroker must answer the same, also after a restart (its tombstones
replayed). The scenario is tests/integration/deleted_topic_offsets.py."""

from __future__ import annotations

import pytest

from kbroker.tests.integration.deleted_topic_offsets import EXPECTED, Scenario

pytest.importorskip("confluent_kafka")


def test_committed_offsets_of_a_deleted_topic_are_gone_as_in_kafka(kafka_reference, kbroker, run_id):
    on_kafka = Scenario(f"k{run_id}").commit_then_delete(kafka_reference.bootstrap)
    scenario = Scenario(f"b{run_id}")
    on_kbroker = scenario.commit_then_delete(kbroker.bootstrap)
    assert on_kafka == EXPECTED  # what the scenario's EXPECTED says of Kafka is Kafka's
    assert on_kbroker == on_kafka
    kbroker.restart()
    assert scenario.observe(kbroker.bootstrap) == {k: v for k, v in on_kafka.items() if k != "before"}
