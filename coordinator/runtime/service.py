"""The group coordinator's front: routes each request to the runtime of its group's partition.

    GroupCoordinatorService          (this module)  prechecks once, routing by partition, life cycle
      -> PartitionRuntime            (runtime.py)   one per loaded `__consumer_offsets` partition:
                                                    load/unload, per-group order, write-then-respond
        -> GroupStateMachine         (classic.py)   the shard: every group of the partition, each
                                                    group type behind `handle` / `replay`

As Kafka's GroupCoordinatorService over its CoordinatorRuntime and GroupCoordinatorShard. The
service knows no group type: a new one is a handler in the shard (as consumer_machine.py is for
KIP-848 groups) plus its commands, not an edit here.

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
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...purgatory.clock import Clock, SystemClock
from ...purgatory.timers import KeyedTimers, TimerFired

from ..groups import commands as c
from ..groups.classic.classic import GroupStateMachine, random_member_id
from ..config import GroupConfig
from ..groups.consumer.consumer_heartbeat import AssignmentChanged
from ..groups.classic.controls import ControlResult, ExpireMember, ExpireSessions, GroupFaults
from ..groups.classic.controls import describe as describe_control
from .execute import AppendNowait, AppendRecords
from ..groups.history import RebalanceHistory, in_progress
from .outcome import Event, RebalanceCompleted, WriteFailed
from ..partitioning import partition_for
from ...protocol.records.classic_records import Record
from ..groups.results import (
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
from .runtime import Expiry, GroupQueue, Internal, Item, PartitionRuntime

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
        append_records: AppendRecords,
        *,
        append_records_nowait: AppendNowait | None = None,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        timers: KeyedTimers | None = None,
        new_member_id: Callable[[str], str] = random_member_id,
        num_partitions: int | None = None,
        topics: Callable[[], Any] | None = None,
        max_batch_bytes: Callable[[int], int] | None = None,
    ) -> None:
        self.config = config or GroupConfig()
        self.clock: Clock = clock or (timers.clock if timers is not None else SystemClock())
        # Without injected timers the service runs its own driver; a broker passes its shared one.
        self.timers = timers or KeyedTimers(self.clock)
        self._runs_timer_driver = timers is None
        self.num_partitions = num_partitions or self.config.offsets_topic_num_partitions
        self._append_records = append_records
        self._append_records_nowait = append_records_nowait
        self._new_member_id = new_member_id
        self._topics = topics  # the topics image consumer groups assign from (name -> TopicImage)
        self._max_batch_bytes = max_batch_bytes  # partition -> its largest batch (max.message.bytes)
        self._runtimes: dict[int, PartitionRuntime] = {}
        self._loading: set[int] = set()
        self._offline: set[int] = set()
        self._unloads: set[asyncio.Task] = set()
        self._queues: set[GroupQueue] = set()  # every busy group's queue, of every runtime
        self._partition_of: dict[str, int] = {}
        self._running = False
        # The loop serving it, kept at start: asking asyncio for the running loop costs a system call
        # (getpid, Python 3.11's check for a fork) on every request that makes a future.
        self.loop: asyncio.AbstractEventLoop | None = None
        self._driver: asyncio.Task[None] | None = None
        # Seeing into it: each group's recent rebalances, and the faults test controls inject.
        self.history = RebalanceHistory()
        self.faults = GroupFaults()

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.start_now()

    def start_now(self) -> None:
        """`start`, for a caller that cannot wait (a coordinator built with its first use)."""
        self._running = True
        self.loop = asyncio.get_running_loop()
        if self._runs_timer_driver and self._driver is None:
            self._driver = self.loop.create_task(self.timers.run(), name="coordinator-timers")
        self._schedule_retention_check()

    async def stop(self) -> None:
        self._running = False
        self.timers.cancel(RETENTION_CHECK_KEY)
        for partition in list(self._runtimes):
            await self.unload(partition)
        queues, tasks = list(self._queues), []
        self._queues.clear()
        for queue in queues:
            if queue.task is not None:
                queue.task.cancel()
                tasks.append(queue.task)
            for item in queue.items:
                if not isinstance(item, (Expiry, Internal)):
                    deliver_error(item, E.COORDINATOR_NOT_AVAILABLE)
            queue.items.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._driver is not None:
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)
            self._driver = None
        self.loop = None  # a request after the stop gets its future on the loop it comes from

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
        if partition in self._runtimes:
            await self.unload(partition)
        self._loading.add(partition)
        try:
            runtime = self._new_runtime(partition)
            await runtime.replay(records)
            self._runtimes[partition] = runtime
            await runtime.resume()
        finally:
            self._loading.discard(partition)
        log.debug("partition_loaded", partition=partition, groups=len(runtime.shard.groups))

    def load_empty(self, partitions: Iterable[int]) -> None:
        """Become coordinator at once for partitions that hold no record (`load` with nothing to
        replay): a coordinator built with the first group request serves that request."""
        for partition in partitions:
            if partition in self._runtimes:
                raise RuntimeError(f"partition {partition} is already loaded")
            runtime = self._new_runtime(partition)
            runtime.load_empty()
            self._runtimes[partition] = runtime
            self._loading.discard(partition)

    def _new_runtime(self, partition: int) -> PartitionRuntime:
        extra: dict[str, Any] = {}
        if self._topics is not None:
            extra["topics"] = self._topics
        if self._max_batch_bytes is not None:
            extra["max_batch_bytes"] = partial(self._max_batch_bytes, partition)
        shard = GroupStateMachine(partition, self.config, new_member_id=self._new_member_id, **extra)
        return PartitionRuntime(
            shard, clock=self.clock, timers=self.timers, append=self._append_records,
            append_nowait=self._append_records_nowait, queues=self._queues, on_event=self._on_event,
            on_storage_failure=self._on_storage_failure, requeue=self._requeue,
        )

    async def unload(self, partition: int) -> None:
        runtime = self._runtimes.pop(partition, None)
        if runtime is not None:
            await runtime.unload()
            log.debug("partition_unloaded", partition=partition)

    def mark_loading(self, partitions: Iterable[int]) -> None:
        """At start-up, before replay begins: these partitions answer COORDINATOR_LOAD_IN_PROGRESS
        (not NOT_COORDINATOR) until `load` has replayed them."""
        self._loading.update(partitions)

    @property
    def is_loading(self) -> bool:
        return bool(self._loading)

    def machine(self, partition: int) -> GroupStateMachine | None:
        runtime = self._runtimes.get(partition)
        return runtime.shard if runtime is not None else None

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

    async def delete_groups(self, group_ids: Iterable[str]) -> list[DeletedGroup]:
        return list(await asyncio.gather(*(self.submit(c.DeleteGroup(g)) for g in group_ids)))

    async def list_groups(self, cmd: c.ListGroups | None = None) -> ListGroupsResult:
        cmd = cmd or c.ListGroups()
        if not self._running:
            return ListGroupsResult(E.COORDINATOR_NOT_AVAILABLE)
        groups = [
            g for p in sorted(self._runtimes)
            for g in self._runtimes[p].shard.list_groups(cmd.states_filter, cmd.types_filter)
        ]
        # Groups of partitions still loading are missing; say so.
        return ListGroupsResult(E.COORDINATOR_LOAD_IN_PROGRESS if self._loading else E.NONE, tuple(groups))

    # -- routing -------------------------------------------------------------------------------

    def submit(self, cmd: Any, future: asyncio.Future[Any] | None = None) -> asyncio.Future[Any]:
        """Hand a command to its group now and return the future of its result (`future` when the
        caller brings its own). Whatever the caller sends to the same group afterwards is handled
        after it. The command belongs to the service from here on (its `reply_to` is set)."""
        if future is None:
            future = (self.loop or asyncio.get_running_loop()).create_future()
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
        error = self._precheck(cmd, group_id)
        if error is not None:
            future.set_result(self._refusal(cmd, error))
            return
        cmd.reply_to = future
        self._runtimes[self.partition_for(group_id)].dispatch(cmd, group_id)

    def _precheck(self, cmd: Any, group_id: str) -> ErrorCode | None:
        if not self._running:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._runtimes:
            return E.NOT_COORDINATOR
        faults = self.faults
        if faults.not_coordinator_until or faults.fail_next:  # the only faults a precheck consults
            return faults.precheck(cmd, self.clock.now_ms())
        return None

    def _requeue(self, cmd: Item) -> None:
        """A request queued in a runtime that was unloaded before its turn: refused as if it came
        now, or handed to the partition's new runtime (after its queued commands)."""
        group_id = cmd.group_id
        error = self._precheck(cmd, group_id)
        if error is not None:
            deliver_error(cmd, error, self._refusal(cmd, error))
        else:
            self._runtimes[self.partition_for(group_id)].dispatch(cmd, group_id)

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

    def _on_storage_failure(self, partition: int, code: ErrorCode) -> None:
        """The partition's log is fenced: stop serving its groups until a restart reloads them."""
        if code is not E.KAFKA_STORAGE_ERROR or partition in self._offline:
            return
        self._offline.add(partition)
        log.error("coordinator_partition_offline", partition=partition, error=code.name)
        runtime = self._runtimes.pop(partition, None)
        if runtime is not None:
            task = asyncio.ensure_future(runtime.unload())
            self._unloads.add(task)
            task.add_done_callback(self._unloads.discard)

    # -- periodic work and events --------------------------------------------------------------

    def _schedule_retention_check(self) -> None:
        self.timers.schedule(
            RETENTION_CHECK_KEY, self.config.offsets_retention_check_interval_ms, self._on_retention_check
        )

    def _on_retention_check(self, fired: TimerFired) -> None:
        if not self.timers.claim(fired.key, fired.token) or not self._running:
            return
        for partition, runtime in self._runtimes.items():
            if partition in self._loading:
                continue
            for group_id in runtime.shard.group_ids():
                runtime.enqueue(Internal(c.OffsetExpiryCheck(group_id)), group_id)
        self._schedule_retention_check()

    def _on_event(self, event: Event) -> None:
        fields = dataclasses.asdict(event)
        if isinstance(event, WriteFailed):
            log.warning(event.log_event, **{k: v.name if isinstance(v, ErrorCode) else str(v)
                                            for k, v in fields.items()})
            return
        log.info(event.log_event, **fields)
        if isinstance(event, RebalanceCompleted):
            self.history.record_rebalance(event, self.clock.wall_ms())
        elif isinstance(event, AssignmentChanged):
            self.history.record_epoch(event, self.clock.wall_ms())

    # -- seeing into groups (the admin endpoint, metrics, test controls) ------------------------

    def group_status(self, group_id: str) -> dict[str, Any] | None:
        """A group's live state, read between two of its commands (everything runs on one loop)."""
        machine = self.machine(self.partition_for(group_id))
        group = machine.group(group_id) if machine is not None else None
        if group is None:
            consumer_group = machine.consumer.groups.get(group_id) if machine is not None else None
            return None if consumer_group is None else _consumer_group_status(consumer_group)
        return {
            "group_id": group_id,
            "group_type": "classic",
            "state": str(group.state),
            "generation": group.generation_id,
            "protocol_type": group.protocol_type or "",
            "protocol": group.protocol_name or "",
            "leader": group.leader_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                 "client_host": m.client_host}
                for m in group.members.values()
            ],
            "rebalance_in_progress": in_progress(group, self.clock.wall_ms()),
        }

    def groups(self) -> Iterable[Any]:
        """Every loaded group (ClassicGroup objects, read-only for callers)."""
        for runtime in self._runtimes.values():
            yield from runtime.shard.groups.values()

    def consumer_groups(self) -> Iterable[Any]:
        """Every loaded consumer group of the new protocol (KIP-848; read-only for callers)."""
        for runtime in self._runtimes.values():
            yield from runtime.shard.consumer.groups.values()

    @property
    def loaded_partitions(self) -> int:
        return len(self._runtimes)

    async def control(self, cmd: Any) -> ControlResult:
        """Run a test control (coordinator/groups/classic/controls.py) in its group's turn."""
        result = await (self.expire_sessions(cmd.group_id) if isinstance(cmd, ExpireSessions) else self.submit(cmd))
        if result.error is E.NONE:
            self.note_control(cmd.group_id, describe_control(cmd))
        return result

    async def expire_sessions(self, group_id: str) -> ControlResult:
        """End every member's session now. A consumer group's members are fenced one command each,
        in turn: each fence starts from the group the one before left (consumer_controls.py)."""
        status = self.group_status(group_id)
        if status is None or status["group_type"] != "consumer":
            return await self.submit(ExpireSessions(group_id))
        expired = 0
        for member in status["members"]:
            result = await self.submit(ExpireMember(group_id, member["member_id"]))
            expired += result.error is E.NONE  # one that left meanwhile is UNKNOWN_MEMBER_ID: already gone
        return ControlResult(E.NONE, f"{expired} member(s) expired")

    async def run_offsets_retention(self) -> int:
        """Run the offsets retention check now (a test control); returns once every group handled it."""
        groups = [(r, g) for p, r in self._runtimes.items() if p not in self._loading for g in list(r.shard.groups)]
        for runtime, group_id in groups:
            runtime.dispatch(Internal(c.OffsetExpiryCheck(group_id)), group_id)
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
        await self.quiesce_until(lambda: not self._queues, max_rounds)

    @staticmethod
    async def quiesce_until(done: Callable[[], bool], max_rounds: int = 1000) -> None:
        """Let the loop run, one turn at a time, until `done()` holds (no real time involved)."""
        for _ in range(max_rounds):
            await asyncio.sleep(0)
            if done():
                return
        raise TimeoutError("the coordinator did not reach the expected state")

    def queued(self, group_id: str) -> int:
        """How many commands of `group_id` wait behind the one in progress (0 when idle)."""
        runtime = self._runtimes.get(self.partition_for(group_id))
        return runtime.queued(group_id) if runtime is not None else 0

    async def advance_timers(self, now_ms: int | None = None) -> None:
        """Fire due timers at `now_ms` (default: the clock) and let the groups handle them."""
        self.timers.advance_to(self.clock.now_ms() if now_ms is None else now_ms)
        await self.quiesce()

    @property
    def busy_groups(self) -> int:
        """Groups with commands queued or in progress (an idle group has nothing here)."""
        return len(self._queues)


def deliver_error(cmd: c.Request, error: ErrorCode, result: Any = None) -> None:
    deliver_to = cmd.reply_to
    if isinstance(deliver_to, asyncio.Future) and not deliver_to.done():
        deliver_to.set_result(result if result is not None else error_result_for(cmd, error))


def _consumer_group_status(group: Any) -> dict[str, Any]:
    """A consumer group (KIP-848) as the HTTP endpoint shows a group. Its members reconcile one by
    one, each at its own epoch: there is no group-wide rebalance in progress to report."""
    return {
        "group_id": group.group_id,
        "group_type": "consumer",
        "state": str(group.state),
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
             "client_host": m.client_host, "member_epoch": m.member_epoch, "state": m.state.name.lower()}
            for m in group.members.values()
        ],
        "rebalance_in_progress": None,
    }
