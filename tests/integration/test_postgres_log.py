"""The partition log over a real PostgreSQL (broker/storage/postgres/, issue 44): appends of a round
across partitions commit in one transaction and are acknowledged after it; a deposed leader's
appends insert nothing and fail NOT_LEADER_OR_FOLLOWER; the new leader reads the log and the
idempotent producers' state from the database; the stored batches have no gap and no overlap."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.broker.storage.api import AppendOrigin, Isolation
from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.postgres import metadata
from kbroker.broker.storage.postgres.log import PostgresLog
from kbroker.broker.storage.postgres.schema import connect, prepare_schema
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode, KafkaError

WAIT_S = 30


def client_batch(producer_id: int, sequence: int, values: list[bytes], *, epoch: int = 0) -> tuple[bytes, list]:
    now = int(time.time() * 1000)
    records = [rb.Record(offset=i, timestamp=now + i, key=None, value=v) for i, v in enumerate(values)]
    data = rb.encode_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    return data, rb.validate_produced_batches(data, single_batch=True)


def append(store, data_headers) -> object:
    data, headers = data_headers
    return store.append(data, origin=AppendOrigin.CLIENT, now_ms=int(time.time() * 1000),
                        leader_epoch=store.leader_epoch, headers=headers)


async def audit(conn, topic: str, partitions: int) -> dict[int, int]:
    """Per partition, the stored batches in offset order: each starts where the one before ended, and
    the partition's log_end is where the last ends. Returns the record count per partition."""
    counts = {}
    for p in range(partitions):
        rows = await conn.fetch("SELECT base_offset, last_offset, records FROM batches WHERE topic = $1 AND "
                                "partition = $2 ORDER BY base_offset", topic, p)
        expected = 0
        records = 0
        for row in rows:
            assert row["base_offset"] == expected, f"{topic}-{p}: gap or overlap at {row['base_offset']} (expected {expected})"
            header = rb.read_header(row["records"])
            assert (header.base_offset, header.next_offset - 1) == (row["base_offset"], row["last_offset"])
            expected = row["last_offset"] + 1
            records += header.records_count
        end = await conn.fetchval("SELECT log_end FROM partitions WHERE topic = $1 AND partition = $2", topic, p)
        assert end == expected, f"{topic}-{p}: log_end {end}, batches end at {expected}"
        counts[p] = records
    return counts


async def audit_epochs(conn, topic: str, partitions: int) -> None:
    """Per partition, every stored batch was written in the leader epoch in force at its offsets (the epoch
    history's term that holds its base offset): a deposed leader's append never landed after its
    successor's term began."""
    for p in range(partitions):
        terms = await metadata.epoch_history(conn, topic, p)
        rows = await conn.fetch("SELECT base_offset, leader_epoch FROM batches WHERE topic = $1 AND partition = $2",
                                topic, p)
        for row in rows:
            epoch = max((e for e, start in terms if start <= row["base_offset"]), default=None)
            assert row["leader_epoch"] == epoch, (
                f"{topic}-{p}: the batch at {row['base_offset']} is of epoch {row['leader_epoch']}, the term there "
                f"is {epoch} (epoch history {terms})")


def audit_database(url: str, topic: str, partitions: int) -> dict[int, int]:
    """`audit` and `audit_epochs` on a connection of their own, from synchronous code (the tests over
    node processes)."""
    async def audited() -> dict[int, int]:
        conn = await connect(url)
        try:
            await audit_epochs(conn, topic, partitions)
            return await audit(conn, topic, partitions)
        finally:
            await conn.close()

    return asyncio.run(audited())


@pytest.fixture
async def database(postgres):
    url = postgres.url(postgres.create_database())
    conn = await connect(url)
    await prepare_schema(conn)
    yield url, conn
    await conn.close()


