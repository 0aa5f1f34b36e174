"""The controller a node of a cluster over PostgreSQL names to clients (issue 44) before any node holds
the controller lease: itself, as every node serves the controller's requests. It named none (-1) from
its start until its first refresh after an election, and librdkafka's admin client, told of no
controller, waits for a metadata change that its refresh does not ask for again: a CreateTopics sent
right after a node started hung past 30 s in loaded runs (test_postgres_fence.py). Kafka's brokers
name a live broker (KRaft's metadata answers a random one) and never -1."""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.broker.storage.postgres.schema import connect, prepare_schema
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.test_postgres_nodes import start_node, wait_for
from kbroker.tests.integration.wire import Wire


async def _schema_with_a_lapsed_controller(url: str) -> None:
    conn = await connect(url)
    try:
        await prepare_schema(conn)
        await conn.execute("INSERT INTO controller_lease (node_id, epoch, lease_expires) "
                           "VALUES (7, 3, statement_timestamp() - interval '1 hour')")
    finally:
        await conn.close()


def test_a_node_names_itself_the_controller_until_one_is_elected(postgres, tmp_path):
    database = postgres.create_database()
    url = postgres.url(database)
    asyncio.run(_schema_with_a_lapsed_controller(url))
    lease = postgres.hold(database, "SELECT 1 FROM controller_lease")  # no node can take it meanwhile
    node = start_node(tmp_path / "node1", url, 1)
    try:
        wire = Wire(node.bootstrap)
        try:
            answer = wire.call(3, 12, MetadataRequest([], False, False, False))
        finally:
            wire.close()
        assert not node.events("controller_elected")  # the lease is still held
        assert [b.node_id for b in answer.brokers] == [1]
        assert answer.controller_id == 1
        # librdkafka's admin client is answered (it waited for a controller before)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("early", 1, 1)])["early"].result(30)
        lease.release()
        wait_for(lambda: node.events("controller_elected"), "the node takes the controller lease", timeout=30)
    finally:
        lease.release()
        node.kill()
