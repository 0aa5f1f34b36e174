"""The partitions one node leads, with their log in PostgreSQL: group commit across partitions, and the
fence that keeps a deposed leader's appends out.

An append (store.py) assigns offsets in memory at once, as the segment log does, and queues the batch
here; the caller awaits its durability. A round takes every queued batch of every partition and
writes them in one transaction:

  1. one UPDATE moves each partition's `log_end` from where this node's batches start to where they
     end, only where (leader, leader_epoch) are still this node's and the stored end is where this
     node thinks it is: a partition it returns is ours to append to, and its row stays locked until
     COMMIT, so no election can come between (metadata.elect holds the same row);
  2. one COPY inserts the batches of the partitions the UPDATE returned (and, for partitions whose
     log start moved, by DeleteRecords or retention, one UPDATE of `log_start` under the same fence
     and one DELETE of the batches wholly below it; for partitions compaction rewrote, the same fence,
     which stores where the run ended, and their changed batches' rows replaced);
  3. COMMIT, with synchronous_commit=on (the connection's setting, schema.connect): the records are
     on PostgreSQL's disk (and on a synchronous standby, if the operator has one) before any waiter
     is answered. The high watermark is the committed end.

A partition the UPDATE did not return has a new leader (or epoch): its batches are dropped, its
waiters fail with NOT_LEADER_OR_FOLLOWER, and its store is deposed (every later append fails the same
way; a node that leads it again opens a new store from the database). A failed round (the database
unreachable, a COMMIT whose outcome is unknown) takes every store in it offline: their waiters fail
with KAFKA_STORAGE_ERROR and nothing more is appended until the partition is opened again, from what
the database holds.

Rounds run one at a time on the node's one writing connection; appends made while a round runs go in
the next, so a busy node commits many partitions' batches in few transactions, as the fsync rounds of
the segment log do.

Opening a partition reads its index (every batch's offsets, size and header), its markers and the bytes
of its tail in one query (_OPEN_INDEX), not the whole log; older batches are read later, on the pool
and never on the writer's connection, when a reader asks for them (`read_batches`, one query per range
under way, into the node's read cache; batch_index.py and memory.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import structlog

from ....protocol import control_records
from ....protocol import record_batch as rb
from ....protocol.errors import ErrorCode, KafkaError
from ..log.epochs import LeaderEpochs
from ..producer_state import PartitionProducerState
from .batch_index import IndexEntry, StoredBatches, kept_whole
from .memory import InFlight, ReadCache, TailBudget

if TYPE_CHECKING:
    from ..log.config import LogConfig
    from .store import Pending, PostgresPartitionStore

log = structlog.get_logger("kbroker.storage.postgres")

# compaction's part of a round: (the changed batches: stored base, replacement), where the run ended
Cleaning = tuple[list[tuple[int, "Pending | None"]], int | None]

BATCH_COLUMNS = ("topic", "partition", "base_offset", "last_offset", "leader_epoch", "max_timestamp", "producer_id",
                 "producer_epoch", "base_sequence", "attributes", "records")

# The topic id too: a topic deleted and created again under its name (topics.py) is another log, even
# where its new partition has this leader, epoch and end.
_CLAIM = """
UPDATE partitions AS p SET log_end = u.new_end
FROM unnest($1::text[], $2::integer[], $3::integer[], $4::bigint[], $5::bigint[], $7::uuid[])
     AS u(topic, partition, epoch, old_end, new_end, topic_id), topics AS t
WHERE p.topic = u.topic AND p.partition = u.partition AND p.leader = $6 AND p.leader_epoch = u.epoch
  AND p.log_end = u.old_end AND t.name = u.topic AND t.topic_id = u.topic_id
RETURNING p.topic, p.partition
"""


def _fenced_raise(column: str) -> str:
    """One UPDATE raising `column` of each partition to greatest(stored, given) ($4; NULL leaves it, as
    greatest() skips it), only where this node ($5) still leads in the epoch ($3) and the topic id ($6)
    is the caller's; it returns the partitions it fenced in, whose rows stay locked to COMMIT."""
    return f"""
UPDATE partitions AS p SET {column} = greatest(p.{column}, u.value)
FROM unnest($1::text[], $2::integer[], $3::integer[], $4::bigint[], $6::uuid[])
     AS u(topic, partition, epoch, value, topic_id), topics AS t
WHERE p.topic = u.topic AND p.partition = u.partition AND p.leader = $5 AND p.leader_epoch = u.epoch
  AND t.name = u.topic AND t.topic_id = u.topic_id
RETURNING p.topic, p.partition
"""