async def test_a_round_commits_every_partitions_appends_in_one_transaction_then_acknowledges(database):
    url, admin = database
    await metadata.create_topic(admin, "orders", {0: [1, 2], 1: [1, 2], 2: [1, 2]})
    node1 = PostgresLog(await connect(url), 1)
    stores = [await node1.open_partition("orders", p, LogConfig()) for p in range(3)]
    results = [append(store, client_batch(-1, -1, [f"{p}-{i}".encode() for i in range(5)]))
               for p, store in enumerate(stores) for _ in range(2)]
    assert all(store.high_watermark == 0 and store.log_end_offset == 10 for store in stores)
    # nothing is readable by consumers before the commit
    assert stores[0].read(0, 1 << 20, Isolation.HIGH_WATERMARK) == b""
    await asyncio.wait_for(asyncio.gather(*(r.wait_durable() for r in results)), WAIT_S)
    assert node1.rounds == 1  # six appends, three partitions, one transaction
    assert [store.high_watermark for store in stores] == [10, 10, 10]
    assert await audit(admin, "orders", 3) == {0: 10, 1: 10, 2: 10}
    read = stores[1].read(0, 1 << 20, Isolation.HIGH_WATERMARK)
    values = [r.value for _, records in rb.decode_batches(read) for r in records]
    assert values == [f"1-{i}".encode() for i in range(5)] * 2
    await node1.close()
    await node1.conn.close()


async def test_a_deposed_leader_inserts_nothing_and_the_new_leader_keeps_idempotence(database):
    url, admin = database
    await metadata.create_topic(admin, "payments", {0: [1, 2]})
    node1 = PostgresLog(await connect(url), 1)
    node2 = PostgresLog(await connect(url), 2)
    old = await node1.open_partition("payments", 0, LogConfig())
    producer = 4000
    first = append(old, client_batch(producer, 0, [b"a", b"b"]))
    second = append(old, client_batch(producer, 2, [b"c"]))
    await asyncio.wait_for(asyncio.gather(first.wait_durable(), second.wait_durable()), WAIT_S)
    # a retry on the same leader is answered with the stored offsets, nothing appended
    retry = append(old, client_batch(producer, 2, [b"c"]))
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (2, 2)

    # node 2 is elected (the controller's move: epoch + 1, one transaction) while node 1 still
    # thinks it leads: its next append is fenced by the database
    assert await metadata.elect(admin, "payments", 0, 2) == 1
    zombie = append(old, client_batch(producer, 3, [b"lost"]))
    with pytest.raises(KafkaError) as fenced:
        await asyncio.wait_for(zombie.wait_durable(), WAIT_S)
    assert fenced.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert old.closed and old.log_end_offset == 3
    with pytest.raises(KafkaError) as again:
        append(old, client_batch(producer, 3, [b"lost"]))
    assert again.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert await audit(admin, "payments", 1) == {0: 3}

    new = await node2.open_partition("payments", 0, LogConfig())
    assert (new.log_end_offset, new.high_watermark, new.leader_epoch, new.latest_epoch()) == (3, 3, 1, 1)
    assert new.epoch_end_offset(0) == (0, 3)
    # the producer's retry of its last acknowledged batch reaches the new leader: the same offsets
    retry = append(new, client_batch(producer, 2, [b"c"]))
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (2, 2)
    # a sequence gap is refused; the next batch in sequence is appended after the stored ones
    with pytest.raises(KafkaError) as gap:
        append(new, client_batch(producer, 5, [b"x"]))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    later = append(new, client_batch(producer, 3, [b"d"]))
    await asyncio.wait_for(later.wait_durable(), WAIT_S)
    assert (later.base_offset, new.high_watermark) == (3, 4)
    assert await audit(admin, "payments", 1) == {0: 4}
    values = [r.value for _, records in rb.decode_batches(new.read(0, 1 << 20, Isolation.HIGH_WATERMARK))
              for r in records]
    assert values == [b"a", b"b", b"c", b"d"]
    for node in (node1, node2):
        await node.close()
        await node.conn.close()


async def test_a_lost_database_connection_takes_the_round_offline_and_acknowledges_nothing(database):
    url, admin = database
    await metadata.create_topic(admin, "events", {0: [1]})
    node1 = PostgresLog(await connect(url), 1)
    store = await node1.open_partition("events", 0, LogConfig())
    await node1.conn.close()  # as a dropped connection
    result = append(store, client_batch(-1, -1, [b"x"]))
    with pytest.raises(KafkaError) as failed:
        await asyncio.wait_for(result.wait_durable(), WAIT_S)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert store.offline is not None and store.high_watermark == 0 and store.log_end_offset == 0
    assert await audit(admin, "events", 1) == {0: 0}
