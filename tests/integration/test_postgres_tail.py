"""A partition's leader over a real PostgreSQL keeps only the tail of its log in memory (issue 44;
broker/storage/postgres/batch_index.py, memory.py): a log many times the tail is read back from the
database in full and in order, on its leader and on the next one; readers of one range share one
query; ListOffsets by timestamp, retention, idempotence and the transactions' state are right
without the old batches' bytes in memory. Node processes under real clients:
test_postgres_tail_nodes.py."""

from __future__ import annotations

import asyncio
import hashlib
import time

import asyncpg
import pytest

from kbroker.broker.storage.api import AppendOrigin, Isolation
from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.postgres import metadata
from kbroker.broker.storage.postgres.log import PostgresLog
from kbroker.broker.storage.postgres.memory import ReadCache, TailBudget
from kbroker.broker.storage.postgres.compaction import compact_store
from kbroker.broker.storage.postgres.retention import apply_retention
from kbroker.broker.storage.postgres.schema import connect
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.tests.integration.test_postgres_log import WAIT_S, append, audit, client_batch, database  # noqa: F401

TAIL = 64 * 1024
RECORD = 4000
PRODUCER = 7000


async def node(url: str, node_id: int) -> PostgresLog:
    plog = PostgresLog(await connect(url), node_id, budget=TailBudget(TAIL, 4 * TAIL), cache=ReadCache(4 * TAIL))
    plog.reader = await asyncpg.create_pool(url, min_size=1, max_size=3)
    assert plog.cache.max_bytes == 4 * TAIL  # the node's settings, not the defaults
    return plog


async def stop(*nodes: PostgresLog) -> None:
    for plog in nodes:
        await plog.close()
        await plog.conn.close()
        await plog.reader.close()