_MOVE_START = _fenced_raise("log_start")  # DeleteRecords, retention
_FENCE = _fenced_raise("cleaned_to")  # compaction's rewrites, storing the cleaner's checkpoint
# The index of a partition's log, oldest first, with the bytes of its newest batches (within $4 bytes),
# of every batch when the partition is resident ($5), and of every control batch (its marker rebuilds
# the transactions' state); of the others, the header only (rb.HEADER_SIZE bytes: producer state).
_OPEN_INDEX = """
SELECT base_offset, last_offset, octet_length(records) AS size,
       CASE WHEN $5 OR attributes & 32 <> 0
                 OR sum(octet_length(records)) OVER (ORDER BY base_offset DESC) <= $4
            THEN records ELSE substring(records FROM 1 FOR 61) END AS data
FROM batches WHERE topic = $1 AND partition = $2 AND last_offset >= $3 ORDER BY base_offset
"""
_READ_BATCHES = """
SELECT base_offset, records FROM batches
WHERE topic = $1 AND partition = $2 AND base_offset BETWEEN $3 AND $4 ORDER BY base_offset
"""
READS_AT_ONCE = 3  # database reads of old batches under way at once (the pool serves metadata too)
READ_TIMEOUT_S = 10.0  # a reader waits no longer for the database (a client's request times out at 30 s)

_DELETE_BATCHES = """
DELETE FROM batches AS b USING unnest($1::text[], $2::integer[], $3::bigint[]) AS u(topic, partition, base)
WHERE b.topic = u.topic AND b.partition = u.partition AND b.base_offset = u.base
"""
_DELETE_BELOW = """
DELETE FROM batches AS b USING unnest($1::text[], $2::integer[], $3::bigint[]) AS u(topic, partition, start)
WHERE b.topic = u.topic AND b.partition = u.partition AND b.base_offset < u.start AND b.last_offset < u.start
"""


