"""What Apache Kafka 4.4 and kbroker answer to changes of their internal topics (issue 38, item 2):
the same requests, in the same order, to a Kafka node of this test's own (it deletes its internal
topics: the shared reference node must not lose them) and to kbroker.

Kafka refuses DeleteRecords on them (INVALID_TOPIC_EXCEPTION), CreateTopics of one that exists
(TOPIC_ALREADY_EXISTS) and of `__cluster_metadata` (INVALID_REQUEST), and Metadata's auto-creation of
`__cluster_metadata` (UNKNOWN_TOPIC_OR_PARTITION); kbroker answers those the same. Kafka accepts the rest: the issue's two config requests (after which `__consumer_offsets` is on
`cleanup.policy=delete`), every other config change, CreatePartitions, DeleteTopics of both topics, and
CreateTopics of `__transaction_state` before it exists with 3 partitions and `cleanup.policy=delete`.
kbroker refuses each of those (broker/partitions/internal_topics.py), deliberately: each would let
retention, a client or a new partition count take the coordinators' records.
"""

from __future__ import annotations

import os
import time

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.topic_admin_wire import (
    APPEND, DELETE, OFFSETS, SET, TXN, alter, configs_of, create, delete_records, delete_topic, grow, incremental,
    metadata,
)
from kbroker.tests.integration.wire import Wire

# The answers Kafka 4.4 gives, asked on this machine; kbroker's differ where the policy refuses.
KAFKA = {
    "create __transaction_state (absent, 3 partitions, delete)": E.NONE,
    "create __cluster_metadata": E.INVALID_REQUEST,
    "metadata auto-create __cluster_metadata": E.UNKNOWN_TOPIC_OR_PARTITION,
    "create __consumer_offsets (exists)": E.TOPIC_ALREADY_EXISTS,
    "alter: compact, retention.ms=1000, segment.ms=100": E.NONE,
    "incremental: DELETE cleanup.policy": E.NONE,
    "incremental: SET cleanup.policy=delete": E.NONE,
    "incremental: APPEND cleanup.policy=delete": E.NONE,
    "alter: no cleanup.policy (validate only)": E.NONE,
    "create partitions: 60": E.NONE,
    "delete records": E.INVALID_TOPIC_EXCEPTION,
    "delete topic __transaction_state": E.NONE,
    "delete topic __consumer_offsets": E.NONE,
}
KBROKER = {**KAFKA,
           "create __transaction_state (absent, 3 partitions, delete)": E.INVALID_REQUEST,
           "incremental: DELETE cleanup.policy": E.POLICY_VIOLATION,
           "incremental: SET cleanup.policy=delete": E.POLICY_VIOLATION,
           "incremental: APPEND cleanup.policy=delete": E.POLICY_VIOLATION,
           "alter: no cleanup.policy (validate only)": E.POLICY_VIOLATION,
           "create partitions: 60": E.POLICY_VIOLATION,
           "delete topic __transaction_state": E.INVALID_TOPIC_EXCEPTION,
           "delete topic __consumer_offsets": E.INVALID_TOPIC_EXCEPTION}


@pytest.fixture
def own_kafka(tmp_path):
    from kbroker.tests.reference.kafka import KafkaProcess, kafka_libs

    if kafka_libs() is None:
        if os.environ.get("KBROKER_REQUIRE_KAFKA") == "1":
            pytest.fail("Apache Kafka's jars are missing (make kafka-jars)")
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    with KafkaProcess(tmp_path / "kafka") as kafka:
        yield kafka


def until_present(wire: Wire, topic: str) -> None:
    """Kafka creates `__consumer_offsets` when a client first asks for it (kbroker at its first start),
    and each creates `__transaction_state` when asked for it (kbroker with its own settings)."""
    deadline = time.monotonic() + 60
    while (found := metadata(wire, topic, auto_create=True))[0] != E.NONE or not found[1]:
        assert time.monotonic() < deadline, f"{topic} was not created: {found}"
        time.sleep(0.2)


def answers(bootstrap: str) -> tuple[dict[str, int], dict[str, str]]:
    """Each step's error code, and what the topics' configs are after them."""
    wire = Wire(bootstrap)
    got: dict[str, int] = {}
    got["create __transaction_state (absent, 3 partitions, delete)"] = create(wire, TXN, 3, {"cleanup.policy": "delete"})[0]
    got["create __cluster_metadata"] = create(wire, "__cluster_metadata", 1, {})[0]
    got["metadata auto-create __cluster_metadata"] = metadata(wire, "__cluster_metadata", auto_create=True)[0]
    until_present(wire, OFFSETS)
    got["create __consumer_offsets (exists)"] = create(wire, OFFSETS, 3, {})[0]
    got["alter: compact, retention.ms=1000, segment.ms=100"] = alter(
        wire, OFFSETS, {"cleanup.policy": "compact", "retention.ms": "1000", "segment.ms": "100"})[0]
    got["incremental: DELETE cleanup.policy"] = incremental(wire, OFFSETS, [("cleanup.policy", DELETE, None)])[0]
    # Kafka's broker sees a change once the controller's record reaches it: a later change both accept,
    # once visible, shows the DELETE's result too
    assert incremental(wire, OFFSETS, [("min.cleanable.dirty.ratio", SET, "0.4")])[0] == E.NONE
    deadline = time.monotonic() + 30
    while (configs := configs_of(wire, OFFSETS))["min.cleanable.dirty.ratio"] != "0.4":
        assert time.monotonic() < deadline, configs
        time.sleep(0.1)
    after_the_issue = configs["cleanup.policy"]
    got["incremental: SET cleanup.policy=delete"] = incremental(wire, OFFSETS, [("cleanup.policy", SET, "delete")])[0]
    got["incremental: APPEND cleanup.policy=delete"] = incremental(
        wire, OFFSETS, [("cleanup.policy", APPEND, "delete")])[0]
    got["alter: no cleanup.policy (validate only)"] = alter(wire, OFFSETS, {"retention.ms": "1000"},
                                                             validate_only=True)[0]
    got["create partitions: 60"] = grow(wire, OFFSETS, 60)[0]
    got["delete records"] = delete_records(wire, OFFSETS)
    until_present(wire, TXN)  # Kafka's is the client's 3 partitions; kbroker makes its own on the request
    txn_partitions = metadata(wire, TXN)[1]
    got["delete topic __transaction_state"] = delete_topic(wire, TXN)[0]
    got["delete topic __consumer_offsets"] = delete_topic(wire, OFFSETS)[0]
    wire.close()
    return got, {"__consumer_offsets cleanup.policy after the issue's two requests": after_the_issue,
                 "__transaction_state partitions": str(txn_partitions)}


def test_kafka_accepts_what_would_erase_its_internal_topics_and_kbroker_refuses_it(own_kafka, tmp_path):
    kafka, kafka_state = answers(own_kafka.bootstrap)
    with BrokerProcess(tmp_path / "kbroker") as broker:
        ours, our_state = answers(broker.bootstrap)
        refusals = broker.events("internal_topic_change_refused")
    assert kafka == KAFKA
    assert kafka_state == {"__consumer_offsets cleanup.policy after the issue's two requests": "delete",
                           "__transaction_state partitions": "3"}
    assert ours == KBROKER
    assert our_state == {"__consumer_offsets cleanup.policy after the issue's two requests": "compact",
                         "__transaction_state partitions": "50"}
    # every refusal of kbroker's policy leaves its event (TOPIC_ALREADY_EXISTS is no refusal of it)
    assert len(refusals) == sum(1 for k in KBROKER if KBROKER[k] != E.NONE and k != "create __consumer_offsets (exists)")