def value(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).digest() * (RECORD // 32)


async def read_all(store, offset: int = 0) -> list[bytes]:
    """What a consumer reads from `offset` to the high watermark, each read prepared as Fetch does."""
    values = []
    while offset < store.high_watermark:
        wait = store.prepare_read(offset, 3 * RECORD)
        if wait is not None:
            await asyncio.wait_for(wait, WAIT_S)
        chunk = store.read(offset, 3 * RECORD, Isolation.HIGH_WATERMARK)
        assert chunk, f"nothing read at {offset} after the read was prepared"
        for header, records in rb.decode_batches(chunk):
            values += [r.value for r in records if r.offset >= offset]
            offset = header.next_offset
    return values


async def test_a_log_many_times_the_tail_is_read_from_the_database_in_full_on_each_leader(database):
    url, admin = database
    await metadata.create_topic(admin, "big", {0: [1, 2]})
    node1, node2 = await node(url, 1), await node(url, 2)
    store = await node1.open_partition("big", 0, LogConfig())
    count = 100  # 100 batches of one 4 KB record: six times the tail
    first_ms = int(time.time() * 1000)
    for i in range(count):
        result = append(store, client_batch(PRODUCER, i, [value(i)]))
        await asyncio.wait_for(result.wait_durable(), WAIT_S)
    batches = store.batches
    assert store.size_bytes > 6 * TAIL and store.high_watermark == count
    assert batches.tail_bytes <= TAIL and batches.tail_from > count // 2  # the old bytes are not held
    assert store.read(0, RECORD, Isolation.HIGH_WATERMARK) == b""  # not prepared: not in memory
    assert await read_all(store) == [value(i) for i in range(count)]
    assert node1.cache.bytes <= node1.cache.max_bytes

    # two readers of the same old offsets at once: one query
    node1.cache.drop_partition(batches.cache_key)
    reads = node1.reads
    first, second = store.prepare_read(0, RECORD), store.prepare_read(0, RECORD)
    assert first is second and first is not None
    await asyncio.wait_for(first, WAIT_S)
    assert node1.reads == reads + 1 and store.read(0, RECORD, Isolation.HIGH_WATERMARK)

    # ListOffsets by timestamp reaches an old batch through the same reads
    node1.cache.drop_partition(batches.cache_key)
    wait = store.prepare_timestamp_search(first_ms, 0)
    assert wait is not None
    await asyncio.wait_for(wait, WAIT_S)
    assert store.offset_for_timestamp(first_ms, 0, None)[0] == 0
    wait = store.prepare_timestamp_search(None, 0)
    if wait is not None:
        await asyncio.wait_for(wait, WAIT_S)
    # the first record of the largest timestamp: the newest batches, which may share their millisecond
    newest, newest_ms = store.max_timestamp_offset(None)
    assert newest > count // 2 and newest_ms >= first_ms
    wait = store.prepare_timestamp_search(newest_ms, 0)
    if wait is not None:
        await asyncio.wait_for(wait, WAIT_S)
    assert store.offset_for_timestamp(newest_ms, 0, None)[0] == newest

    # the next leader opens with the index and the tail only, and serves the whole log
    assert await metadata.elect(admin, "big", 0, 2) == 1
    new = await node2.open_partition("big", 0, LogConfig())
    assert (new.log_end_offset, new.size_bytes) == (count, store.size_bytes)
    assert new.batches.tail_bytes <= TAIL
    assert await read_all(new) == [value(i) for i in range(count)]
    retry = append(new, client_batch(PRODUCER, count - 1, [value(count - 1)]))  # idempotence from the headers
    assert retry.duplicate and retry.base_offset == count - 1

    # retention by size works from the index: the log start moves, the database deletes below it
    new.config = LogConfig.from_topic_configs({"retention.bytes": str(2 * TAIL)}, LogConfig())
    assert apply_retention([new], int(time.time() * 1000)) == 1
    start = new.log_start_offset
    assert start > count // 2 and new.size_bytes <= 2 * TAIL + RECORD * 2
    await asyncio.wait_for(new.durable_log_start(), WAIT_S)
    assert await admin.fetchval("SELECT min(base_offset) FROM batches WHERE topic = 'big'") == start
    assert await read_all(new, start) == [value(i) for i in range(start, count)]
    await stop(node1, node2)


async def test_the_next_leader_rebuilds_the_transactions_from_the_stored_markers(database):
    url, admin = database
    await metadata.create_topic(admin, "txn", {0: [1, 2]})
    node1, node2 = await node(url, 1), await node(url, 2)
    store = await node1.open_partition("txn", 0, LogConfig())
    now = int(time.time() * 1000)
    for pid, commit in ((8000, False), (8001, True)):
        data = rb.encode_batch([rb.Record(0, now, None, b"x" * RECORD)], producer_id=pid, producer_epoch=0,
                               base_sequence=0, is_transactional=True)
        result = store.append(data, origin=AppendOrigin.CLIENT, now_ms=now, leader_epoch=0)
        marker = store.append_marker(pid, 0, commit, 0, now, 0)
        await asyncio.wait_for(asyncio.gather(result.wait_durable(), marker.wait_durable()), WAIT_S)
        store.complete_marker(pid, commit, marker.last_offset)
    for i in range(40):  # push the transactions below the tail
        await asyncio.wait_for(append(store, client_batch(PRODUCER, i, [value(i)])).wait_durable(), WAIT_S)
    assert store.last_stable_offset == store.high_watermark == 44
    assert store.aborted_transactions(0, 44) == [(8000, 0)]

    assert await metadata.elect(admin, "txn", 0, 2) == 1
    new = await node2.open_partition("txn", 0, LogConfig())
    assert new.batches.tail_from > 4  # the transactions' batches are not held: their markers were read
    assert new.last_stable_offset == new.high_watermark == 44  # no transaction left open
    assert new.aborted_transactions(0, 44) == [(8000, 0)]
    await stop(node1, node2)


async def test_a_failed_read_from_the_database_is_a_storage_error_for_that_read(database):
    url, admin = database
    await metadata.create_topic(admin, "lost", {0: [1]})
    node1 = await node(url, 1)
    store = await node1.open_partition("lost", 0, LogConfig())
    for i in range(40):
        await asyncio.wait_for(append(store, client_batch(PRODUCER, i, [value(i)])).wait_durable(), WAIT_S)
    await node1.reader.close()  # the node's pool is gone (the database unreachable)
    wait = store.prepare_read(0, RECORD)
    assert wait is not None
    await asyncio.wait_for(wait, WAIT_S)  # resolved: the failure is the read's to say
    with pytest.raises(KafkaError) as failed:
        store.read(0, RECORD, Isolation.HIGH_WATERMARK)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert store.read(0, RECORD, Isolation.HIGH_WATERMARK) == b""  # said once; the client retries
    tail = store.read(39, RECORD, Isolation.HIGH_WATERMARK)  # the tail is served all the same
    assert [r.value for _, records in rb.decode_batches(tail) for r in records] == [value(39)]
    node1.reader = await asyncpg.create_pool(url, min_size=1, max_size=3)  # back: read again
    await asyncio.wait_for(store.prepare_read(0, RECORD), WAIT_S)
    assert store.read(0, RECORD, Isolation.HIGH_WATERMARK)
    await stop(node1)


async def test_a_topic_made_compact_is_read_back_whole_and_compacted(database):
    url, admin = database
    await metadata.create_topic(admin, "later", {0: [1]})
    node1 = await node(url, 1)
    store = await node1.open_partition("later", 0, LogConfig())
    now = int(time.time() * 1000)
    for i in range(40):  # four keys, ten values each
        data = rb.encode_batch([rb.Record(0, now, f"k{i % 4}".encode(), value(i))])
        await asyncio.wait_for(store.append(data, origin=AppendOrigin.CLIENT, now_ms=now,
                                            leader_epoch=0).wait_durable(), WAIT_S)
    assert not store.resident and store.batches.tail_from > 20
    store.config = LogConfig.from_topic_configs({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
                                                LogConfig())
    assert not store.resident and await compact_store(store, now) == 0  # not while a tail only
    assert await store.hold_whole(chunk_bytes=3 * RECORD)
    assert store.resident and store.batches.tail_bytes == store.size_bytes and node1.budget.partitions == 0
    assert await compact_store(store, now + 1) > 0
    await asyncio.sleep(0)
    survivors = [(r.key, r.value) for _, records in rb.decode_batches(store.read(0, 1 << 30, Isolation.LOG_END))
                 for r in records]
    assert survivors == [(f"k{i % 4}".encode(), value(i)) for i in range(36, 40)]
    await stop(node1)


@pytest.mark.parametrize("topic", ["compacted", "__consumer_offsets"])
async def test_compacted_and_coordinator_partitions_stay_whole_in_memory(database, topic):
    url, admin = database
    await metadata.create_topic(admin, topic, {0: [1]}, {"cleanup.policy": "compact"} if topic == "compacted" else {})
    node1 = await node(url, 1)
    config = LogConfig.from_topic_configs({"cleanup.policy": "compact"}, LogConfig())
    store = await node1.open_partition(topic, 0, config if topic == "compacted" else LogConfig())
    for i in range(40):
        await asyncio.wait_for(append(store, client_batch(-1, -1, [value(i)])).wait_durable(), WAIT_S)
    assert store.resident and store.batches.tail_bytes == store.size_bytes > 2 * TAIL
    assert len(list(rb.decode_batches(store.read(0, 1 << 30, Isolation.LOG_END)))) == 40  # synchronous, as replay reads
    store.config = LogConfig()  # cleanup.policy delete from now on (a coordinator's partition stays whole)
    assert store.resident is (topic == "__consumer_offsets")
    if not store.resident:
        assert store.batches.tail_bytes <= TAIL and node1.budget.partitions == 1
        assert await read_all(store) == [value(i) for i in range(40)]
    await stop(node1)
