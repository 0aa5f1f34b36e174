"""A deleted topic's committed offsets, Apache Kafka 4.4 as the judge: groups commit offsets of a topic
(one plainly, one in a transaction still open when the topic goes), the topic is deleted and created
again under its name, and confluent-kafka's `committed()` is asked of both brokers. Kafka answers -1001
(no offset) for the old topic's partitions, the transaction's pending offset included
(GroupCoordinatorService.onMetadataUpdate -> OffsetMetadataManager.onTopicsDeleted), and keeps the
groups' offsets of other topics; kbroker must answer the same, also after a restart (its tombstones
replayed). The scenario is tests/integration/deleted_topic_offsets.py."""

from __future__ import annotations

import pytest

from kbroker.tests.reference.pair import await_offsets_topic
from kbroker.tests.integration.deleted_topic_offsets import (EXPECTED, NO_OFFSET, Scenario, committed,
                                                            group_deleted_in_a_transaction)

pytest.importorskip("confluent_kafka")


def test_committed_offsets_of_a_deleted_topic_are_gone_as_in_kafka(kafka_reference, kbroker, run_id):
    await_offsets_topic(kafka_reference.bootstrap)  # Kafka makes it on the first FindCoordinator
    on_kafka = Scenario(f"k{run_id}").commit_then_delete(kafka_reference.bootstrap)
    scenario = Scenario(f"b{run_id}")
    on_kbroker = scenario.commit_then_delete(kbroker.bootstrap)
    assert on_kafka == EXPECTED  # what the scenario's EXPECTED says of Kafka is Kafka's
    assert on_kbroker == on_kafka
    kbroker.restart()
    assert scenario.observe(kbroker.bootstrap) == {k: v for k, v in on_kafka.items() if k != "before"}


def test_a_tombstone_ends_a_transactions_pending_offset_as_in_kafka(kafka_reference, kbroker, run_id):
    """The rule the deleted topic's tombstones rely on for pending offsets, seen through DeleteGroups:
    a group deleted while a transaction holds an offset for it has none once the transaction commits."""
    await_offsets_topic(kafka_reference.bootstrap)
    on_kafka = group_deleted_in_a_transaction(kafka_reference.bootstrap, f"k{run_id}")
    assert on_kafka == [NO_OFFSET, NO_OFFSET]
    assert group_deleted_in_a_transaction(kbroker.bootstrap, f"b{run_id}") == on_kafka
    kbroker.restart()
    assert committed(kbroker.bootstrap, f"gd-b{run_id}", f"txd-b{run_id}", 2) == on_kafka
