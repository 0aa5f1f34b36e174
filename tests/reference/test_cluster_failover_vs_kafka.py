"""The cluster failover scenario that a 3-node Apache Kafka 4.4 cluster can play (tests/reference/kafka.py
KafkaCluster): a node leading a partition stops (Kafka's controlled shutdown) and starts again while each
client's idempotent producer and committing consumer group run (tests/integration/cluster_scenarios.py).
The same checks as against kbroker (tests/integration/test_cluster_clients.py, test_cluster_failover.py):
no acknowledged record lost or duplicated, every record consumed, committed offsets kept; the recovery time
and the errors each client saw are printed for docs/cluster.md's side-by-side table.
"""

from __future__ import annotations

import pytest

from kbroker.tests.integration.cluster_scenarios import ConfluentWorkload, KafkaTarget, run
from kbroker.tests.integration.test_cluster_clients import (
    CLIENTS, KAFKAJS_LOSES_ON_MOVES, check_joined_knowing_the_topic, workload_factory,
)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    from kbroker.tests.reference.kafka import KafkaCluster, require_kafka_libs

    require_kafka_libs()
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-failover"))
    try:
        yield cluster
    finally:
        cluster.stop()


# sarama against Kafka 4.4 (looked into on 2026-11-29, issue 41: 3 runs of 3 fell behind): its group falls
# behind from the start and does not catch up in the scenario's time. The workload commits synchronously after
# each message, and on Kafka an OffsetCommit is an acks=all append to __consumer_offsets' 3 replicas: 7.1 ms
# median, 14 ms p90 on an idle cluster here (kbroker --nodes 3: 0.2 and 2.4 ms; 200 sequential OffsetCommit
# v8), more under load, so the three handlers commit about as fast as the producer writes. sarama's
# connection lock adds the wait described at SARAMA_COMMIT_BEHIND_FETCH (test_cluster_clients.py): goroutine
# dumps showed the handlers in Commit(), waiting for OffsetCommit answers in two runs and for the lock held by
# a Fetch in the third; the first run had consumed 960 of 5,532 acknowledged records when its dump was taken,
# 10 s after a partition was abandoned.
SARAMA_ON_KAFKA = pytest.mark.xfail(reason="sarama's synchronous Commit() after each message waits for Kafka's "
                                           "replicated OffsetCommit (~7-14 ms) and for its own connection lock "
                                           "held through 500 ms fetches: the group falls behind the producer",
                                    strict=False)


MARKS = {"sarama": [SARAMA_ON_KAFKA], "kafkajs": [KAFKAJS_LOSES_ON_MOVES]}


@pytest.mark.parametrize("client", [pytest.param(c, marks=MARKS.get(c, [])) for c in ("confluent-kafka", *CLIENTS)])
def test_clients_ride_through_a_kafka_node_stopping(kafka, client, tmp_path, capsys) -> None:
    make = ConfluentWorkload if client == "confluent-kafka" else workload_factory(client, tmp_path)
    run(KafkaTarget(kafka), make, "stop-start", capsys)
    check_joined_knowing_the_topic(client, tmp_path)
