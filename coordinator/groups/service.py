"""The group coordinator's front (Kafka's GroupCoordinatorService): what a group request means
before it reaches its group.

    GroupCoordinatorService   (this module)            prechecks once, group ids -> partitions,
                                                       retention check, history, test controls
      -> CoordinatorRuntime   (runtime/runtime.py)     loaded partitions, routing, life cycle
        -> PartitionRuntime   (runtime/partition.py)   per-group order, write-then-respond, timers
          -> GroupCoordinatorShard (shard.py)          the shard: every group of the partition, of
                                                       every registered type (registry.py)

Persistence: `append_records(partition, records)` is injected (broker/coordinators/offsets_topic.py provides it);
it must return once the records are durable and raise KafkaError otherwise.

The durability contract (each write carries its regime, outcome.Durability): membership writes are
STRICT (on disk before memory changes); offset commits and deletes are PIPELINED (applied at
append, answered after their fsync). OffsetFetch serves only durable offsets: when its partition
has a pipelined write still waiting for its fsync, the answer waits for that fsync (Kafka serves
committed state; its `require_stable` concerns pending transactional offsets, which this broker
does not have, so both modes get the same durable answer). A storage failure (KAFKA_STORAGE_ERROR:
the log is fenced until restart) unloads the partition: its groups answer NOT_COORDINATOR, as
Kafka's do when the log directory goes offline, and nothing applied but not durable is served.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...purgatory.clock import Clock
from ...purgatory.timers import KeyedTimers, TimerFired

from . import commands as c
from .classic.classic import random_member_id
from ..config import GroupConfig
from .classic.controls import ControlResult, ExpireSessions, GroupFaults
from .classic.controls import describe as describe_control
from ..runtime.execute import AppendNowait, AppendRecords
from .group_types import GroupTypeFactory
from .history import RebalanceHistory
from .registry import GROUP_TYPES
from ..partitioning import partition_for
from ...protocol.records.classic_records import Record
from .results import (
    DeletedGroup,
    DescribedGroup,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    SyncGroupResult,
    error_result_for,
)
from ..runtime.runtime import CoordinatorRuntime
from ..runtime.shard import PartitionWriter
from .shard import GroupCoordinatorShard

E = ErrorCode
log = structlog.get_logger("kbroker.coordinator")

RETENTION_CHECK_KEY = "offsets-retention-check"
# Offsets APIs, DescribeGroups and DeleteGroups accept an empty group id for backward
# compatibility (Kafka 4's GroupCoordinatorService refuses only null there); the others do not.
_EMPTY_ID_ALLOWED = (c.OffsetCommit, c.OffsetFetch, c.DescribeGroup, c.DeleteGroup)
# Group id -> partition, so Java's String.hashCode is computed once per group, not per request.
# Bounded: when full it starts over (a broker with more live groups than this pays the hash again).
_PARTITION_CACHE_MAX = 1 << 16


async def _answer_later(future: asyncio.Future[Any], delay_s: float) -> Any:
    result = await future
    await asyncio.sleep(delay_s)
    return result


class GroupCoordinatorService:
    def __init__(
        self,
        append_records: AppendRecords | None = None,
        *,
        writer: PartitionWriter | None = None,
        append_records_nowait: AppendNowait | None = None,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        timers: KeyedTimers | None = None,
        new_member_id: Callable[[str], str] = random_member_id,
        num_partitions: int | None = None,
        topics: Callable[[], Any] | None = None,
        max_batch_bytes: Callable[[int], int] | None = None,
        group_types: Iterable[GroupTypeFactory] = GROUP_TYPES,
        group_config: Callable[[str, str], str | None] | None = None,
    ) -> None:
        """Records go through `writer` (the broker's `__consumer_offsets` adapter), or through the
        `append_records` (and `append_records_nowait`) functions a test gives. `group_types`: the
        types every partition's shard runs (registry.py's by default)."""
        self.config = config or GroupConfig()
        self.num_partitions = num_partitions or self.config.offsets_topic_num_partitions
        if writer is not None:
            append_records, append_records_nowait = writer.append_records, writer.append_records_nowait
        if append_records is None:
            raise TypeError("a writer or append_records is needed")
        self._new_member_id = new_member_id
        self._topics = topics  # the topics image consumer groups assign from (name -> TopicImage)
        self._max_batch_bytes = max_batch_bytes  # partition -> its largest batch (max.message.bytes)
        self._group_types = tuple(group_types)
        self._group_config = group_config  # (group id, name) -> the group's config override, or None
        self._partition_of: dict[str, int] = {}
        self.runtime = CoordinatorRuntime(
            self._new_shard, append=append_records, append_nowait=append_records_nowait,
            partition_of=self.partition_for, refusal=self._refusal, on_event=self._on_event,
            clock=clock, timers=timers, name="groups",
        )
        self.clock: Clock = self.runtime.clock
        self.timers = self.runtime.timers
        # Seeing into it: each group's recent rebalances, and the faults test controls inject.
        self.history = RebalanceHistory()
        # Whoever acts on the shards' events beside the log and the history (the broker's share-partitions).
        self.event_listeners: list[Callable[[Any], None]] = []
        self.faults = GroupFaults()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.runtime.loop

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.start_now()

    def start_now(self) -> None:
        """`start`, for a caller that cannot wait (a coordinator built with its first use)."""
        self.runtime.start_now()
        self._schedule_retention_check()

    async def stop(self) -> None:
        self.timers.cancel(RETENTION_CHECK_KEY)
        await self.runtime.stop()

    def partition_for(self, group_id: str) -> int:
        partition = self._partition_of.get(group_id)
        if partition is None:
            if len(self._partition_of) >= _PARTITION_CACHE_MAX:
                self._partition_of.clear()
            # Unwrapped: this dict is the cache of group ids, which need no second one in partition_for's.
            partition = self._partition_of[group_id] = partition_for.__wrapped__(group_id, self.num_partitions)
        return partition

    async def load(self, partition: int, records: Iterable[Record]) -> None:
        """Become coordinator for `partition`: replay its records (tombstones included), then
        serve its groups. Requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS."""
        await self.runtime.load(partition, records)

    def load_empty(self, partitions: Iterable[int]) -> None:
        """Become coordinator at once for partitions that hold no record (`load` with nothing to
        replay): a coordinator built with the first group request serves that request."""
        self.runtime.load_empty(partitions)

    def _new_shard(self, partition: int) -> GroupCoordinatorShard:
        extra: dict[str, Any] = {}
        if self._topics is not None:
            extra["topics"] = self._topics
        if self._max_batch_bytes is not None:
            extra["max_batch_bytes"] = partial(self._max_batch_bytes, partition)
        return GroupCoordinatorShard(partition, self.config, new_member_id=self._new_member_id,
                                     group_types=self._group_types, group_config=self._group_config, **extra)

    async def unload(self, partition: int) -> None:
        await self.runtime.unload(partition)

    def mark_loading(self, partitions: Iterable[int]) -> None:
        """At start-up, before replay begins: these partitions answer COORDINATOR_LOAD_IN_PROGRESS
        (not NOT_COORDINATOR) until `load` has replayed them."""
        self.runtime.mark_loading(partitions)

    @property
    def is_loading(self) -> bool:
        return self.runtime.is_loading

    async def until_loaded(self) -> None:
        """Return once no partition is loading (the start-up replay of `__consumer_offsets` is done)."""
        await self.runtime.until_loaded()

    def machine(self, partition: int) -> GroupCoordinatorShard | None:
        return self.runtime.shard(partition)

    # -- API -----------------------------------------------------------------------------------

    async def join_group(self, cmd: c.JoinGroup) -> JoinGroupResult:
        return await self.submit(cmd)

    async def sync_group(self, cmd: c.SyncGroup) -> SyncGroupResult:
        return await self.submit(cmd)

    async def heartbeat(self, cmd: c.Heartbeat) -> HeartbeatResult:
        return await self.submit(cmd)

    async def leave_group(self, cmd: c.LeaveGroup) -> LeaveGroupResult:
        return await self.submit(cmd)

    async def commit_offsets(self, cmd: c.OffsetCommit) -> OffsetCommitResult:
        return await self.submit(cmd)

    async def fetch_offsets(self, cmd: c.OffsetFetch) -> OffsetFetchResult:
        return await self.submit(cmd)

    async def delete_offsets(self, cmd: c.OffsetDelete) -> OffsetDeleteResult:
        return await self.submit(cmd)

    async def describe_groups(self, group_ids: Iterable[str], api_version: int = 5) -> list[DescribedGroup]:
        return list(await asyncio.gather(*(self.submit(c.DescribeGroup(g, api_version)) for g in group_ids)))

    async def delete_groups(self, group_ids: Iterable[str],
                            pending: Mapping[str, Iterable[tuple[str, int]]] | None = None) -> list[DeletedGroup]:
        """`pending`: group -> partitions an open transaction committed for it (tombstoned too)."""
        pending = pending or {}
        return list(await asyncio.gather(*(self.submit(c.DeleteGroup(g, pending=tuple(sorted(pending.get(g, ())))))
                                           for g in group_ids)))

    async def list_groups(self, cmd: c.ListGroups | None = None) -> ListGroupsResult:
        cmd = cmd or c.ListGroups()
        if not self.runtime.running:
            return ListGroupsResult(E.COORDINATOR_NOT_AVAILABLE)
        groups = [
            g for p in self.runtime.loaded()
            for g in self.runtime.shard(p).list_groups(cmd.states_filter, cmd.types_filter)
        ]
        # Groups of partitions still loading are missing; say so.
        return ListGroupsResult(E.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading else E.NONE, tuple(groups))

    # -- routing -------------------------------------------------------------------------------

    def submit(self, cmd: Any, future: asyncio.Future[Any] | None = None) -> asyncio.Future[Any]:
        """Hand a command to its group now and return the future of its result (`future` when the
        caller brings its own). Whatever the caller sends to the same group afterwards is handled
        after it. The command belongs to the service from here on (its `reply_to` is set)."""
        if future is None:
            future = self.runtime.new_future()
        self._route(cmd, future)
        if self.faults.join_delay_ms and (delay_s := self.faults.join_delay_s(cmd)):
            return asyncio.ensure_future(_answer_later(future, delay_s))
        return future

    def submit_now(self, cmd: Any) -> Any:
        """As `submit`, but when the group is idle and the command needs no write and no wait
        (a Heartbeat, an OffsetFetch with nothing pending, ...) it has already run: its result is
        returned as is. Otherwise an asyncio.Future of the result."""
        future = self.submit(cmd)
        if future.done() and future.exception() is None:
            return future.result()
        return future  # still running, or failed: the caller's future handling reports it

    def _route(self, cmd: Any, future: asyncio.Future[Any]) -> None:
        """The prechecks, once per request; then the group's runtime runs or queues it."""
        group_id = cmd.group_id
        if group_id is None or (group_id == "" and not isinstance(cmd, _EMPTY_ID_ALLOWED)):
            future.set_result(self._refusal(cmd, E.INVALID_GROUP_ID))
            return
        partition = self.partition_for(group_id)
        error = self.runtime.precheck(partition)
        faults = self.faults
        if error is None and (faults.not_coordinator_until or faults.fail_next):  # the only faults a precheck consults
            error = faults.precheck(cmd, self.clock.now_ms())
        if error is not None:
            future.set_result(self._refusal(cmd, error))
            return
        self.runtime.dispatch(cmd, group_id, future, partition)

    @staticmethod
    def _refusal(cmd: c.Request, error: ErrorCode) -> Any:
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            if isinstance(cmd, c.Heartbeat):
                return HeartbeatResult(E.NONE)  # blind ack: the group's state is not known yet
            if isinstance(cmd, c.SyncGroup):
                # The rebalance state was lost with the old coordinator; older clients do not
                # know LOAD_IN_PROGRESS for SyncGroup, and this makes them rejoin.
                return SyncGroupResult(E.REBALANCE_IN_PROGRESS)
        return error_result_for(cmd, error)

    # -- deleted topics ------------------------------------------------------------------------

    def delete_topic_offsets(self, topics: Iterable[str],
                             pending: Mapping[str, Iterable[tuple[str, int]]] | None = None) -> Awaitable[int]:
        """Topics were deleted (Kafka's GroupCoordinatorService.onMetadataUpdate -> onTopicsDeleted on
        every shard): each loaded group with offsets of them, or with partitions of them in `pending`
        (group -> partitions an open transaction committed), tombstones them. Dispatched in this turn,
        so whatever a group is sent afterwards (a commit to a topic created again under the name) comes
        after; the awaitable returns the number of tombstones once they are durable. Partitions still
        loading, or led elsewhere, are not touched (Kafka's runtime skips them too)."""
        names = frozenset(topics)
        futures: list[asyncio.Future[Any]] = []
        if self.runtime.running and names:
            held: dict[int, dict[str, tuple[tuple[str, int], ...]]] = {}
            for group_id, keys in (pending or {}).items():
                held.setdefault(self.partition_for(group_id), {})[group_id] = tuple(keys)
            for shard in self.runtime.shards():
                partition = shard.partition
                mine = held.get(partition, {})
                for group_id in dict.fromkeys([*shard.offsets.groups_with(names), *mine]):
                    future = self.runtime.new_future()
                    self.runtime.dispatch(c.DeleteTopicOffsets(group_id, names, mine.get(group_id, ())), group_id,
                                          future, partition)
                    futures.append(future)
        return self._topic_offsets_deleted(names, futures)

    async def _topic_offsets_deleted(self, names: frozenset[str], futures: list[asyncio.Future[Any]]) -> int:
        results = await asyncio.gather(*futures)
        tombstones = sum(len(t.partitions) for r in results if r.error is E.NONE for t in r.topics)
        failed = sorted({r.error.name for r in results if r.error is not E.NONE})
        if failed:  # the offsets stay (Kafka logs it too): a storage failure, or the partition moved meanwhile
            log.error("deleted_topics_offsets_failed", topics=sorted(names), groups=len(futures), errors=failed)
        elif futures:
            log.info("deleted_topics_offsets_removed", topics=sorted(names), groups=len(futures), tombstones=tombstones)
        return tombstones

    # -- periodic work and events --------------------------------------------------------------

    def _schedule_retention_check(self) -> None:
        self.timers.schedule(
            RETENTION_CHECK_KEY, self.config.offsets_retention_check_interval_ms, self._on_retention_check
        )

    def _on_retention_check(self, fired: TimerFired) -> None:
        if not self.timers.claim(fired.key, fired.token) or not self.runtime.running:
            return
        for shard in self.runtime.shards():
            for group_id in shard.group_ids():
                self.runtime.dispatch_internal(shard.partition, c.OffsetExpiryCheck(group_id), group_id)
        self._schedule_retention_check()

    def _on_event(self, event: Any) -> None:
        for listener in self.event_listeners:
            listener(event)
        fields = dataclasses.asdict(event)
        if getattr(event, "log_level", "info") == "warning":
            log.warning(event.log_event, **{k: v.name if isinstance(v, ErrorCode) else str(v)
                                            for k, v in fields.items()})
            return
        log.info(event.log_event, **fields)
        self.history.record_event(event, self.clock.wall_ms())

    # -- seeing into groups (the admin endpoint, metrics, test controls) ------------------------

    def group_status(self, group_id: str) -> dict[str, Any] | None:
        """A group's live state, read between two of its commands (everything runs on one loop)."""
        shard = self.machine(self.partition_for(group_id))
        return shard.group_status(group_id, self.clock.wall_ms()) if shard is not None else None

    def groups(self) -> Iterable[Any]:
        """Every loaded group, whatever its type (`group.group_type`; read-only for callers)."""
        for shard in self.runtime.shards():
            yield from shard.groups.values()

    def offsets_of(self, group_id: str) -> Any:
        """The committed offsets of a loaded group: (topic, partition) -> OffsetAndMetadata."""
        shard = self.machine(self.partition_for(group_id))
        return shard.offsets.of(group_id) if shard is not None else {}

    @property
    def loaded_partitions(self) -> int:
        return self.runtime.loaded_partitions

    async def control(self, cmd: Any) -> ControlResult:
        """Run a test control (coordinator/groups/classic/controls.py) in its group's turn."""
        result = await self.submit(cmd)
        if result.error is E.NONE:
            self.note_control(cmd.group_id, describe_control(cmd))
        return result

    async def expire_sessions(self, group_id: str) -> ControlResult:
        """End every member's session now, in the group's turn (its type decides how)."""
        return await self.submit(ExpireSessions(group_id))

    async def run_offsets_retention(self) -> int:
        """Run the offsets retention check now (a test control); returns once every group handled it."""
        groups = [(s.partition, g) for s in self.runtime.shards() for g in s.group_ids()]
        for partition, group_id in groups:
            self.runtime.dispatch_internal(partition, c.OffsetExpiryCheck(group_id), group_id, now=True)
        # A group's commands run in order: once a later one is answered, the check has run.
        await asyncio.gather(*(self.submit(c.DescribeGroup(g, 5)) for _, g in groups))
        return len(groups)

    def note_control(self, group_id: str, what: str) -> None:
        """One log event and one history line per test control applied to a group."""
        log.info("test_control_applied", group_id=group_id, control=what)
        self.history.record_control(group_id, what, self.clock.wall_ms())

    # -- tests and tools -----------------------------------------------------------------------

    async def quiesce(self, max_rounds: int = 1000) -> None:
        """Wait until no group has work queued or in progress (for tests driving a manual clock)."""
        await self.runtime.quiesce(max_rounds)

    quiesce_until = staticmethod(CoordinatorRuntime.quiesce_until)

    def queued(self, group_id: str) -> int:
        """How many commands of `group_id` wait behind the one in progress (0 when idle)."""
        return self.runtime.queued(group_id)

    async def advance_timers(self, now_ms: int | None = None) -> None:
        """Fire due timers at `now_ms` (default: the clock) and let the groups handle them."""
        await self.runtime.advance_timers(now_ms)

    @property
    def busy_groups(self) -> int:
        """Groups with commands queued or in progress (an idle group has nothing here)."""
        return self.runtime.busy_keys
