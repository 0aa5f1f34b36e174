"""`__share_group_state`: where share-partitions' delivery states become durable (KIP-932; on one node
the share coordinator's state RPCs 83-87 are these in-process calls).

Each write is a ShareSnapshot record in Kafka's format, keyed by (group id, topic id, partition), in
the partition Kafka's share coordinator picks: `abs(javaHash("group:topicId:partition")) % 50`. A
snapshot carries the whole state (start offset, then runs of offsets with their delivery state and
count), so the last one of a key is the state; the acknowledgements it holds are answered only once
it is durable. The share coordinator is the generic coordinator runtime running one ShareStateShard
(coordinator/share/state_shard.py) per partition of the topic, with this log as its writer: at the
broker's start the runtime's loader replays every partition (coordinator/share/persisted.py, which
also applies Kafka's ShareUpdate records) in the background, each partition answering
COORDINATOR_LOAD_IN_PROGRESS until its replay is done; a write goes through its share-partition's
turn, appended and applied at once and answered once durable (PIPELINED: a failed fsync fences the
partition until a restart, as for the other coordinators' logs; a refused append changes nothing).

On one node and with `--nodes N` this runtime holds every partition. A node over PostgreSQL holds only
those it leads: loaded at the start (`_led`) and moved with their leadership (`move_partition`, called
by broker/postgres_node.py on each election and resignation, as `__consumer_offsets`); a share-partition
whose partition is led elsewhere is not served here (`serving`: NOT_COORDINATOR).

The topic has Kafka's settings (ShareCoordinatorService.shareGroupStateTopicConfigs): cleanup.policy
delete with retention.ms -1, compression.type producer, segment.bytes 100 MiB, min.insync.replicas; 50 partitions
(share.coordinator.state.topic.num.partitions).

Pruning (Kafka's share coordinator's "last redundant offset"): every record is a whole snapshot of its
key, so once a write is durable, each partition's records below the oldest still-current record of
its keys are redundant, and the partition's log start moves there (a key whose latest record is a
tombstone needs nothing kept). Only durable records count: the log start stays below every record
still in flight, and a key's last durable snapshot is kept until its newer one is durable. The write is
answered once the moved log start is durable too (so a restart, even after a kill -9, starts there):
its checkpoint is written off the loop, shared by the prunes made meanwhile (log/checkpoint.py).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import structlog

from ...coordinator.partitioning import java_string_hash, kafka_abs
from ...coordinator.runtime.runtime import CoordinatorRuntime
from ...coordinator.share.persisted import PersistedState, StateKey
from ...coordinator.share.state_shard import ShareStateShard, WriteState, Written, state_key
from ...protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ...protocol.record_batch import encode_keyed_batch, read_header
from ...protocol.records.share_state_records import SNAPSHOT, ShareStateRecord, decode_share_state, encode_share_state
from ..partitions.replay_read import keyed_records

if TYPE_CHECKING:
    from ...purgatory.timers import KeyedTimers
    from ..partitions.service import PartitionService

log = structlog.get_logger("kbroker.share_state")
E = ErrorCode

TOPIC = "__share_group_state"
# As Kafka 4.4 makes it (asked of the reference broker: its DescribeConfigs of the topic). Its
# min.insync.replicas is share.coordinator.state.topic.min.isr, 2 by default, which refuses every
# write on one node: 1 here, as the reference broker is configured.
TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
                 "segment.bytes": "104857600", "min.insync.replicas": "1"}


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def partition_for(group: str, topic_id: uuid.UUID, partition: int, n: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor(SharePartitionKey.asCoordinatorKey())."""
    return kafka_partition_for(f"{group}:{kafka_uuid(topic_id)}:{partition}", n)


def kafka_partition_for(coordinator_key: str, n: int) -> int:
    """The partition of a coordinator key "group:topicId:partition" (FindCoordinator's key type 2)."""
    return kafka_abs(java_string_hash(coordinator_key)) % n


