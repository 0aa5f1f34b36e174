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


MARKS = {"kafkajs": [KAFKAJS_LOSES_ON_MOVES]}


@pytest.mark.parametrize("client", [pytest.param(c, marks=MARKS.get(c, [])) for c in ("confluent-kafka", *CLIENTS)])
def test_clients_ride_through_a_kafka_node_stopping(kafka, client, tmp_path, capsys) -> None:
    make = ConfluentWorkload if client == "confluent-kafka" else workload_factory(client, tmp_path)
    run(KafkaTarget(kafka), make, "stop-start", capsys)
    check_joined_knowing_the_topic(client, tmp_path)
