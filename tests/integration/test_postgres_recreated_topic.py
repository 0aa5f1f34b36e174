"""A topic deleted and created again under its name, learnt by a node in the middle of reading the
database (issue 44): the node's image is one snapshot, a state the database went through in its commit
order, so it never takes the new topic's partitions for the old topic's, and never opens (serves) a
partition of the new topic before its refresh has seen the old one go and told its deletion listeners
(whose offsets' tombstones are dispatched first: broker/coordinators/deleted_topics.py).

The race is made deterministic with a lock: the test holds `partitions` while the node's refresh has
read `topics` and waits for it; then, in the same transaction, the topic is deleted and created again
(led by this node now), and committed."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.postgres import metadata, topics
from kbroker.broker.storage.postgres.engine import PostgresEngine
from kbroker.broker.storage.postgres.log import PostgresLog
from kbroker.broker.storage.postgres.schema import application_name, connect
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.purgatory.clock import SystemClock
from kbroker.tests.integration.test_postgres_log import database  # noqa: F401 - the fixture

NODE = 1
WAIT_S = 30


async def test_a_refresh_is_one_snapshot_so_a_recreated_topic_is_served_only_after_its_deletion(database):  # noqa: F811
    url, admin = database
    old_id = await metadata.create_topic(admin, "reborn", {0: [2, NODE]})  # led by node 2
    name = application_name(NODE)
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2, server_settings={"application_name": name})
    plog = PostgresLog(await connect(url), NODE)
    engine = PostgresEngine(pool, plog, NODE, LogConfig(), SystemClock())
    deletions: list[dict] = []
    engine.deletion_listeners.append(lambda deleted: deletions.append(dict(deleted)))
    try:
        await engine.refresh()
        assert engine.topic("reborn").topic_id == old_id and engine.topic("reborn").leaders == {0: 2}
        assert engine.store("reborn", 0) is None

        racer = await connect(url)
        try:
            async with racer.transaction():
                await racer.execute("LOCK TABLE partitions IN ACCESS EXCLUSIVE MODE")
                refresh = asyncio.ensure_future(engine.refresh())
                deadline = time.monotonic() + WAIT_S
                while not await admin.fetchval(  # the refresh has read `topics` and waits for `partitions`
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
                        "AND wait_event_type = 'Lock' AND query LIKE '%FROM partitions%'", name):
                    assert time.monotonic() < deadline and not refresh.done(), "the refresh never waited"
                    await asyncio.sleep(0.05)
                await topics.delete_topic(racer, "reborn", old_id)
                new_id = await metadata.create_topic(racer, "reborn", {0: [NODE, 2]})  # led by this node
            await asyncio.wait_for(refresh, WAIT_S)
        finally:
            await racer.close()
        # the image is the state before the change, whole: the old topic, led by node 2, nothing opened
        assert engine.topic("reborn").topic_id == old_id and engine.topic("reborn").leaders == {0: 2}
        assert engine.store("reborn", 0) is None and deletions == []
        # and a partition is opened only as the topic the image has: the new one's is refused under the old id
        with pytest.raises(KafkaError) as refused:
            await plog.open_partition("reborn", 0, LogConfig(), topic_id=old_id)
        assert refused.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and engine.store("reborn", 0) is None

        # the next refresh (the change's notification brings it): the deletion is told, in the same step
        # as the image takes the new topic (no request comes between), whose partition is opened as its own
        await engine.refresh()
        assert deletions == [{"reborn": old_id}]
        assert engine.topic("reborn").topic_id == new_id and engine.topic("reborn").leaders == {0: NODE}
        store = engine.store("reborn", 0)
        assert store is not None and store.topic_id == new_id
    finally:
        await plog.close()
        await plog.conn.close()
        await pool.close()
