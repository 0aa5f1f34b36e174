"""Configs changed on one node of a cluster over PostgreSQL are in force on the others at once (issue 44):
the write notifies the nodes (LISTEN/NOTIFY, broker/storage/postgres/notify.py) as it commits, and the
poll (`--cluster-poll-ms`) is only the safety net for a notification lost while a node was not listening.

Here the poll is ten minutes, so what the nodes do within the test's bounded wait they did because they
were told: kafka-configs (Kafka 4.4's ConfigCommand) through node 1 changes the cluster-wide
`message.max.bytes`, then a topic's `max.message.bytes`; nodes 2 and 3 describe each change, and their
leaders refuse (then accept) a record of 5,000 bytes accordingly."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.cluster_scenarios import create_topic, leaders
from kbroker.tests.integration.test_postgres_admin import DYNAMIC_DEFAULT, broker_config, described
from kbroker.tests.integration.test_postgres_nodes import running_nodes, wait_for

POLL_MS = 600_000  # the safety net's poll: never within this test
WAIT_S = 30  # a bounded wait for what a notification brings (not a timing assert)


@contextmanager
def notifications(url: str) -> Iterator[list[str]]:
    """The payloads NOTIFYed on the nodes' channel while inside, as a node's listener receives them."""
    import asyncpg

    from kbroker.broker.storage.postgres.notify import CHANNEL

    seen: list[str] = []
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-listener", daemon=True)
    thread.start()

    async def listen():
        conn = await asyncpg.connect(url)
        await conn.add_listener(CHANNEL, lambda _conn, _pid, _channel, payload: seen.append(payload))
        return conn

    conn = asyncio.run_coroutine_threadsafe(listen(), loop).result(WAIT_S)
    try:
        yield seen
    finally:
        asyncio.run_coroutine_threadsafe(conn.close(), loop).result(WAIT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT_S)
        loop.close()


def kafka_configs(broker: BrokerProcess, *args: str) -> str:
    from kbroker.tests.reference.kafka import require_kafka_libs
    from kbroker.tests.reference.pair import CONFIGS
    from kbroker.tests.reference.tool_runner import run_tool

    require_kafka_libs()
    out = run_tool(CONFIGS, "--bootstrap-server", broker.bootstrap, *args, timeout=120)
    assert out.returncode == 0, f"kafka-configs {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout


def produce_big(nodes: dict[int, BrokerProcess], topic: str, partitions: list[int]) -> dict[int, int]:
    """partition -> error code (0: appended) of one record of 5,000 bytes to each partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                         "retries": 0})
    codes: dict[int, int] = {}
    for partition in partitions:
        producer.produce(topic, b"x" * 5000, partition=partition,
                         on_delivery=lambda err, msg: codes.__setitem__(msg.partition(), err.code() if err else 0))
    producer.flush(WAIT_S)
    return codes


def test_configs_changed_through_one_node_are_in_force_on_the_others_before_any_poll(postgres, tmp_path):
    from confluent_kafka import KafkaError

    url = postgres.url(postgres.create_database())
    with running_nodes(url, tmp_path, "--cluster-poll-ms", str(POLL_MS)) as nodes, notifications(url) as told:
        topic = f"pushed-{uuid.uuid4().hex[:6]}"
        create_topic(nodes[1].bootstrap, topic, 3)
        wait_for(lambda: all(len(led := leaders(b.bootstrap, topic)) == 3 and all(p[0] >= 0 for p in led.values())
                             for b in nodes.values()), "every node knows the topic", WAIT_S)
        led = leaders(nodes[1].bootstrap, topic)
        others = sorted(p for p, (leader, *_rest) in led.items() if leader in (2, 3))
        assert {led[p][0] for p in others} == {2, 3}, led  # a partition led by each of nodes 2 and 3
        assert produce_big(nodes, topic, others) == {p: 0 for p in others}

        # the cluster-wide default, through node 1: the write notifies, nodes 2 and 3 describe and apply it
        kafka_configs(nodes[1], "--alter", "--entity-type", "brokers", "--entity-default",
                      "--add-config", "message.max.bytes=2000")
        wait_for(lambda: any(what.startswith("dynamic broker configs of the cluster") for what in told),
                 "the change of the cluster-wide defaults is notified", WAIT_S)
        wait_for(lambda: all(broker_config(nodes[n], str(n), "message.max.bytes") == ("2000", DYNAMIC_DEFAULT)
                             for n in (2, 3)), "nodes 2 and 3 report the new default", WAIT_S)
        wait_for(lambda: all(described(nodes[n], topic)["max.message.bytes"][0] == "2000" for n in (2, 3)),
                 "the topic's default follows on nodes 2 and 3", WAIT_S)
        assert produce_big(nodes, topic, others) == {p: KafkaError.MSG_SIZE_TOO_LARGE for p in others}

        # a topic's override, through node 1: the leaders on nodes 2 and 3 take the record again
        kafka_configs(nodes[1], "--alter", "--entity-type", "topics", "--entity-name", topic,
                      "--add-config", "max.message.bytes=100000")
        wait_for(lambda: all(described(nodes[n], topic)["max.message.bytes"] == ("100000", "DYNAMIC_TOPIC_CONFIG")
                             for n in (2, 3)), "nodes 2 and 3 describe the topic's override", WAIT_S)
        assert produce_big(nodes, topic, others) == {p: 0 for p in others}
        assert any(what == f"topic {topic}'s configs replaced" for what in told), told