class NotLeaderError(KafkaError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class DatabaseStorageError(KafkaError):
    code = ErrorCode.KAFKA_STORAGE_ERROR


class PostgresLog:
    """This node's writer: the partitions it has opened, and the rounds that commit their appends."""

    def __init__(self, conn: Any, node_id: int, fenced: Callable[[], bool] | None = None,
                 reconnect: Callable[[], Awaitable[Any]] | None = None, *, budget: TailBudget | None = None,
                 cache: ReadCache | None = None) -> None:
        self.conn = conn
        self.reader: Any = None  # the pool old batches are read on (the engine's), not the writer's connection
        self.budget = budget if budget is not None else TailBudget()
        self.cache = cache if cache is not None else ReadCache()  # (an empty cache is falsy: it has a length)
        self._reads = InFlight()
        self._read_slots = asyncio.Semaphore(READS_AT_ONCE)
        self._read_tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references
        self.reads = 0  # queries of old batches made (several readers of a range make one)
        # A new writing connection when the database dropped this one (it restarted): the round that
        # found it closed failed, and its partitions are opened again by the node's next refresh.
        self._reconnect = reconnect
        self.node_id = node_id
        # True once this node's broker lease may have expired (membership.BrokerLease.fenced): it appends
        # nothing more, before the controller may have handed its partitions to another node.
        self.fenced = fenced or (lambda: False)
        self.stores: dict[tuple[str, int], PostgresPartitionStore] = {}
        self._queued: dict[PostgresPartitionStore, None] = {}  # stores with batches for the next round
        self._round: asyncio.Task[None] | None = None
        self._after_round: list[Callable[[], None]] = []
        self.rounds = 0  # transactions committed (group commit: fewer than the appends)
        self.closed = False

    # --- opening a partition (becoming its leader) ----------------------------------------------------

    async def open_partition(self, topic: str, partition: int, config: LogConfig,
                             conn: Any = None, topic_id: uuid.UUID | None = None) -> PostgresPartitionStore:
        """The store of a partition this node leads now: its offsets, epoch history and every batch
        read from the database, the idempotent producers' state rebuilt from the batches' headers.
        `conn`: the connection to read on (not the writer's, while rounds may run on it). `topic_id`:
        the topic as the caller's image has it; another (deleted and created again since) is refused,
        UNKNOWN_TOPIC_OR_PARTITION, so no node serves a new topic before it has seen the old one go."""
        from .store import PostgresPartitionStore

        conn = conn or self.conn
        started = time.monotonic()
        old = self.stores.pop((topic, partition), None)
        if old is not None:
            old.depose(None)
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            row = await conn.fetchrow("SELECT leader, leader_epoch, log_start, log_end, cleaned_to, topic_id FROM partitions "
                                      "JOIN topics ON name = topic WHERE topic = $1 AND partition = $2",
                                      topic, partition)
            if row is None or (topic_id is not None and row["topic_id"] != topic_id):
                raise KafkaError(f"no partition {topic}-{partition}" if row is None else
                                 f"{topic} was deleted and created again since this node read it",
                                 ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if row["leader"] != self.node_id:
                raise NotLeaderError(f"{topic}-{partition} is led by node {row['leader']}, not {self.node_id}")
            epochs = await conn.fetch("SELECT leader_epoch, start_offset FROM epoch_history WHERE topic = $1 "
                                           "AND partition = $2 ORDER BY leader_epoch", topic, partition)
            resident = kept_whole(topic, config)
            if not resident:
                self.budget.partitions += 1  # this one's share counts in what the tail may hold
            try:
                rows = await conn.fetch(_OPEN_INDEX, topic, partition, row["log_start"],
                                        self.budget.per_partition(), resident)
            finally:
                if not resident:
                    self.budget.partitions -= 1  # counted again by StoredBatches
        history = LeaderEpochs()
        for entry in epochs:
            history.assign(entry["leader_epoch"], entry["start_offset"])
        state = PartitionProducerState(topic, partition)
        entries, headers, markers = _index(rows)
        state.replay(headers, markers)
        batches = StoredBatches((row["topic_id"], partition), entries, resident=resident, budget=self.budget,
                                cache=self.cache)
        store = PostgresPartitionStore(self, topic, partition, config, topic_id=row["topic_id"],
                                       leader_epoch=row["leader_epoch"],
                                       log_start=row["log_start"], log_end=row["log_end"], epochs=history,
                                       producer_state=state, batches=batches,
                                       cleaned_to=row["cleaned_to"])
        self.stores[(topic, partition)] = store
        for other in self.stores.values():  # one more partition shares the node's budget
            other.batches.trim(other.high_watermark)
        log.info("partition_opened", topic=topic, partition=partition, leader_epoch=row["leader_epoch"],
                 log_start=row["log_start"], log_end=row["log_end"], cleaned_to=store.cleaned_to,
                 batches=len(entries),
                 bytes=batches.size, held=batches.tail_bytes, resident=resident,
                 took_ms=round(1000 * (time.monotonic() - started), 1))
        return store

    # --- reads below the tail ---------------------------------------------------------------------------

    def read_batches(self, store: PostgresPartitionStore, span: tuple[int, int]) -> asyncio.Future[None]:
        """A future resolved once the store's batches with base offsets in `span` are read into the read
        cache (or the read failed: the store's next read of them says so). One query per span at once."""
        key = (store.batches.cache_key, span)
        future = self._reads.get(key)
        if future is None:
            future = self._reads.start(key)
            task = asyncio.get_running_loop().create_task(self._read(store, span, key), name="postgres-read")
            self._read_tasks.add(task)
            task.add_done_callback(self._read_tasks.discard)
        return future

    async def fetch_batches(self, store: PostgresPartitionStore, span: tuple[int, int]) -> list[tuple[int, bytes]]:
        """(base offset, bytes) of the store's batches with base offsets in `span`, from the database."""
        async with self._read_slots, self.reader.acquire(timeout=READ_TIMEOUT_S) as conn:
            rows = await conn.fetch(_READ_BATCHES, store.topic, store.partition, span[0], span[1],
                                    timeout=READ_TIMEOUT_S)
        self.reads += 1
        return [(r["base_offset"], bytes(r["records"])) for r in rows]

    async def _read(self, store: PostgresPartitionStore, span: tuple[int, int], key: Any) -> None:
        try:
            rows = await self.fetch_batches(store, span)
            if not store.closed:
                store.batches.cache_read(rows)
        except Exception as exc:  # noqa: BLE001 - the database's failure, whatever it is, is the reader's answer
            log.warning("postgres_read_failed", topic=store.topic, partition=store.partition, first=span[0],
                        last=span[1], error=repr(exc))
            store.read_failed(exc)
        finally:
            self._reads.finish(key)

    def store(self, topic: str, partition: int) -> PostgresPartitionStore | None:
        return self.stores.get((topic, partition))


    # --- rounds ---------------------------------------------------------------------------------------

    def queue(self, store: PostgresPartitionStore) -> None:
        """The store has batches to commit: a round starts with the loop's next turn, or after the one running."""
        self._queued[store] = None
        if self._round is None:
            self._round = asyncio.get_running_loop().create_task(self._rounds(), name="postgres-log-rounds")

    def after_round(self, callback: Callable[[], None]) -> bool:
        if self._round is None:
            return False
        self._after_round.append(callback)
        return True

    async def _rounds(self) -> None:
        try:
            while self._queued and not self.closed:
                stores = list(self._queued)
                self._queued.clear()
                await self._commit(stores)
                callbacks, self._after_round = self._after_round, []
                for callback in callbacks:
                    callback()
        finally:
            self._round = None

    async def _commit(self, stores: list[PostgresPartitionStore]) -> None:
        taken = [(store, store.take_pending(), store.take_log_start(), (store.take_rewrites(), store.take_cleaned_to()))
                 for store in stores]
        taken = [t for t in taken if t[1] or t[2] is not None or t[3][0] or t[3][1] is not None]
        if not taken:
            return
        appending = [(store, pending) for store, pending, _, _ in taken if pending]
        starting = [(store, start) for store, _, start, _ in taken if start is not None]
        rewriting = [(store, cleaning) for store, _, _, cleaning in taken if cleaning[0] or cleaning[1] is not None]
        started = time.monotonic()
        try:
            if self.conn.is_closed() and self._reconnect is not None:
                self.conn = await self._reconnect()
                log.info("postgres_reconnected", node=self.node_id, purpose="log")
            async with self.conn.transaction():
                ours = await self._claim(appending) if appending else set()
                rows = [(s.topic, s.partition, base, last, h.partition_leader_epoch, h.max_timestamp, h.producer_id,
                         h.producer_epoch, h.base_sequence, h.attributes, data)
                        for s, pending in appending if (s.topic, s.partition) in ours
                        for base, last, h, data in pending]
                if rows:
                    await self.conn.copy_records_to_table("batches", records=rows, columns=BATCH_COLUMNS)
                moved = await self._move_log_starts(starting) if starting else set()
                rewritten = await self._rewrite(rewriting) if rewriting else set()
        except Exception as exc:  # noqa: BLE001 - whatever failed, the outcome of these appends is unknown
            error = DatabaseStorageError(f"the cluster's database failed a commit: {exc!r}")
            log.error("postgres_commit_failed", error=repr(exc), partitions=len(taken))
            for store, _, _, _ in taken:
                store.take_offline(error)
            return
        self.rounds += 1
        took_ms = round(1000 * (time.monotonic() - started), 2)
        for store, pending, start, cleaning in taken:
            key = (store.topic, store.partition)
            cleaned = not cleaning[0] and cleaning[1] is None or key in rewritten
            if (not pending or key in ours) and (start is None or key in moved) and cleaned:
                if pending:
                    store.committed(pending[-1][1] + 1)
                if start is not None:
                    store.log_start_stored(start)
                continue
            log.warning("append_fenced", topic=store.topic, partition=store.partition, node=self.node_id,
                        leader_epoch=store.leader_epoch, batches=len(pending), log_start=start, took_ms=took_ms)
            if self.stores.get(key) is store:  # not a re-created topic's
                del self.stores[key]
            store.depose(NotLeaderError(f"node {self.node_id} no longer leads {store.topic}-{store.partition} "
                                        f"in epoch {store.leader_epoch}: nothing was written"))

    async def _claim(self, appending: list[tuple[PostgresPartitionStore, list[Pending]]]) -> set[tuple[str, int]]:
        """Step 1 of a round: the partitions whose log end this node may move (see _CLAIM)."""
        claimed = await self.conn.fetch(
            _CLAIM, [s.topic for s, _ in appending], [s.partition for s, _ in appending],
            [s.leader_epoch for s, _ in appending], [p[0][0] for _, p in appending],
            [p[-1][1] + 1 for _, p in appending], self.node_id, [s.topic_id for s, _ in appending])
        return {(row["topic"], row["partition"]) for row in claimed}

    async def _move_log_starts(self, starting: list[tuple[PostgresPartitionStore, int]]) -> set[tuple[str, int]]:
        """New log starts (DeleteRecords, retention), only where this node still leads in its epoch, and
        the batches wholly below them deleted, in the round's transaction."""
        rows = await self.conn.fetch(
            _MOVE_START, [s.topic for s, _ in starting], [s.partition for s, _ in starting],
            [s.leader_epoch for s, _ in starting], [start for _, start in starting], self.node_id,
            [s.topic_id for s, _ in starting])
        moved = {(row["topic"], row["partition"]) for row in rows}
        below = [(s.topic, s.partition, start) for s, start in starting if (s.topic, s.partition) in moved]
        if below:
            await self.conn.execute(_DELETE_BELOW, [t for t, _, _ in below], [p for _, p, _ in below],
                                    [start for _, _, start in below])
        return moved

    async def _rewrite(self, rewriting: list[tuple[PostgresPartitionStore, Cleaning]]) -> set[tuple[str, int]]:
        """Compaction's rewrites (compaction.py), only where this node still leads in its epoch: each
        changed batch's row deleted, its replacement (if any, and not below the log start) inserted, and
        where the run ended stored (`partitions.cleaned_to`)."""
        rows = await self.conn.fetch(_FENCE, [s.topic for s, _ in rewriting], [s.partition for s, _ in rewriting],
                                     [s.leader_epoch for s, _ in rewriting], [c[1] for _, c in rewriting],
                                     self.node_id, [s.topic_id for s, _ in rewriting])
        fenced_in = {(row["topic"], row["partition"]) for row in rows}
        mine = [(s, c[0]) for s, c in rewriting if (s.topic, s.partition) in fenced_in]
        gone = [(s.topic, s.partition, base) for s, rewrites in mine for base, _ in rewrites]
        if gone:
            await self.conn.execute(_DELETE_BATCHES, [t for t, _, _ in gone], [p for _, p, _ in gone],
                                    [b for _, _, b in gone])
        new = [(s.topic, s.partition, base, last, h.partition_leader_epoch, h.max_timestamp, h.producer_id,
                h.producer_epoch, h.base_sequence, h.attributes, data)
               for s, rewrites in mine for _, replacement in rewrites if replacement is not None
               for base, last, h, data in [replacement] if last >= s.log_start_offset]
        if new:
            await self.conn.copy_records_to_table("batches", records=new, columns=BATCH_COLUMNS)
        return fenced_in

    async def close(self) -> None:
        """Let the round in hand finish, then stop."""
        if self._round is not None:
            await asyncio.gather(self._round, return_exceptions=True)
        self.closed = True
        for task in list(self._read_tasks):
            task.cancel()
        for store in list(self.stores.values()):
            store.depose(None)
        self.stores.clear()


def _index(rows: list[Any]) -> tuple[list[IndexEntry], list[rb.BatchHeader], dict[int, tuple[bool, int]]]:
    """The batch index of _OPEN_INDEX's rows (a batch's bytes where the row has them whole), their
    headers, and the transaction markers of the control batches (offset: (commit?, coordinator epoch))."""
    entries: list[IndexEntry] = []
    headers: list[rb.BatchHeader] = []
    markers: dict[int, tuple[bool, int]] = {}
    for r in rows:
        data = bytes(r["data"])
        header = rb.read_header(data)
        headers.append(header)
        whole = len(data) == r["size"]
        if header.is_control and header.producer_id >= 0 and whole:
            try:
                marker = control_records.marker_of(data)
            except (KafkaError, ValueError, IndexError):
                marker = None
            if marker is not None:
                markers[header.base_offset] = (marker[0] == control_records.COMMIT, marker[1])
        entries.append((r["base_offset"], r["last_offset"], r["size"], header.max_timestamp, data if whole else None))
    return entries, headers, markers
