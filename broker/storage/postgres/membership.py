"""Who is in the cluster and who decides (issue 44): broker leases, the controller lease, the
controller's moves of a lost broker's partitions, and producer-id blocks; every expiry by PostgreSQL's
clock, never a node's: statement_timestamp(), which is now() for a statement alone and, unlike now()
(fixed at a transaction's start), moves on within a transaction that holds rows a while.

* A broker registers its node id with a random incarnation and a lease (statement_timestamp() + LEASE), and renews it
  about every second. A node id whose lease has not expired is refused to a second process. A node
  trusts its lease only until its own monotonic clock says it may have expired: measured from just
  *before* the renewal it sent, so the node's view always ends before PostgreSQL's (clock rates
  being alike). Past that the node is `fenced`: it stops appending (log.py) and answering as leader
  or coordinator, before anyone else may have been given its partitions.
* One controller at a time holds the controller lease (renewed the same way; a new holder bumps its
  epoch). The controller moves every partition whose leader's lease has expired to its first replica
  whose broker is alive (none: no leader), epoch + 1, one transaction each (metadata.elect, which
  checks the epoch it read, so two controllers racing cannot both move a partition). Every
  leader.imbalance.check.interval.seconds it also moves each partition whose preferred (first)
  replica is live but does not lead back to it (`move_to_preferred`), as Kafka's controller does.
* Producer ids come in blocks, each a row, the next one after the highest, under an advisory lock:
  an id is never handed out twice in the cluster.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import structlog

from .metadata import NO_LEADER, elect
from .notify import notify
from .schema import application_name

log = structlog.get_logger("kbroker.storage.postgres")

LEASE_MS = 5_000  # a broker's and the controller's lease
RENEW_EVERY_S = 1.0
PRODUCER_ID_BLOCK = 1000
ELECT_LOCK_TIMEOUT_MS = 1_000  # an election waits this long for a partition's row (then see end_sessions_of)
PRODUCER_IDS_LOCK = 0x6B62726F6B6570  # pg_advisory_xact_lock key for "allocating a producer-id block"


class NodeIdTaken(Exception):
    """Another live process holds the node id (its lease has not expired)."""


@dataclass(frozen=True, slots=True)
class LiveBroker:
    node_id: int
    endpoints: dict[str, str]  # listener name -> host:port


class BrokerLease:
    """This node's registration: held while renewed, fenced by its own monotonic clock."""

    def __init__(self, conn: Any, node_id: int, endpoints: dict[str, str], *, lease_ms: int = LEASE_MS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.conn = conn
        self.node_id = node_id
        self.endpoints = endpoints
        self.lease_ms = lease_ms
        self.incarnation = uuid.uuid4()
        self._monotonic = monotonic
        self._valid_until = 0.0  # by the monotonic clock
        self.lost = False  # another process took the node id over: fenced for good

    @property
    def fenced(self) -> bool:
        return self.lost or self._monotonic() >= self._valid_until

    async def register(self) -> None:
        """Take the node id (NodeIdTaken when a live process holds it)."""
        sent = self._monotonic()
        row = await self.conn.fetchrow(
            "INSERT INTO brokers (node_id, endpoints, incarnation, lease_expires) "
            "VALUES ($1, $2::jsonb, $3, statement_timestamp() + $4 * interval '1 millisecond') "
            "ON CONFLICT (node_id) DO UPDATE SET endpoints = EXCLUDED.endpoints, incarnation = EXCLUDED.incarnation, "
            "lease_expires = EXCLUDED.lease_expires WHERE brokers.lease_expires < statement_timestamp() "
            "RETURNING node_id", self.node_id, json.dumps(self.endpoints), self.incarnation, self.lease_ms)
        if row is None:
            expires = await self.conn.fetchval("SELECT lease_expires FROM brokers WHERE node_id = $1", self.node_id)
            raise NodeIdTaken(f"node id {self.node_id} is held by a live broker (its lease runs to {expires})")
        self._valid_until = sent + self.lease_ms / 1000
        await notify(self.conn, f"broker {self.node_id} registered")
        log.info("broker_registered", node_id=self.node_id, incarnation=str(self.incarnation), lease_ms=self.lease_ms)

    async def renew(self) -> bool:
        """Extend the lease; False (and fenced for good) when another process took the node id."""
        if self.lost:
            return False
        sent = self._monotonic()
        renewed = await self.conn.fetchval(
            "UPDATE brokers SET lease_expires = statement_timestamp() + $3 * interval '1 millisecond' "
            "WHERE node_id = $1 AND incarnation = $2 RETURNING 1", self.node_id, self.incarnation, self.lease_ms)
        if renewed is None:
            self.lost = True
            log.error("broker_lease_lost", node_id=self.node_id, detail="another process registered this node id")
            return False
        self._valid_until = sent + self.lease_ms / 1000
        return True

    async def release(self) -> None:
        """A clean stop: the lease ends now, so the controller moves the partitions at once."""
        await self.conn.execute("UPDATE brokers SET lease_expires = statement_timestamp() - interval '1 millisecond' "
                                "WHERE node_id = $1 AND incarnation = $2", self.node_id, self.incarnation)
        self.lost = True
        await notify(self.conn, f"broker {self.node_id} left")


async def live_brokers(conn: Any) -> list[LiveBroker]:
    rows = await conn.fetch("SELECT node_id, endpoints FROM brokers WHERE lease_expires > statement_timestamp() ORDER BY node_id")
    return [LiveBroker(row["node_id"], json.loads(row["endpoints"])) for row in rows]


class ControllerLease:
    """The controller's lease: held by one node at a time; `epoch` grows with every new holder."""

    def __init__(self, conn: Any, node_id: int, *, lease_ms: int = LEASE_MS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.conn = conn
        self.node_id = node_id
        self.lease_ms = lease_ms
        self._monotonic = monotonic
        self._valid_until = 0.0
        self.epoch = -1

    @property
    def held(self) -> bool:
        return self._monotonic() < self._valid_until

    async def acquire_or_renew(self) -> bool:
        """Take the lease if it is free or expired, renew it if ours; True while this node holds it."""
        sent = self._monotonic()
        epoch = await self.conn.fetchval(
            "INSERT INTO controller_lease (node_id, epoch, lease_expires) "
            "VALUES ($1, 1, statement_timestamp() + $2 * interval '1 millisecond') "
            "ON CONFLICT (one) DO UPDATE SET node_id = $1, lease_expires = EXCLUDED.lease_expires, "
            "epoch = controller_lease.epoch + CASE WHEN controller_lease.node_id = $1 THEN 0 ELSE 1 END "
            "WHERE controller_lease.node_id = $1 OR controller_lease.lease_expires < statement_timestamp() "
            "RETURNING epoch", self.node_id, self.lease_ms)
        if epoch is None:
            self._valid_until = 0.0
            return False
        elected, self.epoch = epoch != self.epoch, epoch
        self._valid_until = sent + self.lease_ms / 1000
        if elected:
            log.info("controller_elected", node_id=self.node_id, controller_epoch=epoch)
            await notify(self.conn, f"controller {self.node_id} in epoch {epoch}")
        return True


async def controller_of(conn: Any) -> int:
    """The node holding an unexpired controller lease, NO_LEADER when none does."""
    node = await conn.fetchval("SELECT node_id FROM controller_lease WHERE lease_expires > statement_timestamp()")
    return NO_LEADER if node is None else node


async def move_lost_leaders(conn: Any) -> list[tuple[str, int, int, int]]:
    """The controller's pass: each partition led by a broker whose lease expired (or by none) elects
    its first replica whose broker is alive, one transaction each. A partition none of whose replicas
    is alive goes to a live broker all the same (the log is the database's: any node can lead it),
    taking the brokers in turn, which becomes its first replica. Returns (topic, partition, new
    leader, new epoch) of the moves made."""
    import asyncpg

    brokers = [b.node_id for b in await live_brokers(conn)]
    rows = await conn.fetch(
        "SELECT p.topic, p.partition, p.leader, p.leader_epoch, p.replicas, "
        "ARRAY(SELECT r FROM unnest(p.replicas) WITH ORDINALITY AS u(r, i) "
        "      WHERE r IN (SELECT node_id FROM brokers WHERE lease_expires > statement_timestamp()) ORDER BY i) AS alive "
        "FROM partitions p WHERE p.leader NOT IN (SELECT node_id FROM brokers WHERE lease_expires > statement_timestamp()) "
        "ORDER BY p.topic, p.partition")
    moved = []
    orphans = 0
    for row in rows:
        alive = list(row["alive"])
        replicas = None
        if alive:
            new = alive[0]
        elif brokers:
            new = brokers[orphans % len(brokers)]
            orphans += 1
            replicas = [new, *(r for r in row["replicas"] if r != new)]
        else:
            new = NO_LEADER
        if new == row["leader"]:
            continue  # no leader, and still no broker alive
        epoch = None
        for attempt in range(2):
            try:
                epoch = await elect(conn, row["topic"], row["partition"], new, expected_epoch=row["leader_epoch"],
                                    replicas=replicas, lock_timeout_ms=ELECT_LOCK_TIMEOUT_MS)
                break
            except asyncpg.LockNotAvailableError:
                # its row held past the timeout: by a round the lost leader left open (cut off, paused)?
                if attempt == 0 and await end_sessions_of(conn, {row["leader"]}):
                    continue
                log.warning("leader_move_waiting", topic=row["topic"], partition=row["partition"],
                            previous_leader=row["leader"], detail="the partition's row is locked by a session")
                break
        if epoch is not None:
            log.info("leader_moved", topic=row["topic"], partition=row["partition"], leader=new,
                     previous_leader=row["leader"], leader_epoch=epoch, reason="leader's lease expired")
            moved.append((row["topic"], row["partition"], new, epoch))
    return moved


async def leaderships(conn: Any) -> tuple[list[tuple[tuple[str, int, int], int, list[int]]], set[int]]:
    """What the controller's preferred-leader check reads in one statement's snapshot: each partition as
    ((topic, partition, leader epoch), leader, replicas), and the brokers whose lease is live."""
    rows = await conn.fetch(
        "SELECT topic, partition, leader, leader_epoch, replicas, "
        "ARRAY(SELECT node_id FROM brokers WHERE lease_expires > statement_timestamp()) AS live "
        "FROM partitions ORDER BY topic, partition")
    live = set(rows[0]["live"]) if rows else set()
    return [((r["topic"], r["partition"], r["leader_epoch"]), r["leader"], list(r["replicas"])) for r in rows], live


async def move_to_preferred(conn: Any, moves: list[tuple[tuple[str, int, int], int]]) -> list[tuple[str, int, int, int]]:
    """The controller's preferred-leader elections (auto.leader.rebalance.enable): each ((topic,
    partition, epoch read), preferred replica) to its preferred replica, epoch + 1, one transaction
    each, conditional on the epoch read (which names its leader: a partition moved since is left for
    the next check), and only while that replica's lease is live. A partition whose row a live
    leader's round holds past ELECT_LOCK_TIMEOUT_MS waits for the next check (its sessions are not
    ended: that leader is alive). Returns (topic, partition, new leader, new epoch) of the moves made."""
    import asyncpg

    moved = []
    for (topic, partition, epoch), preferred in moves:
        try:
            new_epoch = await elect(conn, topic, partition, preferred, expected_epoch=epoch,
                                    lock_timeout_ms=ELECT_LOCK_TIMEOUT_MS, live_leader=True)
        except asyncpg.LockNotAvailableError:
            log.info("leader_move_waiting", topic=topic, partition=partition, leader=preferred,
                     detail="the partition's row is held by its leader's round: the next check tries again")
            continue
        if new_epoch is not None:
            log.info("leader_moved", topic=topic, partition=partition, leader=preferred, leader_epoch=new_epoch,
                     reason="preferred leader")
            moved.append((topic, partition, preferred, new_epoch))
    return moved


async def end_sessions_of(conn: Any, nodes: set[int]) -> int:
    """End the sessions of brokers whose lease expired that hold a write lock on `partitions` (an open
    round's), when an election waited ELECT_LOCK_TIMEOUT_MS for one of their rows. A node cut off by the
    network (or paused) can leave a round's transaction open, and its partitions' rows locked, until
    PostgreSQL's TCP gives up on the peer (minutes to hours): no election could take those rows
    meanwhile. Ended, the transaction rolls back (nothing it had in flight commits), and the node, fenced
    by its own clock already, connects again when it can. A node's other sessions are left alone (one
    handing its partitions over in a controlled shutdown goes on with its own). Returns how many were
    ended (0 also when this role may not signal them: a role may end its own sessions, or with
    pg_signal_backend any non-superuser's)."""
    import asyncpg

    if not nodes:
        return 0
    try:
        ended = await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid, 1000)) FROM pg_stat_activity a "
            "WHERE a.datname = current_database() AND a.application_name = ANY($1::text[]) "
            "AND a.pid <> pg_backend_pid() AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted "
            "AND l.relation = 'partitions'::regclass AND l.mode = 'RowExclusiveLock')",
            [application_name(n) for n in sorted(nodes)])
    except asyncpg.PostgresError as exc:
        log.warning("lost_broker_sessions_not_ended", nodes=sorted(nodes), error=repr(exc))
        return 0
    if ended:
        log.info("lost_broker_sessions_ended", nodes=sorted(nodes), sessions=ended)
    return ended


async def take_producer_id_block(conn: Any, node_id: int, size: int = PRODUCER_ID_BLOCK) -> int:
    """The first id of a new block of `size` ids for `node_id`, the next after every block handed out."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", PRODUCER_IDS_LOCK)
        return await conn.fetchval(
            "INSERT INTO producer_id_blocks (first_id, size, node_id) "
            "SELECT coalesce(max(first_id + size), 0), $1, $2 FROM producer_id_blocks RETURNING first_id",
            size, node_id)


class ProducerIdBlocks:
    """Producer ids for this node, a block of the cluster's at a time (Kafka's AllocateProducerIds)."""

    def __init__(self, conn: Any, node_id: int, block: int = PRODUCER_ID_BLOCK) -> None:
        self.conn = conn
        self.node_id = node_id
        self.block = block
        self._next = 0
        self._limit = 0
        self._fetching = asyncio.Lock()  # one block fetched at a time (and one query on the connection)

    async def allocate(self) -> int:
        async with self._fetching:
            if self._next >= self._limit:
                first = await take_producer_id_block(self.conn, self.node_id, self.block)
                self._next, self._limit = first, first + self.block
            pid = self._next
            self._next += 1
            return pid
