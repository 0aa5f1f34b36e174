"""Share groups' dead letter queues with several nodes in one process (`serve --nodes 3`): a record
rejected on the node leading its data partition is copied to the group's DLQ topic-partition led by
another node (the process's one partition service appends it for that leader), as Kafka's broker
produces the copy to the DLQ partition's leader."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from confluent_kafka import Producer

from kbroker.tests.integration.broker_process import BrokerProcess, free_ports
from kbroker.tests.integration.test_postgres_share import ShareMember, create_led_by, fetched_when_served
from kbroker.tests.integration.test_share_dlq import HEADERS, configure, dlq_records, headers_of

REJECT, ACCEPT = 3, 1


def test_a_copy_reaches_a_dlq_partition_another_node_leads(tmp_path):
    port = free_ports(3)
    with BrokerProcess(tmp_path / "data", "--nodes", "3", "--profile", "test", port=port):
        nodes = {k + 1: SimpleNamespace(bootstrap=f"127.0.0.1:{port + k}") for k in range(3)}
        topic, dlq, group = f"cd-{uuid.uuid4().hex[:6]}", f"dlq.{uuid.uuid4().hex[:6]}", f"cdg-{uuid.uuid4().hex[:6]}"
        topic_id = create_led_by(nodes[1].bootstrap, topic, [1])
        create_led_by(nodes[1].bootstrap, dlq, [2], {"errors.deadletterqueue.group.enable": "true"})
        configure(nodes[1], group, **{"errors.deadletterqueue.topic.name": dlq,
                                      "errors.deadletterqueue.copy.record.enable": "true"})
        member = ShareMember(nodes, group, topic, topic_id).at(nodes[1])
        member.fetch()  # the share-partition starts at the (empty) log's end
        producer = Producer({"bootstrap.servers": nodes[1].bootstrap, "linger.ms": 0})
        for i in range(2):
            producer.produce(topic, f"v{i}".encode(), partition=0)
            assert producer.flush(30) == 0
        got = fetched_when_served(member, 1)
        assert got == [(0, 0, 1)]
        assert member.acknowledge([(0, 0, [REJECT])]) == [0]
        copies = dlq_records(nodes[2], dlq, expect=1)  # led by node 2: read there
        assert [(r.key, r.value) for r in copies] == [(None, b"v0")]
        assert headers_of(copies[0]) == list(zip(HEADERS, [topic, "0", "0", group, "1", "Offset rejected by client."]))
