"""Broker leases, the controller lease, the controller's moves and producer-id blocks over a real
PostgreSQL (broker/storage/postgres/membership.py, issue 44), and the zombie: a leader that stops
renewing (as a SIGSTOPped process) loses its partitions once its lease expires by PostgreSQL's clock,
fences itself by its own, and the append it had in flight is refused by the database; the stored
batches have no gap and no overlap."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.postgres import metadata
from kbroker.broker.storage.postgres.log import PostgresLog
from kbroker.broker.storage.postgres.membership import (BrokerLease, ControllerLease, NodeIdTaken, ProducerIdBlocks,
                                                        controller_of, live_brokers, move_lost_leaders)
from kbroker.broker.storage.postgres.schema import connect, prepare_schema
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.tests.integration.test_postgres_log import append, audit, client_batch

LEASE_MS = 1500
WAIT_S = 30


class ManualClock:
    """A node's monotonic clock, moved by the test (a paused process's clock runs on; the test
    decides when the node looks at it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def url(postgres):
    url = postgres.url(postgres.create_database())
    conn = await connect(url)
    await prepare_schema(conn)
    await conn.close()
    return url


async def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        await asyncio.sleep(0.1)


async def test_a_node_id_is_one_live_process_and_leases_expire_by_the_databases_clock(url):
    conns = [await connect(url) for _ in range(3)]
    clock = ManualClock()
    first = BrokerLease(conns[0], 1, {"PLAINTEXT": "127.0.0.1:9001"}, lease_ms=LEASE_MS, monotonic=clock)
    await first.register()
    second = BrokerLease(conns[1], 2, {"PLAINTEXT": "127.0.0.1:9002"}, lease_ms=LEASE_MS)
    await second.register()
    assert [(b.node_id, b.endpoints["PLAINTEXT"]) for b in await live_brokers(conns[2])] == [
        (1, "127.0.0.1:9001"), (2, "127.0.0.1:9002")]
    with pytest.raises(NodeIdTaken):
        await BrokerLease(conns[2], 1, {"PLAINTEXT": "127.0.0.1:9009"}, lease_ms=LEASE_MS).register()
    # node 1's own clock fences it once a lease's time passed since its last renewal was sent
    assert not first.fenced
    clock.now += LEASE_MS / 1000
    assert first.fenced
    assert await first.renew() and not first.fenced
    # it stops renewing: PostgreSQL's clock expires it; then the id may be taken over, and the old
    # holder's renewal finds it lost, fenced for good
    await wait_until(lambda: _alive(conns[2], 1, False), "node 1's lease expires")
    usurper = BrokerLease(conns[2], 1, {"PLAINTEXT": "127.0.0.1:9009"}, lease_ms=LEASE_MS)
    await usurper.register()
    assert not await first.renew() and first.fenced and first.lost
    for conn in conns:
        await conn.close()


async def _alive(conn, node_id: int, alive: bool) -> bool:
    return (node_id in {b.node_id for b in await live_brokers(conn)}) == alive


async def test_one_controller_at_a_time_and_a_new_one_bumps_the_epoch(url):
    conns = [await connect(url) for _ in range(2)]
    one = ControllerLease(conns[0], 1, lease_ms=LEASE_MS)
    two = ControllerLease(conns[1], 2, lease_ms=LEASE_MS)
    assert await one.acquire_or_renew() and one.held and one.epoch == 1
    assert not await two.acquire_or_renew() and not two.held
    assert await one.acquire_or_renew() and one.epoch == 1
    assert await controller_of(conns[1]) == 1
    await wait_until(lambda: _controller_is(conns[1], -1), "the controller lease expires")
    assert await two.acquire_or_renew() and two.epoch == 2
    assert not await one.acquire_or_renew()
    for conn in conns:
        await conn.close()


async def _controller_is(conn, node: int) -> bool:
    return await controller_of(conn) == node