class ShareStateLog:
    """The share coordinator on one node: the coordinator runtime running a ShareStateShard per
    partition of the topic, and its writer (this log: appends, durability, pruning)."""

    def __init__(self, partitions: PartitionService, num_partitions: int, *, timers: KeyedTimers) -> None:
        self.partitions = partitions
        self.catalogue = partitions.catalogue
        self.num_partitions = num_partitions
        self._wall_ms = partitions.clock.wall_ms
        self.writes = 0
        # per partition of the topic: each key's latest durable snapshot or tombstone (offset, is a
        # snapshot); only durable records count, so a prune never removes the last durable state of a
        # key whose newer snapshot is still in flight
        self._latest: dict[int, dict[tuple[str, uuid.UUID, int], tuple[int, bool]]] = {}
        # per partition: offsets of records appended and not yet noted durable (a prune stays below them)
        self._in_flight: dict[int, set[int]] = {}
        # Every write names its partition (partition_for of its key), so partition_of is never asked.
        self.runtime = CoordinatorRuntime(
            ShareStateShard, append=self.append_records, append_nowait=self.append_records_nowait,
            partition_of=lambda _key: 0,
            refusal=lambda _cmd, code: Written(code), on_event=lambda _event: None,
            clock=partitions.clock, timers=timers, name="share-state")
        self.loading: asyncio.Task[int] | None = None
        self._loads = asyncio.Lock()
        self.closers: list[Callable[[], Awaitable[None]]] = []  # what stops with it (the persister's connections)

    def start(self) -> None:
        """Serve: an existing topic is replayed by the runtime's loader in the background (its
        partitions answer COORDINATOR_LOAD_IN_PROGRESS until then, and `until_loaded` waits); none
        is made with the first share group's use (`ensure`)."""
        self.runtime.start_now()
        info = self.catalogue.topic(TOPIC)
        if info is None:
            return
        self.num_partitions = info.num_partitions
        led = self._led()
        self.runtime.mark_loading(led)
        self.loading = asyncio.get_running_loop().create_task(self.load_all(led), name="share-state-load")

    def serve(self) -> None:
        """The runtime serving (a node over PostgreSQL that did not find the topic at its start and is
        now elected for one of its partitions: `move_partition` follows)."""
        if not self.runtime.running:
            self.runtime.start_now()

    def _led(self) -> list[int]:
        """The partitions whose coordinator runs here: all of them on one node and with `--nodes N`
        (one process runs every node's), only those this node leads over PostgreSQL (the others'
        share-partitions answer NOT_COORDINATOR here: `serving`)."""
        info = self.catalogue.topic(TOPIC)
        if info is None:
            return []
        return [p for p in range(info.num_partitions) if self.catalogue.leads(info, p, None)]

    async def stop(self) -> None:
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
            await asyncio.gather(self.loading, return_exceptions=True)
        await self.runtime.stop()
        for close in self.closers:
            await close()

    def ensure(self) -> None:
        """The topic, made now if it does not exist (its partitions loaded empty); an existing one
        keeps its partition count and is loaded by `start`."""
        if self.catalogue.topic(TOPIC) is None:
            try:
                self.catalogue.create_internal_topic(TOPIC, self.num_partitions, dict(TOPIC_CONFIGS))
            except KafkaError as exc:
                if exc.code is not E.LEADER_NOT_AVAILABLE:
                    raise
                # Over PostgreSQL the topic is made in the background: each node loads the partitions
                # it is elected for as its image shows them (broker/postgres_node.py), empty ones at once.
                log.info("share_state_topic_creating", partitions=self.num_partitions)
                return
            log.info("share_state_topic_created", partitions=self.num_partitions)
            self.runtime.load_empty(range(self.num_partitions))

    async def until_loaded(self) -> None:
        await self.runtime.until_loaded()

    @property
    def loaded_partitions(self) -> int:
        return sum(not self.runtime.loading(p) for p in self.runtime.loaded())

    async def load_all(self, partitions: list[int]) -> int:
        """Replay these partitions (those led here at the start) into their shards, one at a time (each
        partition serves once its own replay is done); how many records were read. One that moved
        meanwhile is unloaded by its move after this."""
        started = time.monotonic()
        count = 0
        for partition in partitions:
            count += await self._load(partition)
            await asyncio.sleep(0)
        log.info("share_state_loaded", records=count,
                 share_partitions=sum(len(shard.states.states) for shard in self.runtime.shards()),
                 load_ms=round(1000 * (time.monotonic() - started), 1))
        return count

    async def _load(self, partition: int) -> int:
        """Replay one partition into a new shard (its notes of durable records started afresh)."""
        async with self._loads:  # the start's loader and a move never replay one partition at once
            self._latest.pop(partition, None)
            records = []
            for offset, record in self._read_partition(partition):
                self._note(partition, record, offset)
                records.append(record)
            await self.runtime.load(partition, records)
        return len(records)

    async def move_partition(self, partition: int, led: bool) -> None:
        """A `__share_group_state` partition's leader moved (a node over PostgreSQL, broker/postgres_node.py),
        as Kafka's ShareCoordinatorService.onElection and onResignation: unloaded (its share-partitions'
        writes answer NOT_COORDINATOR, what waited in its queue is refused), then, if this node leads it
        now, replayed from its log (COORDINATOR_LOAD_IN_PROGRESS meanwhile: share requests wait for it,
        `until_loaded`). The caller marks it loading at once when `led`."""
        if self.loading is not None and not self.loading.done():
            await asyncio.gather(self.loading, return_exceptions=True)
        if (info := self.catalogue.topic(TOPIC)) is not None:
            self.num_partitions = info.num_partitions  # made by another node: its count
        await self.runtime.unload(partition)
        if not led:
            self._latest.pop(partition, None)
            return
        self.runtime.mark_loading([partition])
        count = await self._load(partition)
        log.info("share_state_partition_loaded", partition=partition, records=count)

    def serving(self, group: str, topic_id: uuid.UUID, partition: int) -> ErrorCode | None:
        """Whether this node's share coordinator serves the share-partition's state now (None), else why
        not: NOT_COORDINATOR (another node leads its `__share_group_state` partition),
        COORDINATOR_LOAD_IN_PROGRESS (replaying it), COORDINATOR_NOT_AVAILABLE (not running)."""
        return self.runtime.precheck(partition_for(group, topic_id, partition, self.num_partitions))

    # -- the persisted states --------------------------------------------------------------------

    def state_of(self, group: str, topic_id: uuid.UUID, partition: int) -> PersistedState | None:
        shard = self.runtime.shard(partition_for(group, topic_id, partition, self.num_partitions))
        return None if shard is None else shard.states.states.get((group, topic_id, partition))

    def states(self) -> Iterator[tuple[StateKey, PersistedState]]:
        """Every share-partition's durable state, of every loaded partition."""
        for shard in self.runtime.shards():
            yield from shard.states.states.items()

    def _read_partition(self, partition: int) -> Iterable[tuple[int, ShareStateRecord]]:
        store = self.partitions.replay_store(TOPIC, partition)
        if store is None:
            return

        def skipped(offset: int, end: int, exc: CorruptRecordError) -> int:
            resume = getattr(exc, "resume_offset", end)
            log.error("share_state_batch_skipped", partition=partition, offset=offset, resume_offset=resume,
                      reason=str(exc))
            return resume

        for at, key, value in keyed_records(store, skipped):
            try:
                decoded = decode_share_state(key, value)
            except Exception as exc:  # noqa: BLE001 - one unreadable record, not the partition
                log.error("share_state_record_skipped", partition=partition, offset=at, error=repr(exc))
                continue
            yield at, decoded

    def delete(self, group: str, topic_id: uuid.UUID, partition: int) -> Awaitable[None]:
        """Forget a share-partition's state (a tombstone of its key); the wait for its durability."""
        return self._write(ShareStateRecord(SNAPSHOT, group, topic_id, partition, -1, -1, (), tombstone=True))

    async def delete_topics(self, topic_ids: set[uuid.UUID]) -> int:
        """Deleted topics (Kafka's ShareCoordinatorShard.maybeCleanupShareState): every state of theirs,
        tombstoned now; returns how many, once durable (a failure is logged: the states stay)."""
        waits = [self.delete(g, t, p) for (g, t, p), _ in list(self.states()) if t in topic_ids]
        failed = [r for r in await asyncio.gather(*waits, return_exceptions=True) if isinstance(r, BaseException)]
        if failed:
            log.error("deleted_topics_share_states_failed", states=len(waits), failed=len(failed), error=repr(failed[0]))
        elif waits:
            log.info("deleted_topics_share_states_removed", topic_ids=sorted(map(str, topic_ids)), states=len(waits))
        return len(waits) - len(failed)

    def write(self, group: str, topic_id: uuid.UUID, partition: int, start: int,
              batches: list[tuple[int, int, int, int]]) -> Awaitable[None]:
        """The share-partition's snapshot, handed to its shard now (its snapshot epoch and times are the
        shard's to set) and the wait for it: it returns once durable and replayed, or raises KafkaError
        with the code the runtime answers (nothing of the state changed). Writes of one key are
        appended in call order, so the last snapshot of a key in the log is the last state written."""
        self.writes += 1
        return self._write(ShareStateRecord(SNAPSHOT, group, topic_id, partition, 0, start, tuple(batches),
                                            state_epoch=-1, leader_epoch=-1))

    def _write(self, record: ShareStateRecord) -> Awaitable[None]:
        return self._written(self.submit(WriteState(record)))

    def submit(self, cmd: WriteState) -> asyncio.Future[Written]:
        """The command to its share-partition's turn (the RPCs' way: share_state_rpc.py); its answer."""
        runtime, record = self.runtime, cmd.record
        state_partition = partition_for(record.group, record.topic_id, record.partition, self.num_partitions)
        future: asyncio.Future[Written] = runtime.new_future()
        error = runtime.precheck(state_partition)
        if error is not None:
            future.set_result(Written(error))
        else:
            runtime.dispatch(cmd, state_key(record), future, state_partition)
        return future

    @staticmethod
    async def _written(future: asyncio.Future[Written]) -> None:
        written = await future
        if written.error is not E.NONE:
            raise KafkaError(f"the share-partition state was not written: {written.error.name}", written.error)

    async def append_records(self, state_partition: int, records: list[ShareStateRecord]) -> None:
        """The runtime's writer: one batch, returned once durable (raises KafkaError), then pruned."""
        await self.append_records_nowait(state_partition, records)

    def append_records_nowait(self, state_partition: int, records: list[ShareStateRecord]) -> Awaitable[None]:
        """One batch appended now (raising KafkaError if the log cannot take it: the runtime answers the
        write with it), and the wait for its durability, after which the partition is pruned. The
        shard's writes are PIPELINED: applied at append, answered once durable, so the writes of one
        share-partition share fsyncs as the acknowledgements that make them come."""
        now = self._wall_ms()
        batch = encode_keyed_batch([encode_share_state(r) for r in records], now)
        result = self.partitions.append(TOPIC, state_partition, batch, now_ms=now, headers=[read_header(batch)])
        self._in_flight.setdefault(state_partition, set()).add(result.base_offset)
        return self._durable_then_prune(result.wait_durable(), state_partition, records, result.base_offset)

    async def _durable_then_prune(self, durable: Awaitable[None], state_partition: int,
                                  records: list[ShareStateRecord], offset: int) -> None:
        try:
            await durable
        finally:
            self._in_flight[state_partition].discard(offset)
        for i, record in enumerate(records):
            self._note(state_partition, record, offset + i)
        pruned = self.prune(state_partition, offset + len(records))
        if pruned is not None:
            try:  # answered once the moved log start is durable too, so that a restart keeps it
                await pruned
            except Exception as exc:  # noqa: BLE001 - the state is durable; only the log start may go back
                log.warning("share_state_prune_not_durable", partition=state_partition, error=repr(exc))

    def _note(self, state_partition: int, record: ShareStateRecord, offset: int) -> None:
        """A durable record of a key: its latest unless a later one was noted first."""
        if not record.tombstone and record.record_type != SNAPSHOT:
            return  # a ShareUpdate (Kafka's) needs its snapshot kept
        latest = self._latest.setdefault(state_partition, {})
        key = (record.group, record.topic_id, record.partition)
        known = latest.get(key)
        if known is None or known[0] < offset:
            latest[key] = (offset, not record.tombstone)

    def prune(self, state_partition: int, durable_end: int) -> Awaitable[None] | None:
        """Move the partition's log start to its last redundant offset + 1, no further than
        `durable_end` (every record below it is durable); the wait for that log start's checkpoint,
        which the prunes of the writes made durable meanwhile share (one write off the loop, not two
        fsyncs on it per write), or None when nothing moved."""
        latest = self._latest.get(state_partition, {})
        target = min((offset for offset, alive in latest.values() if alive), default=durable_end)
        target = min(target, durable_end, *self._in_flight.get(state_partition, ()))
        store = self.partitions.replay_store(TOPIC, state_partition)
        if store is None or target <= store.log_start_offset:
            return None
        error, _ = self.partitions.prune(TOPIC, state_partition, target)
        if error:
            log.warning("share_state_prune_failed", partition=state_partition, offset=target, error=error)
            return None
        return store.durable_log_start()
