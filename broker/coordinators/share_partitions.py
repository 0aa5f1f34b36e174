"""The share-partitions of share groups on this broker and their members' share sessions (KIP-932;
Kafka's SharePartitionManager and ShareSessionCache), behind ShareFetch and ShareAcknowledge.

A share-partition (coordinator/share/share_partition.py) is one group's delivery state of one topic
partition; it starts with its first fetch, at the start offset `share.auto.offset.reset` gives
(latest: the high watermark, as Kafka's default). Its acquisition locks expire on the broker's timers
(one timer per share-partition, at its earliest lock); an expiry wakes the long polls watching the
partition, as new records do.

A share session is a member's (group id, member id) on one node, as each Kafka broker has its own
ShareSessionCache (`serve --nodes N`: a member fetching from three leaders holds three sessions, each
with its own epochs): epoch 0 opens it (replacing the member's older one on that node), each later
request carries the next epoch, -1 closes it and releases what the member acquired through it
(Kafka's releaseSession; a new epoch 0 only replaces the session, and what the old one acquired
stays the member's, now the new session's to release), and so does the close of the connection that opened it (Kafka's
ShareSessionCache listens for disconnects: a session ended otherwise, or replaced by one opened
on another connection, is no longer that connection's to end); a fetch reads every partition the session holds, which each request adds
to and forgets from.

Durability (share_state.py): a share-partition's state is written to `__share_group_state` when it
starts, when acknowledgements change it (answered only once durable; a failed write puts the
acknowledged records back as they were, acquired by the member, as Kafka's SharePartition rolls
back), and when records go back (a session closed, locks expired);
the share coordinator replays that topic at the broker's start (the requests wait for it: `ready`),
and a share-partition starts from its persisted state when it has one (what was acquired is
available again).

Dead letter queues (share.version 2, KIP-1191; share_dlq.py): a record archived while its group names
a DLQ topic is ARCHIVING in the state written; once that write is durable its copy is written to the
DLQ topic (durable too), then it is ARCHIVED and that state written, as Kafka's SharePartition's two
phases. Records a start finds ARCHIVING (a crash between the phases) are copied then, except those
whose copy the DLQ partition already holds.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from ...coordinator.share.persisted import PersistedState
from ...coordinator.share.share_partition import Acquired, Batch, SharePartition, Undo
from ...coordinator.share.state_shard import persister_error
from ...protocol import record_batch as rb
from ...protocol.errors import ErrorCode, KafkaError
from ...purgatory.timers import TimerFired
from .share_dlq import Archived, ShareDeadLetters
from .share_persister import SharePersister

if TYPE_CHECKING:
    from ..services import BrokerServices
    from .share_state import ShareStateLog

log = structlog.get_logger("kbroker.share")

E = ErrorCode
Key = tuple[str, str, int]  # (group id, topic, partition)
MAX_SESSIONS = 2_000  # Kafka's group.share.max.share.sessions
FIRST_READ = 1 << 20  # what a share fetch reads of the log first (`fetch`)


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    node_id: int = 0  # the node it was opened on
    connection_id: str = ""  # the connection it was opened on: its close ends the session
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)  # in the order added
    acquired_from: set[tuple[str, int]] = field(default_factory=set)  # (topic, partition) it acquired on
    # partitions the next answer must name even with nothing in them (Kafka's CachedSharePartition
    # requiresUpdateInResponse): one added to the session, one whose last answer was an error
    must_answer: set[tuple[uuid.UUID, int]] = field(default_factory=set)


@dataclass(slots=True)
class PartitionAnswer:
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)
    error: ErrorCode = E.NONE


class SharePartitionManager:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        config = broker.config
        self.lock_ms = config.group_share_record_lock_duration_ms
        self.delivery_limit = config.group_share_delivery_count_limit
        self.max_locks = config.group_share_partition_max_record_locks
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions: dict[tuple[int, str, str], ShareSession] = {}  # (node id, group id, member id)
        # the session last opened on each connection (Kafka's connectionIdToSessionMap), ended by its close
        self.by_connection: dict[str, ShareSession] = {}
        # the topic id each share-partition is of: a topic deleted and made again under its name is another
        # topic, whose share-partitions start afresh (Kafka keys them by topic id)
        self.topic_ids: dict[Key, uuid.UUID | None] = {}
        self.timers = broker.fetch_purgatory.timers
        # what the metrics show, per group: records acquired, acquired again, locks expired
        self.acquired_total: Counter[str] = Counter()
        self.redelivered_total: Counter[str] = Counter()
        self.lock_expiries_total: Counter[str] = Counter()
        self.state_log: ShareStateLog = broker.share_state
        # states another node's share coordinator serves, read through it (None: none), each taken by
        # its share-partition's start (`share_partition`)
        self.persister = SharePersister(broker)
        self.state_log.closers.append(self.persister.close)
        self._remote: dict[Key, PersistedState | None] = {}
        self.state_log.ensure()
        self._writes: set[asyncio.Future[None]] = set()  # writes nobody answers after (kept till done)
        self.dead_letters = ShareDeadLetters(broker)
        # per share-partition (by id: a topic made again under its name has another): the ARCHIVING records
        # whose state is durable, waiting for their copies (written in order), and the task writing them
        self._dlq_queue: dict[int, list[tuple[list[tuple[int, int, bool]], bool]]] = {}
        self._dlq_tasks: dict[int, asyncio.Task[None]] = {}
        broker.disconnect_listeners.append(self.connection_closed)

    async def ready(self) -> None:
        """Wait until the share coordinator has replayed `__share_group_state` (at once when it has):
        a share-partition starts from its persisted state, never from an unread one. Kafka's
        persister retries the coordinator's COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        await self.state_log.until_loaded()

    # -- sessions ------------------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int, node_id: int = 0, connection_id: str = ""
                ) -> tuple[ShareSession | None, ErrorCode]:
        """The member's session on node `node_id` for a request at `epoch` (0 opens one, on connection
        `connection_id`; -1 is the last); the error Kafka answers otherwise."""
        key = (node_id, group_id, member_id)
        if epoch == 0:
            # Kafka's newContext drops the member's old session and nothing more: what the member acquired
            # stays its own (to acknowledge in the new session, or to go back when that one ends)
            old = self.sessions.pop(key, None)
            if len(self.sessions) >= MAX_SESSIONS:
                if old is not None:
                    self.release(group_id, member_id, old.acquired_from)
                return None, E.SHARE_SESSION_LIMIT_REACHED
            opened = self.sessions[key] = ShareSession(group_id, member_id, node_id, connection_id)
            if old is not None:
                opened.acquired_from |= old.acquired_from
            if connection_id:
                self.by_connection[connection_id] = opened
            return opened, E.NONE
        session = self.sessions.get(key)
        if session is None:
            return None, E.SHARE_SESSION_NOT_FOUND
        if epoch != -1 and epoch != session.epoch:
            return None, E.INVALID_SHARE_SESSION_EPOCH
        session.epoch += 1
        return session, E.NONE

    def close(self, session: ShareSession) -> None:
        """The last request of a session (-1): it goes, and what its member holds goes back."""
        self.sessions.pop((session.node_id, session.group_id, session.member_id), None)
        self.release(session.group_id, session.member_id, session.acquired_from)

    def connection_closed(self, connection_id: str) -> None:
        """A connection closed (Kafka's ClientConnectionDisconnectListener): the share session opened on
        it ends, and what its member acquired through it is available again at once, not when the
        locks expire. A session already ended (its final epoch, a fence) or replaced by a newer one
        (epoch 0, perhaps on another connection) is not this connection's any more (Kafka's stale
        mark); the member stays in its group (its heartbeats decide that)."""
        session = self.by_connection.pop(connection_id, None)
        if session is None or self.sessions.get((session.node_id, session.group_id, session.member_id)) is not session:
            return
        log.info("share_session_disconnected", group_id=session.group_id, member_id=session.member_id,
                 acquired_on=len(session.acquired_from))
        try:  # called from the connection's close (broker/network/server.py): never raises into it
            self.close(session)
        except Exception:  # noqa: BLE001 - logged; the records come back when their locks expire
            log.exception("share_session_release_failed", group_id=session.group_id, member_id=session.member_id)

    def member_gone(self, group_id: str, member_id: str, *, left: bool = False) -> None:
        """The member was fenced (session timeout): its share session goes and what it holds is
        available again at once, not when the locks expire. A member that left (a heartbeat of epoch
        -1) keeps its share session, as in Kafka, whose share sessions end only with their final epoch
        (or the connection): a closing client leaves its group and sends its last acknowledgements
        (ShareAcknowledge of epoch -1) at once, and those must find the session, not release what
        they acknowledge to others (librdkafka's close does both concurrently)."""
        keys = [key for key in self.sessions if key[1:] == (group_id, member_id)]
        if left and keys:
            return
        for key in keys:
            del self.sessions[key]
        self.release(group_id, member_id)

    def share_groups_off(self) -> None:
        """share.version went below 1 (UpdateFeatures): every share session ends and every share-partition
        leaves memory, as Kafka's SharePartitionManager.onShareVersionToggle clears its caches. Nothing is
        written: a share-partition used again starts from its persisted state, where what was acquired is
        available again; a long poll waiting on one is woken (its request answers as share groups now do)."""
        log.info("share_groups_off", sessions=len(self.sessions), share_partitions=len(self.partitions))
        self.sessions.clear()
        self.by_connection.clear()
        for key in list(self.partitions):
            self.timers.cancel(self._timer_key(*key))
            self.broker.fetch_purgatory.notify(key[1], key[2])
        self.partitions.clear()
        self.topic_ids.clear()

    def release(self, group_id: str, member_id: str, only: set[tuple[str, int]] | None = None) -> None:
        """What the member holds goes back: on every share-partition of the group, or `only` on those
        (a session's, whose member may hold others through its sessions on other nodes)."""
        for (group, topic, partition), sp in self.partitions.items():
            if group != group_id or (only is not None and (topic, partition) not in only):
                continue
            sp.dlq = self.dead_letters.enabled(group_id)
            if sp.release_member(member_id):
                self._persist_later(group, topic, partition, sp)
                self.broker.fetch_purgatory.notify(topic, partition)

    # -- share-partitions ----------------------------------------------------------------------

    def lock_ms_of(self, group_id: str) -> int:
        return self.broker.group_configs.int_value(group_id, "share.record.lock.duration.ms")

    def _configured(self, group_id: str, sp: SharePartition) -> SharePartition:
        """The group's configs (share.record.lock.duration.ms, share.delivery.count.limit,
        share.partition.max.record.locks), which IncrementalAlterConfigs may have changed."""
        configs = self.broker.group_configs
        sp.lock_ms = configs.int_value(group_id, "share.record.lock.duration.ms")
        sp.delivery_limit = configs.int_value(group_id, "share.delivery.count.limit")
        sp.max_locks = configs.int_value(group_id, "share.partition.max.record.locks")
        sp.dlq = self.dead_letters.enabled(group_id)
        return sp

    async def start_offset(self, group_id: str, topic: str, partition: int) -> None:
        """Start a share-partition that has no state yet where the group's share.auto.offset.reset says:
        earliest (the log start), latest (the high watermark, Kafka's default) or by_duration (the
        first record at or after now minus the duration, else the high watermark)."""
        if self.unserved(group_id, topic, partition) is not None and not await self._read_remote(
                group_id, topic, partition):
            return  # its state is not served here (yet), nor read from where it is: the fetch answers why
        sp = self.share_partition(group_id, topic, partition)
        if sp.initialized:
            return
        reset = self.broker.group_configs.value(group_id, "share.auto.offset.reset")
        error, log_start, high_watermark = self.broker.partitions.bounds(topic, partition)
        if error != E.NONE:
            return
        start = log_start if reset == "earliest" else high_watermark
        if reset.startswith("by_duration:"):
            from ...coordinator.groups.group_configs import parse_duration_ms
            from ..partitions.service import InlineBudget

            since = self.broker.clock.wall_ms() - (parse_duration_ms(reset[len("by_duration:"):]) or 0)
            found_error, offset, _, _ = await self.broker.partitions.list_offset(
                topic, partition, since, 9, False, InlineBudget())
            if found_error == E.NONE and offset >= 0:
                start = offset
        if not sp.initialized:  # nobody started it while the search ran
            sp.initialize(max(start, log_start))
            self._persist_later(group_id, topic, partition, sp)

    def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition:
        key = (group_id, topic, partition)
        topic_id = self._topic_id(topic)
        sp = self.partitions.get(key)
        if sp is not None and self.topic_ids.get(key) != topic_id:  # the topic was deleted (and made again)
            self.timers.cancel(self._timer_key(*key))
            sp = None
        if sp is None:
            sp = self.partitions[key] = SharePartition(self.lock_ms, self.delivery_limit, self.max_locks)
            self.topic_ids[key] = topic_id
            self._configured(group_id, sp)
            persisted = self._remote.pop(key, None) if key in self._remote else (
                None if topic_id is None else self.state_log.state_of(group_id, topic_id, partition))
            if persisted is not None and persisted.start >= 0:
                sp.restore(persisted.start, persisted.batches)
                if archiving := sp.archiving():  # a crash between the DLQ's two phases
                    self._dead_letter(key, sp, archiving, resumed=True)
        return sp

    def unserved(self, group_id: str, topic: str, partition: int) -> ErrorCode | None:
        """A share-partition not held here whose persisted state this node's share coordinator does not
        serve (over PostgreSQL another node leads its `__share_group_state` partition, or it is still
        replaying it) and that was not read from where it is served (`_read_remote`, which
        `start_offset` awaits) is not started from nothing: COORDINATOR_NOT_AVAILABLE, Kafka's
        persister error for NOT_COORDINATOR and the load errors, which the member's next fetch retries."""
        topic_id = self._topic_id(topic)
        key = (group_id, topic, partition)
        if topic_id is None or key in self.partitions or key in self._remote:
            return None
        return None if self.state_log.serving(group_id, topic_id, partition) is None else E.COORDINATOR_NOT_AVAILABLE

    async def _read_remote(self, group_id: str, topic: str, partition: int) -> bool:
        """The state of a share-partition another node's share coordinator serves, read through it
        (share_persister.py) before the share-partition starts; whether it was."""
        key, topic_id = (group_id, topic, partition), self._topic_id(topic)
        led = self.broker.catalogue.leadership(topic, partition)
        if topic_id is None or led is None or self.state_log.serving(group_id, topic_id, partition) is not E.NOT_COORDINATOR:
            return False
        try:
            state = await self.persister.read(group_id, topic_id, partition, led.epoch)
        except KafkaError as exc:
            log.warning("share_state_read_failed", group_id=group_id, topic=topic, partition=partition, error=str(exc))
            return False
        if key not in self.partitions and self._topic_id(topic) == topic_id:
            self._remote[key] = state
        return True

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.broker.catalogue.topic(topic)
        return None if info is None else info.topic_id

    def _initialized(self, group_id: str, sp: SharePartition, topic: str, partition: int, high_watermark: int,
                     log_start: int) -> None:
        if not sp.initialized:
            sp.initialize(high_watermark)  # share.auto.offset.reset=latest, Kafka's default
            self._persist_later(group_id, topic, partition, sp)
        elif sp.start < log_start:
            sp.truncate_below(log_start)
            self._persist_later(group_id, topic, partition, sp)

    def read_offset(self, group_id: str, topic: str, partition: int) -> int | None:
        """Where this share-partition's next fetch reads the log from, if it is known already (nothing
        is made or changed): the fetch path has an engine read what is not in memory first."""
        sp = self.partitions.get((group_id, topic, partition))
        if sp is None or not sp.initialized:
            return None
        error, _, high_watermark = self.broker.partitions.bounds(topic, partition)
        return None if error != E.NONE else sp.next_fetch_offset(high_watermark)

    def fetch(self, group_id: str, member_id: str, topic: str, partition: int, max_bytes: int,
              max_records: int, whole_batches: bool = False) -> PartitionAnswer:
        """Acquire what this share-partition can give `member_id` now, with the log's bytes for it;
        `whole_batches`: the batch the record limit falls in is acquired to its end (KIP-1206).

        The log is read FIRST_READ bytes first (at least one batch), and the rest of `max_bytes` only
        if that left records to acquire: a fetch acquires max_records (or the batch they end in),
        which one read of a MiB holds as a rule, where reading the whole `max_bytes` (8 MiB from some
        clients) for it cost a copy of all of it. The two reads acquire what one would."""
        read = self.broker.partitions.read
        error, log_start, high_watermark = self.broker.partitions.bounds(topic, partition)
        if error != E.NONE:
            return PartitionAnswer(error=ErrorCode(error))
        if (unserved := self.unserved(group_id, topic, partition)) is not None:
            return PartitionAnswer(error=unserved)
        sp = self._configured(group_id, self.share_partition(group_id, topic, partition))
        self._initialized(group_id, sp, topic, partition, high_watermark, log_start)
        committed = self.broker.group_configs.value(group_id, "share.isolation.level") == "read_committed"
        offset = sp.next_fetch_offset(high_watermark)
        if offset is None or max_records <= 0:
            return PartitionAnswer()
        now_ms = self.broker.clock.now_ms()
        budget = max(1, max_bytes)
        acquired: list[Acquired] = []
        parts: list[memoryview] = []
        taken = 0
        for second in (False, True):
            # under read_committed one read (its aborted transactions are that read's to match)
            size = min(budget, FIRST_READ) if not (second or committed) else budget
            result = read(topic, partition, offset, size, min_one_batch=not second, read_committed=committed)
            if result.error_code != E.NONE:
                if second:
                    break  # what the first read acquired stands
                return PartitionAnswer(error=ErrorCode(result.error_code))
            if committed and result.last_stable_offset >= 0:  # nothing at or past it is delivered yet
                high_watermark = min(high_watermark, result.last_stable_offset)
            data = result.records
            batches = _batches(data, result.aborted if committed else None)
            got = sp.acquire(member_id, [b for _, _, b in batches], high_watermark, max_records - taken, now_ms,
                             whole_batches)
            taken += sum(a.last - a.first + 1 for a in got)
            # Only the batches that hold an acquired record go out.
            view = memoryview(data)
            parts.extend(view[pos:pos + length] for pos, length, b in batches
                         if not b.control and any(a.first <= b.last and b.base <= a.last for a in got))
            if got and acquired and acquired[-1].last + 1 == got[0].first and (
                    acquired[-1].delivery_count == got[0].delivery_count):  # one run across the two reads
                got[0] = Acquired(acquired.pop().first, got[0].last, got[0].delivery_count)
            acquired.extend(got)
            if (size == budget or len(data) >= budget or not batches or taken >= max_records
                    or sp.acquired >= sp.max_locks):
                break  # the read had the whole budget, or the records to acquire are taken
            budget -= len(data)
            offset = batches[-1][2].last + 1
        if not acquired:
            return PartitionAnswer()
        self.acquired_total[group_id] += sum(a.last - a.first + 1 for a in acquired)
        self.redelivered_total[group_id] += sum(a.last - a.first + 1 for a in acquired if a.delivery_count > 1)
        self._arm(group_id, topic, partition, sp)
        return PartitionAnswer(b"".join(parts), acquired)

    def acknowledge(self, group_id: str, member_id: str, topic: str, partition: int,
                    batches: Iterable[tuple[int, int, list[int]]]) -> Awaitable[ErrorCode]:
        """Apply the member's acknowledgements now and write the state they made; the awaitable
        answers once it is durable in `__share_group_state` (Kafka's SharePartition answers after the
        persister's write). A request's partitions are applied in order and awaited together
        (`asyncio.gather`), so their writes share fsync rounds instead of waiting in turn."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None or not sp.initialized or self.topic_ids.get(key) != self._topic_id(topic):
            return answered(E.INVALID_RECORD_STATE)  # nothing acquired, or acquired of a topic since deleted
        now_ms = self.broker.clock.now_ms()
        sp.dlq = self.dead_letters.enabled(group_id)  # read at each change, as Kafka's isDLQEnabledForGroup
        error, undo = sp.acknowledge_all(member_id, batches, now_ms)
        self.broker.fetch_purgatory.notify(topic, partition)  # released records are available again
        if undo is None:
            return answered(error)
        archiving = sp.archiving()  # in the state written now: their copies follow once it is durable
        try:
            durable = self._persist(group_id, topic, partition, sp)
        except Exception as exc:  # noqa: BLE001 - not written: rolled back as a failed write is
            return answered(self._rolled_back(group_id, topic, partition, sp, undo, exc))
        return self._settled(key, sp, undo, durable, error, archiving)

    async def _settled(self, key: Key, sp: SharePartition, undo: Undo, durable: Awaitable[None], error: ErrorCode,
                       archiving: list[tuple[int, int, bool]]) -> ErrorCode:
        group_id, topic, partition = key
        try:
            await durable
        except Exception as exc:  # noqa: BLE001 - the member learns its acknowledgement is not durable
            return self._rolled_back(group_id, topic, partition, sp, undo, exc)
        if archiving:
            self._dead_letter(key, sp, archiving)
        return error

    def _rolled_back(self, group_id: str, topic: str, partition: int, sp: SharePartition, undo: Undo,
                     exc: Exception) -> ErrorCode:
        """As Kafka's SharePartition: the records go back to the member, under their locks, and the
        answer is the persister's error (persister_error)."""
        restored = sp.rollback(undo)
        self._arm(group_id, topic, partition, sp)
        code = persister_error(exc.code) if isinstance(exc, KafkaError) else E.UNKNOWN_SERVER_ERROR
        log.error("share_state_write_failed", group_id=group_id, topic=topic, partition=partition,
                  error=repr(exc), answered=code.name, rolled_back=restored)
        return code

    # -- the offsets admin APIs (90-92) ---------------------------------------------------------

    def started(self, group_id: str) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
        """(topic id, partition) -> (start offset, offsets at or past it whose delivery is complete) of
        every share-partition of the group with a state (persisted, or started in memory)."""
        out: dict[tuple[uuid.UUID, int], tuple[int, int]] = {}
        for (group, topic_id, partition), state in self.state_log.states():
            if group == group_id:
                done = sum(last - first + 1 for first, last, st, _ in state.batches if st in (2, 4))
                out[(topic_id, partition)] = (state.start, done)
        return out

    async def set_start(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int, offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts again at `offset` with nothing in flight
        (the group is empty), durable before this returns."""
        sp = self.share_partition(group_id, topic, partition)
        if offset >= 0:
            sp.initialize(offset)
        else:  # a negative start is kept (Kafka keeps it) but means none here: share.auto.offset.reset decides
            del self.partitions[(group_id, topic, partition)]
        await self.state_log.write(group_id, topic_id, partition, offset, [])

    async def delete_state(self, group_id: str, topic: str, topic_id: uuid.UUID) -> None:
        """DeleteShareGroupOffsets: every share-partition of the topic forgets its state (the group is
        empty); the next one to fetch starts from share.auto.offset.reset."""
        waits = []
        for (group, tid, partition), _ in list(self.state_log.states()):
            if group == group_id and tid == topic_id:
                waits.append(self.state_log.delete(group_id, topic_id, partition))
        for key in [k for k in self.partitions if k[0] == group_id and k[1] == topic]:
            del self.partitions[key]
            self.timers.cancel(self._timer_key(*key))
        for wait in waits:
            await wait

    def leadership_lost(self, topic: str, partition: int) -> None:
        """Another node leads the data partition now (over PostgreSQL): its share-partitions held here
        go, their locks' timers with them, so nothing more is written of them from here; the new
        leader starts them from their persisted state (what was acquired here comes back)."""
        for key in [k for k in self.partitions if k[1:] == (topic, partition)]:
            del self.partitions[key]
            self.topic_ids.pop(key, None)
            self.timers.cancel(self._timer_key(*key))
        for key in [k for k in self._remote if k[1:] == (topic, partition)]:
            del self._remote[key]

    def topics_deleted(self, deleted: dict[str, uuid.UUID]) -> Awaitable[int]:
        """Deleted topics: their share-partitions held here go (their locks' timers with them), and
        their states in `__share_group_state` are tombstoned (the wait returned)."""
        for key in [k for k in self.partitions if k[1] in deleted and deleted[k[1]] == self.topic_ids.get(k)]:
            del self.partitions[key]
            self.topic_ids.pop(key, None)
            self.timers.cancel(self._timer_key(*key))
        return self.state_log.delete_topics(set(deleted.values()))

    # -- durability ----------------------------------------------------------------------------

    def _persist(self, group_id: str, topic: str, partition: int, sp: SharePartition) -> Awaitable[None]:
        """Write the share-partition's state now; the wait for its durability. Raises KafkaError."""
        topic_id = self._topic_id(topic)
        if topic_id is None:
            raise KafkaError(f"topic {topic} is gone", E.UNKNOWN_TOPIC_OR_PARTITION)
        # served by another node, or moved here while a write sent there is still retried (kept in order)
        if (self.state_log.serving(group_id, topic_id, partition) is E.NOT_COORDINATOR
                or self.persister.writing(group_id, topic_id, partition)):
            led = self.broker.catalogue.leadership(topic, partition)
            return self.persister.write(group_id, topic_id, partition, -1 if led is None else led.epoch, *sp.snapshot())
        return self.state_log.write(group_id, topic_id, partition, *sp.snapshot())

    def _persist_later(self, group_id: str, topic: str, partition: int, sp: SharePartition) -> None:
        """Write a state change nobody waits to answer (a start, records given back): appended now, in
        order with the others; a failure is logged (the next write carries the whole state again)."""
        archiving = sp.archiving()
        try:
            future = asyncio.ensure_future(self._persist(group_id, topic, partition, sp))
        except Exception as exc:  # noqa: BLE001 - logged; the state stays in memory
            log.error("share_state_write_failed", group_id=group_id, topic=topic, partition=partition, error=repr(exc))
            return
        self._writes.add(future)
        future.add_done_callback(self._write_done)
        if archiving:
            def durable(done: asyncio.Future[None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self._dead_letter((group_id, topic, partition), sp, archiving)
            future.add_done_callback(durable)

    def _write_done(self, future: asyncio.Future[None]) -> None:
        self._writes.discard(future)
        if not future.cancelled() and (exc := future.exception()) is not None:
            log.error("share_state_write_failed", error=repr(exc))

    # -- dead letter queues (KIP-1191) ----------------------------------------------------------

    def _dead_letter(self, key: Key, sp: SharePartition, archiving: list[tuple[int, int, bool]], *,
                     resumed: bool = False) -> None:
        """ARCHIVING records whose state is durable: their copies go to the DLQ topic (phase 2)."""
        self._dlq_queue.setdefault(id(sp), []).append((archiving, resumed))
        if id(sp) not in self._dlq_tasks:
            self._dlq_tasks[id(sp)] = asyncio.ensure_future(self._write_dead_letters(key, sp))

    async def _write_dead_letters(self, key: Key, sp: SharePartition) -> None:
        group_id, topic, partition = key
        try:
            while (queue := self._dlq_queue.get(id(sp))) and self.partitions.get(key) is sp:
                archiving, resumed = queue.pop(0)
                still = {offset for offset, _, _ in sp.archiving()}
                records = [Archived(o, count, rejected) for o, count, rejected in archiving if o in still]
                if not records:
                    continue
                await self.dead_letters.write(group_id, topic, partition, records, resumed=resumed)
                if sp.archived_to_dlq(r.offset for r in records) and self.partitions.get(key) is sp:
                    try:
                        await self._persist(group_id, topic, partition, sp)
                    except Exception as exc:  # noqa: BLE001 - the next write carries ARCHIVED (Kafka's too)
                        log.error("share_state_write_failed", group_id=group_id, topic=topic, partition=partition,
                                  error=repr(exc))
                    self.broker.fetch_purgatory.notify(topic, partition)
        finally:
            self._dlq_tasks.pop(id(sp), None)
            self._dlq_queue.pop(id(sp), None)

    def can_acquire(self, group_id: str, topic: str, partition: int) -> bool:
        """A long poll's condition: this share-partition has something to give."""
        sp = self.partitions.get((group_id, topic, partition))
        if sp is None:
            return False
        error, _, high_watermark = self.broker.partitions.bounds(topic, partition)
        return error != E.NONE or sp.has_available(high_watermark)

    # -- locks ---------------------------------------------------------------------------------

    def _timer_key(self, group_id: str, topic: str, partition: int) -> str:
        return f"share-locks\x00{group_id}\x00{topic}\x00{partition}"

    def _arm(self, group_id: str, topic: str, partition: int, sp: SharePartition) -> None:
        deadline = sp.next_deadline()
        key = self._timer_key(group_id, topic, partition)
        if deadline is None:
            self.timers.cancel(key)
            return
        current = self.timers.deadline_ms(key)
        if current is not None and current <= deadline:
            return
        now_ms = self.broker.clock.now_ms()

        def expired(fired: TimerFired) -> None:
            if not self.timers.claim(fired.key, fired.token):
                return
            sp.dlq = self.dead_letters.enabled(group_id)
            count = sp.expire_locks(self.broker.clock.now_ms())
            self.lock_expiries_total[group_id] += count
            self._arm(group_id, topic, partition, sp)
            if count:
                self._persist_later(group_id, topic, partition, sp)
                self.broker.fetch_purgatory.notify(topic, partition)

        self.timers.schedule(key, max(0, deadline - now_ms), expired)

    def group_stats(self) -> dict[str, dict[str, int]]:
        """Per group: records in flight by state, and the totals (acquired, redelivered, archived by a
        reject or the delivery count limit, expired locks): what /metrics shows."""
        out: dict[str, dict[str, int]] = {}
        for (group, _, _), sp in self.partitions.items():
            row = out.setdefault(group, {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0,
                                         "archived_total": 0})
            counts = sp.counts()
            for state in ("available", "acquired", "acknowledged", "archived"):
                row[state] += counts[state]
            row["archived_total"] += sp.archived_total
        for group, row in out.items():
            row["acquired_total"] = self.acquired_total[group]
            row["redelivered_total"] = self.redelivered_total[group]
            row["lock_expiries_total"] = self.lock_expiries_total[group]
            row["dlq_written_total"] = self.dead_letters.written_total[group]
            row["dlq_failed_total"] = self.dead_letters.failed_total[group]
        return out

    def status(self) -> list[dict[str, object]]:
        return [{"group_id": g, "topic": t, "partition": p, **sp.counts()}
                for (g, t, p), sp in sorted(self.partitions.items())]


def _batches(data: bytes | memoryview, aborted: list | None) -> list[tuple[int, int, Batch]]:
    """(position, size, batch) of each batch read; under read_committed a batch of an aborted
    transaction holds nothing to deliver, as a control batch does (Kafka's SharePartition archives
    them): a producer's batches from its aborted transaction's first offset until its ABORT marker."""
    out: list[tuple[int, int, Batch]] = []
    starts: dict[int, list[int]] = {}  # producer id -> first offsets of its aborted transactions, latest first
    for a in sorted(aborted or (), key=lambda a: -a.first_offset):
        starts.setdefault(a.producer_id, []).append(a.first_offset)
    open_aborts: set[int] = set()
    for pos, header in rb.iter_batches(data):
        pid = header.producer_id
        skip = header.is_control
        if aborted and header.is_transactional:
            pending = starts.get(pid)
            while pending and pending[-1] <= header.base_offset:
                pending.pop()
                open_aborts.add(pid)
            if header.is_control:
                open_aborts.discard(pid)  # the marker closes the transaction
            elif pid in open_aborts:
                skip = True
        out.append((pos, header.batch_length + rb.LOG_OVERHEAD,
                    Batch(header.base_offset, header.base_offset + header.last_offset_delta, skip)))
    return out


async def answered(code: ErrorCode) -> ErrorCode:
    """An acknowledgement's answer known at once, awaited with those that wait for their writes."""
    return code