async def test_producer_id_blocks_never_overlap_across_nodes(url):
    conns = [await connect(url) for _ in range(2)]
    blocks = [ProducerIdBlocks(conns[0], 1, block=10), ProducerIdBlocks(conns[1], 2, block=10)]
    ids = await asyncio.gather(*(b.allocate() for _ in range(25) for b in blocks))
    assert len(set(ids)) == 50
    for conn in conns:
        await conn.close()


async def test_a_paused_leader_loses_its_partitions_and_its_in_flight_append_is_fenced(url):
    admin = await connect(url)
    await metadata.create_topic(admin, "zombie", {p: [1, 2] for p in range(3)})
    clock1 = ManualClock()
    lease_conn1, lease_conn2, log_conn1, log_conn2 = [await connect(url) for _ in range(4)]
    lease1 = BrokerLease(lease_conn1, 1, {"PLAINTEXT": "127.0.0.1:9001"}, lease_ms=LEASE_MS, monotonic=clock1)
    lease2 = BrokerLease(lease_conn2, 2, {"PLAINTEXT": "127.0.0.1:9002"}, lease_ms=LEASE_MS)
    await lease1.register()
    await lease2.register()
    node1 = PostgresLog(log_conn1, 1, fenced=lambda: lease1.fenced)
    node2 = PostgresLog(log_conn2, 2, fenced=lambda: lease2.fenced)
    stores1 = [await node1.open_partition("zombie", p, LogConfig()) for p in range(3)]
    producer = 77
    acked = [append(store, client_batch(producer + p, 0, [b"before"])) for p, store in enumerate(stores1)]
    await asyncio.wait_for(asyncio.gather(*(r.wait_durable() for r in acked)), WAIT_S)

    # The controller (node 2, on `admin`) holds partition 0's row while node 1's round is under way:
    # node 1's transaction waits, as a leader paused (SIGSTOP) between its append and its COMMIT,
    # and node 1 stops renewing its lease meanwhile.
    controller = ControllerLease(lease_conn2, 2, lease_ms=LEASE_MS)
    assert await controller.acquire_or_renew()
    async with admin.transaction():
        await admin.execute("SELECT 1 FROM partitions WHERE topic = 'zombie' AND partition = 0 FOR UPDATE")
        in_flight = append(stores1[0], client_batch(producer, 1, [b"in-flight"]))
        await asyncio.sleep(0.2)
        assert not in_flight.durable().done()  # type: ignore[union-attr]

        async def moved() -> bool:
            await lease2.renew()
            return bool(await move_lost_leaders(admin))

        await wait_until(moved, "node 2's controller moves node 1's partitions")
    rows = [await metadata.partition_row(admin, "zombie", p) for p in range(3)]
    assert [(r.leader, r.leader_epoch) for r in rows] == [(2, 1)] * 3
    # the controller committed: node 1's held transaction goes on, and the database refuses it
    with pytest.raises(KafkaError) as fenced:
        await asyncio.wait_for(in_flight.wait_durable(), WAIT_S)
    assert fenced.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # node 1's own clock has run past its lease too: it refuses new appends itself
    clock1.now += LEASE_MS / 1000
    with pytest.raises(KafkaError) as self_fenced:
        append(stores1[1], client_batch(producer + 1, 1, [b"refused"]))
    assert self_fenced.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    # node 2 leads now: the producer's retry of its refused batch is appended once, after the rest
    stores2 = [await node2.open_partition("zombie", p, LogConfig()) for p in range(3)]
    retried = append(stores2[0], client_batch(producer, 1, [b"in-flight"]))
    await asyncio.wait_for(retried.wait_durable(), WAIT_S)
    assert (retried.base_offset, retried.duplicate) == (1, False)
    assert await audit(admin, "zombie", 3) == {0: 2, 1: 1, 2: 1}
    for node in (node1, node2):
        await node.close()
    for conn in (lease_conn1, lease_conn2, log_conn1, log_conn2, admin):
        await conn.close()
