"""The per-partition runtime under the service, in memory with a manual clock: an idle group's
command runs inline (`submit_now`), a busy group's commands keep their order, replies that depend
on a write leave only once it is durable, an unload during a pending write answers everyone, and a
group holds a queue (a task) only while it has work, with no real time involved."""

from __future__ import annotations

import asyncio

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.protocol.records.classic_records import OffsetCommitRecord, Record
from kbroker.coordinator.groups.results import HeartbeatResult
from kbroker.coordinator.groups.service import GroupCoordinatorService
from kbroker.protocol.errors import ErrorCode
from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers
from kbroker.tests.coordinator_harness import join_request

E = ErrorCode


class GatedLog:
    """`append_records` that holds each append until the test opens the gate."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.gate = asyncio.Event()
        self.held = 0

    async def __call__(self, partition: int, records: list[Record]) -> None:
        self.held += 1
        try:
            await self.gate.wait()
        finally:
            self.held -= 1
        self.records.extend(records)


def commit(offset: int, group: str = "g") -> c.OffsetCommit:
    return c.OffsetCommit(group, -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, offset),)),))


async def service_with(append, **kw) -> tuple[GroupCoordinatorService, ManualClock]:  # noqa: ANN001
    clock = ManualClock(1_000_000)
    service = GroupCoordinatorService(append, timers=KeyedTimers(clock),
                                      config=GroupConfig(group_initial_rebalance_delay_ms=0), **kw)
    await service.start()
    await service.load(service.partition_for("g"), [])
    return service, clock


async def stable_member(service: GroupCoordinatorService) -> str:
    """One member, generation 1, synced (its GroupMetadata written)."""
    first = await service.join_group(join_request("g", client_id="c"))
    assert first.error is E.MEMBER_ID_REQUIRED
    join = asyncio.ensure_future(service.join_group(join_request("g", first.member_id, client_id="c")))
    await service.quiesce_until(lambda: bool(service.timers.next_deadline_ms() is not None))
    await service.advance_timers()
    joined = await join
    synced = await service.sync_group(c.SyncGroup("g", 1, joined.member_id,
                                                  assignments=((joined.member_id, b"a"),)))
    assert synced.error is E.NONE
    return joined.member_id


async def test_submit_now_answers_an_idle_groups_heartbeat_inline() -> None:
    async def append(partition: int, records: list[Record]) -> None:
        return None

    service, clock = await service_with(append)
    try:
        member = await stable_member(service)
        await service.quiesce()
        result = service.submit_now(c.Heartbeat("g", 1, member))
        assert result == HeartbeatResult(E.NONE)  # the result itself: no future, no loop turn
        assert service.busy_groups == 0
        refused = service.submit_now(c.Heartbeat("", 1, member))
        assert refused.error is E.INVALID_GROUP_ID
    finally:
        await service.stop()


async def test_a_busy_groups_commands_wait_their_turn_in_order() -> None:
    log = GatedLog()
    service, clock = await service_with(log)
    try:
        first = service.submit_now(commit(1))
        assert isinstance(first, asyncio.Future)  # a write to wait for: the group is busy now
        later = [service.submit_now(commit(2)), service.submit_now(c.OffsetFetch("g")), service.submit_now(commit(3))]
        assert all(isinstance(f, asyncio.Future) for f in later)
        await service.quiesce_until(lambda: log.held == 1)
        assert service.queued("g") == 3 and not any(f.done() for f in [first, *later])
        # Write-then-respond: nothing is answered or applied before its append is durable.
        assert not service.offsets_of("g")
        log.gate.set()
        answers = await asyncio.gather(first, *later)
        assert [r.topics[0].partitions[0].error for r in (answers[0], answers[1], answers[3])] == [E.NONE] * 3
        assert answers[2].topics[0].partitions[0].offset == 2  # the fetch saw commit 2, not 3
        assert [r.offset for r in log.records if isinstance(r, OffsetCommitRecord)] == [1, 2, 3]
    finally:
        await service.stop()


async def test_other_groups_run_inline_while_one_waits() -> None:
    log = GatedLog()
    service, clock = await service_with(log)
    other = next(f"o{i}" for i in range(1000) if service.partition_for(f"o{i}") == service.partition_for("g"))
    try:
        pending = service.submit_now(commit(1))
        await service.quiesce_until(lambda: log.held == 1)
        fetched = service.submit_now(c.OffsetFetch(other))
        assert not isinstance(fetched, asyncio.Future) and fetched.error is E.NONE
        log.gate.set()
        assert (await pending).topics[0].partitions[0].error is E.NONE
    finally:
        await service.stop()


async def test_unload_during_a_pending_write_answers_the_queued_requests() -> None:
    log = GatedLog()
    service, clock = await service_with(log)
    partition = service.partition_for("g")
    try:
        writing = service.submit(commit(1))
        queued = service.submit(c.OffsetFetch("g"))
        await service.quiesce_until(lambda: log.held == 1)
        await service.unload(partition)
        log.gate.set()
        assert (await writing).topics[0].partitions[0].error is E.NONE  # its append was under way
        assert (await queued).error is E.NOT_COORDINATOR  # its turn came after the unload
        await service.quiesce()
        assert service.busy_groups == 0
    finally:
        await service.stop()


async def test_a_request_queued_across_a_reload_runs_on_the_new_runtime() -> None:
    log = GatedLog()
    service, clock = await service_with(log)
    partition = service.partition_for("g")
    try:
        writing = service.submit(commit(1))
        queued = service.submit(c.OffsetFetch("g"))
        await service.quiesce_until(lambda: log.held == 1)
        await service.unload(partition)
        await service.load(partition, [OffsetCommitRecord("g", "t", 0, 9, -1, "", clock.wall_ms())])
        log.gate.set()
        await writing
        assert (await queued).topics[0].partitions[0].offset == 9  # the reloaded partition answered
    finally:
        await service.stop()


async def test_expiries_are_queued_by_the_timer_and_handled_on_the_manual_clock() -> None:
    async def append(partition: int, records: list[Record]) -> None:
        return None

    service, clock = await service_with(append)
    try:
        member = await stable_member(service)
        await service.quiesce()
        clock.advance(10_000)  # the default session timeout
        service.timers.advance_to(clock.now_ms())
        assert service.busy_groups == 1  # the expiry waits for its turn, outside the timer driver
        await service.quiesce()
        assert service.busy_groups == 0
        assert (service.submit_now(c.Heartbeat("g", 1, member))).error is E.UNKNOWN_MEMBER_ID
    finally:
        await service.stop()
