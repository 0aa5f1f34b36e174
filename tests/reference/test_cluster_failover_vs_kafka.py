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
    CLIENTS, KAFKAJS_LOSES_ON_MOVES, UNSETTLED, workload_factory,
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


# sarama against Kafka 4.4: in the one run it had (loaded machine, 2026-11-29) its group had not consumed
# 465 of the records when the scenario's wait ended, after Kafka's node came back; against kbroker it
# passes. Not yet looked into (issue 41): kept visible as an expected failure, not left out.
SARAMA_ON_KAFKA = pytest.mark.xfail(reason="sarama's group fell behind after a Kafka node's stop and start "
                                           "(not yet looked into, issue 41)", strict=False)


MARKS = {"sarama": [SARAMA_ON_KAFKA], "kafkajs": [KAFKAJS_LOSES_ON_MOVES], "kafka-python": [UNSETTLED["kafka-python"]]}


@pytest.mark.parametrize("client", [pytest.param(c, marks=MARKS.get(c, [])) for c in ("confluent-kafka", *CLIENTS)])
def test_clients_ride_through_a_kafka_node_stopping(kafka, client, tmp_path, capsys) -> None:
    make = ConfluentWorkload if client == "confluent-kafka" else workload_factory(client, tmp_path)
    run(KafkaTarget(kafka), make, "stop-start", capsys)
