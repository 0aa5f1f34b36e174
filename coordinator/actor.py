"""The asyncio shell around the per-partition state machines.

One actor per active group: an asyncio task with a mailbox, so a group's commands run one at a
time without locks (and while a group awaits its append, its next command waits). Actors hold no
state of their own; an idle actor retires and is rebuilt on demand from the in-memory group.

Timers: one KeyedTimers for the broker. An expiry is enqueued into the owning group's mailbox and
only handled if `claim` says it is still that key's live timer, so an expiry that lost a race
with a heartbeat is dropped.

Persistence: `append_records(partition, records)` is injected (broker/offsets_topic.py provides it);
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
from collections import deque
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

import structlog

from ..protocol.errors import ErrorCode
from ..purgatory.clock import Clock, SystemClock
from ..purgatory.timers import KeyedTimers, TimerFired

from . import commands as c
from .classic import GroupStateMachine, random_member_id
from .config import GroupConfig
from .controls import ControlResult, GroupFaults
from .controls import describe as describe_control
from .execute import AppendNowait, AppendRecords, execute_outcome
from .history import RebalanceHistory, in_progress
from .outcome import CancelTimer, Event, GroupExpiry, Outcome, RebalanceCompleted, Reply, TimerOp
from .partitioning import partition_for
from .records import Record
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

E = ErrorCode
log = structlog.get_logger("kbroker.coordinator")

RETENTION_CHECK_KEY = "offsets-retention-check"
# Offsets APIs, DescribeGroups and DeleteGroups accept an empty group id for backward
# compatibility (Kafka 4's GroupCoordinatorService refuses only null there); the others do not.
_EMPTY_ID_ALLOWED = (c.OffsetCommit, c.OffsetFetch, c.DescribeGroup, c.DeleteGroup)

R = TypeVar("R")


@dataclasses.dataclass(slots=True)
class _Request:
    cmd: c.Request


@dataclasses.dataclass(slots=True)
class _Expiry:
    cmd: GroupExpiry
    key: str
    token: int


@dataclasses.dataclass(slots=True)
class _Internal:
    cmd: c.TimerExpiry  # periodic work with no timer key of its own (offset retention)


_Item = _Request | _Expiry | _Internal


class _GroupActor:
    __slots__ = ("group_id", "partition", "mailbox", "busy", "task", "_wakeup", "_service")

    def __init__(self, service: GroupCoordinatorService, group_id: str, partition: int) -> None:
        self.group_id = group_id
        self.partition = partition
        self.mailbox: deque[_Item] = deque()
        self.busy = False
        self._wakeup = asyncio.Event()
        self._service = service
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"group-actor:{group_id}")

    def put(self, item: _Item) -> None:
        self.mailbox.append(item)
        self._wakeup.set()

    async def _run(self) -> None:
        idle_s = self._service.actor_idle_ms / 1000.0
        while True:
            while self.mailbox:
                item = self.mailbox.popleft()
                self.busy = True
                try:
                    await self._service._process(self, item)
                finally:
                    self.busy = False
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), idle_s)
            except TimeoutError:
                if not self.mailbox:  # nothing can slip in: no await since the check
                    self._service._retire(self)
                    return


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
        actor_idle_ms: int = 30_000,
        num_partitions: int | None = None,
        topics: Callable[[], Any] | None = None,
    ) -> None:
        self.config = config or GroupConfig()
        self.clock: Clock = clock or (timers.clock if timers is not None else SystemClock())
        # Without injected timers the service runs its own driver; a broker passes its shared one.
        self.timers = timers or KeyedTimers(self.clock)
        self._runs_timer_driver = timers is None
        self.actor_idle_ms = actor_idle_ms
        self.num_partitions = num_partitions or self.config.offsets_topic_num_partitions
        self._append_records = append_records
        self._append_records_nowait = append_records_nowait
        self._new_member_id = new_member_id
        self._topics = topics  # the topics image consumer groups assign from (name -> TopicImage)
        self._machines: dict[int, GroupStateMachine] = {}
        self._loading: set[int] = set()
        self._pending_durable: dict[int, asyncio.Future] = {}  # per partition: its latest pipelined write
        self._offline: set[int] = set()
        self._unloads: set[asyncio.Task] = set()
        self._actors: dict[str, _GroupActor] = {}
        self._running = False
        self._driver: asyncio.Task[None] | None = None
        # Seeing into it: each group's recent rebalances, and the faults test controls inject.
        self.history = RebalanceHistory()
        self.faults = GroupFaults()

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._running = True
        if self._runs_timer_driver and self._driver is None:
            self._driver = asyncio.get_running_loop().create_task(self.timers.run(), name="coordinator-timers")
        self._schedule_retention_check()

    async def stop(self) -> None:
        self._running = False
        self.timers.cancel(RETENTION_CHECK_KEY)
        for partition in list(self._machines):
            await self.unload(partition)
        actors, self._actors = list(self._actors.values()), {}
        for actor in actors:
            actor.task.cancel()
            for item in actor.mailbox:
                if isinstance(item, _Request):
                    self._deliver(Reply(item.cmd.reply_to, error_result_for(item.cmd, E.COORDINATOR_NOT_AVAILABLE)))
            actor.mailbox.clear()
        await asyncio.gather(*(a.task for a in actors), return_exceptions=True)
        if self._driver is not None:
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)
            self._driver = None

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    async def load(self, partition: int, records: Iterable[Record]) -> None:
        """Become coordinator for `partition`: replay its records (tombstones included), then
        serve its groups. Requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS."""
        if partition in self._machines:
            await self.unload(partition)
        self._loading.add(partition)
        try:
            machine = GroupStateMachine(partition, self.config, new_member_id=self._new_member_id,
                                        **({"topics": self._topics} if self._topics is not None else {}))
            machine.begin_load()
            for i, record in enumerate(records, 1):
                machine.replay(record)
                if i % 1024 == 0:
                    await asyncio.sleep(0)  # a long log must not starve other partitions
            self._machines[partition] = machine
            await self._execute(machine, machine.finish_load(self.clock.wall_ms()))
        finally:
            self._loading.discard(partition)
        log.debug("partition_loaded", partition=partition, groups=len(machine.groups))

    async def unload(self, partition: int) -> None:
        machine = self._machines.pop(partition, None)
        if machine is not None:
            await self._execute(machine, machine.unload(self.clock.wall_ms()))
            log.debug("partition_unloaded", partition=partition)

    def mark_loading(self, partitions: Iterable[int]) -> None:
        """At start-up, before replay begins: these partitions answer COORDINATOR_LOAD_IN_PROGRESS
        (not NOT_COORDINATOR) until `load` has replayed them."""
        self._loading.update(partitions)

    @property
    def is_loading(self) -> bool:
        return bool(self._loading)

    def machine(self, partition: int) -> GroupStateMachine | None:
        return self._machines.get(partition)

    # -- API -----------------------------------------------------------------------------------

    async def join_group(self, cmd: c.JoinGroup) -> JoinGroupResult:
        return await self._call(cmd)

    async def sync_group(self, cmd: c.SyncGroup) -> SyncGroupResult:
        return await self._call(cmd)

    async def heartbeat(self, cmd: c.Heartbeat) -> HeartbeatResult:
        return await self._call(cmd)

    async def leave_group(self, cmd: c.LeaveGroup) -> LeaveGroupResult:
        return await self._call(cmd)

    async def commit_offsets(self, cmd: c.OffsetCommit) -> OffsetCommitResult:
        return await self._call(cmd)

    async def fetch_offsets(self, cmd: c.OffsetFetch) -> OffsetFetchResult:
        return await self._call(cmd)

    async def delete_offsets(self, cmd: c.OffsetDelete) -> OffsetDeleteResult:
        return await self._call(cmd)

    async def describe_groups(self, group_ids: Iterable[str], api_version: int = 5) -> list[DescribedGroup]:
        return list(await asyncio.gather(*(self._call(c.DescribeGroup(g, api_version)) for g in group_ids)))

    async def delete_groups(self, group_ids: Iterable[str]) -> list[DeletedGroup]:
        return list(await asyncio.gather(*(self._call(c.DeleteGroup(g)) for g in group_ids)))

    async def list_groups(self, cmd: c.ListGroups | None = None) -> ListGroupsResult:
        cmd = cmd or c.ListGroups()
        if not self._running:
            return ListGroupsResult(E.COORDINATOR_NOT_AVAILABLE)
        groups = [
            g for p in sorted(self._machines) for g in self._machines[p].list_groups(cmd.states_filter, cmd.types_filter)
        ]
        # Groups of partitions still loading are missing; say so.
        return ListGroupsResult(E.COORDINATOR_LOAD_IN_PROGRESS if self._loading else E.NONE, tuple(groups))

    # -- routing -------------------------------------------------------------------------------

    async def _call(self, cmd: Any) -> Any:
        return await self.submit(cmd)

    def submit(self, cmd: Any) -> asyncio.Future[Any]:
        """Queue a command in its group's mailbox now and return the future of its result. Whatever
        the caller sends to the same group afterwards is handled after it."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        error = self._precheck(cmd)
        if error is not None:
            future.set_result(self._refusal(cmd, error))
            return future
        cmd = dataclasses.replace(cmd, reply_to=future)
        self._actor(self.partition_for(cmd.group_id), cmd.group_id).put(_Request(cmd))
        if self.faults and (delay_s := self.faults.join_delay_s(cmd)):
            return asyncio.ensure_future(_answer_later(future, delay_s))
        return future

    def _precheck(self, cmd: c.Request) -> ErrorCode | None:
        group_id = cmd.group_id
        if group_id is None or (group_id == "" and not isinstance(cmd, _EMPTY_ID_ALLOWED)):
            return E.INVALID_GROUP_ID
        if not self._running:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._machines:
            return E.NOT_COORDINATOR
        if self.faults:
            return self.faults.precheck(cmd, self.clock.now_ms())
        return None

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

    def _actor(self, partition: int, group_id: str) -> _GroupActor:
        actor = self._actors.get(group_id)
        if actor is None:
            actor = self._actors[group_id] = _GroupActor(self, group_id, partition)
        return actor

    def _retire(self, actor: _GroupActor) -> None:
        if self._actors.get(actor.group_id) is actor:
            del self._actors[actor.group_id]

    async def _process(self, actor: _GroupActor, item: _Item) -> None:
        cmd = item.cmd
        if isinstance(item, _Expiry) and not self.timers.claim(item.key, item.token):
            return  # stale: the key was re-armed or cancelled after this expiry fired
        machine = self._machines.get(actor.partition)
        if isinstance(item, _Request):
            error = self._precheck(item.cmd)
            if error is not None:
                self._deliver(Reply(item.cmd.reply_to, self._refusal(item.cmd, error)))
                return
        if machine is None or actor.partition in self._loading:
            return
        try:
            outcome = machine.handle(cmd, self.clock.wall_ms())
            if isinstance(cmd, c.OffsetFetch):
                self._hold_until_durable(actor.partition, cmd, outcome)
        except Exception:  # noqa: BLE001 - one bad command must not take the group down
            log.exception(
                "coordinator_error", group=actor.group_id, api=type(cmd).__name__,
                member=getattr(cmd, "member_id", None),
            )
            if isinstance(item, _Request):
                self._deliver(Reply(item.cmd.reply_to, error_result_for(item.cmd, E.UNKNOWN_SERVER_ERROR)))
            return
        await self._execute(machine, outcome)

    async def _execute(self, machine: GroupStateMachine, outcome: Outcome) -> None:
        await execute_outcome(
            machine, outcome,
            now_ms=self.clock.wall_ms,
            append=self._append_records,
            append_nowait=self._append_records_nowait,
            deliver=self._deliver,
            apply_timer=partial(self._apply_timer, machine.partition),
            on_event=self._on_event,
            on_pending=self._pending_durable.__setitem__,
            on_storage_failure=self._on_storage_failure,
        )

    def _hold_until_durable(self, partition: int, cmd: c.OffsetFetch, outcome: Outcome) -> None:
        """Answer an OffsetFetch only once every pipelined write it could see is on disk."""
        pending = self._pending_durable.get(partition)
        if pending is None or pending.done():
            if pending is not None and not pending.cancelled() and pending.exception() is not None:
                outcome.replies = [Reply(r.to, error_result_for(cmd, E.NOT_COORDINATOR)) for r in outcome.replies]
            return
        replies, outcome.replies = outcome.replies, []

        def release(done: asyncio.Future) -> None:
            failed = done.cancelled() or done.exception() is not None
            for reply in replies:
                self._deliver(Reply(reply.to, error_result_for(cmd, E.NOT_COORDINATOR)) if failed else reply)

        pending.add_done_callback(release)

    def _on_storage_failure(self, partition: int, code: ErrorCode) -> None:
        """The partition's log is fenced: stop serving its groups until a restart reloads them."""
        if code is not E.KAFKA_STORAGE_ERROR or partition in self._offline:
            return
        self._offline.add(partition)
        log.error("coordinator_partition_offline", partition=partition, error=code.name)
        machine = self._machines.pop(partition, None)
        if machine is not None:
            task = asyncio.ensure_future(self._execute(machine, machine.unload(self.clock.wall_ms())))
            self._unloads.add(task)
            task.add_done_callback(self._unloads.discard)

    @staticmethod
    def _deliver(reply: Reply) -> None:
        future = reply.to
        if isinstance(future, asyncio.Future) and not future.done():
            future.set_result(reply.result)

    def _apply_timer(self, partition: int, op: TimerOp) -> None:
        if isinstance(op, CancelTimer):
            self.timers.cancel(op.key)
        else:
            self.timers.schedule(op.key, op.delay_ms, partial(self._on_timer, partition, op.expiry))

    def _on_timer(self, partition: int, expiry: GroupExpiry, fired: TimerFired) -> None:
        self._actor(partition, expiry.group_id).put(_Expiry(expiry, fired.key, fired.token))

    def _schedule_retention_check(self) -> None:
        self.timers.schedule(
            RETENTION_CHECK_KEY, self.config.offsets_retention_check_interval_ms, self._on_retention_check
        )

    def _on_retention_check(self, fired: TimerFired) -> None:
        if not self.timers.claim(fired.key, fired.token) or not self._running:
            return
        for partition, machine in self._machines.items():
            if partition in self._loading:
                continue
            for group_id in [*machine.groups, *machine.consumer.groups]:
                self._actor(partition, group_id).put(_Internal(c.OffsetExpiryCheck(group_id)))
        self._schedule_retention_check()

    def _on_event(self, event: Event) -> None:
        fields = dataclasses.asdict(event)
        if isinstance(event, RebalanceCompleted):
            log.info("rebalance_completed", **fields)
            self.history.record_rebalance(event, self.clock.wall_ms())
        elif hasattr(event, "assignment_epoch"):  # consumer groups (KIP-848)
            log.info("consumer_group_assignment_changed", **fields)
        else:
            log.warning("coordinator_write_failed", **{k: str(v) for k, v in fields.items()})

    # -- seeing into groups (the admin endpoint, metrics, test controls) ------------------------

    def group_status(self, group_id: str) -> dict[str, Any] | None:
        """A group's live state, read between two of its commands (everything runs on one loop)."""
        machine = self._machines.get(self.partition_for(group_id))
        group = machine.group(group_id) if machine is not None else None
        if group is None:
            return None
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
        for machine in self._machines.values():
            yield from machine.groups.values()

    @property
    def loaded_partitions(self) -> int:
        return len(self._machines)

    async def control(self, cmd: Any) -> ControlResult:
        """Run a test control (coordinator/controls.py) in its group's actor."""
        result = await self.submit(cmd)
        if result.error is E.NONE:
            self.note_control(cmd.group_id, describe_control(cmd))
        return result

    async def run_offsets_retention(self) -> int:
        """Run the offsets retention check now (a test control); returns once every group handled it."""
        groups = [(p, g) for p, m in self._machines.items() if p not in self._loading for g in list(m.groups)]
        for partition, group_id in groups:
            self._actor(partition, group_id).put(_Internal(c.OffsetExpiryCheck(group_id)))
        # A group's commands run in order: once a later one is answered, the check has run.
        await asyncio.gather(*(self.submit(c.DescribeGroup(g, 5)) for _, g in groups))
        return len(groups)

    def note_control(self, group_id: str, what: str) -> None:
        """One log event and one history line per test control applied to a group."""
        log.info("test_control_applied", group_id=group_id, control=what)
        self.history.record_control(group_id, what, self.clock.wall_ms())

    # -- tests and tools -----------------------------------------------------------------------

    async def quiesce(self, max_rounds: int = 1000) -> None:
        """Wait until no actor has work queued or in progress (for tests driving a manual clock)."""
        for _ in range(max_rounds):
            await asyncio.sleep(0)
            if all(not a.busy and not a.mailbox for a in self._actors.values()):
                return
        raise TimeoutError("actors did not settle")

    async def advance_timers(self, now_ms: int | None = None) -> None:
        """Fire due timers at `now_ms` (default: the clock) and let the actors handle them."""
        self.timers.advance_to(self.clock.now_ms() if now_ms is None else now_ms)
        await self.quiesce()

    @property
    def active_actors(self) -> int:
        return len(self._actors)
