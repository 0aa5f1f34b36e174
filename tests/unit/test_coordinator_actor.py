"""GroupCoordinatorService: one order per group, replies after durable appends, routing rules,
timers delivered as messages (stale ones dropped), no idle group holding a task, loading."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.service import GroupCoordinatorService
from kbroker.coordinator.config import GroupConfig
from kbroker.protocol.records.classic_records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    OffsetCommitTombstone,
    Record,
)
from kbroker.coordinator.groups.results import DeletedGroup, HeartbeatResult, SyncGroupResult
from kbroker.tests.coordinator_harness import join_request
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers

E = ErrorCode
J = join_request


class MemoryLog:
    """An in-memory `append_records` that can be paused or made to fail."""

    def __init__(self) -> None:
        self.records: dict[int, list[Record]] = {}
        self.gate: asyncio.Event | None = None
        self.held = 0  # appends waiting at the gate
        self.fail_with: BaseException | None = None

    async def __call__(self, partition: int, records: list[Record]) -> None:
        if self.gate is not None:
            self.held += 1
            try:
                await self.gate.wait()
            finally:
                self.held -= 1
        if self.fail_with is not None:
            error, self.fail_with = self.fail_with, None
            raise error
        self.records.setdefault(partition, []).extend(records)

    def all(self) -> list[Record]:
        return [r for records in self.records.values() for r in records]


async def make_service(config: GroupConfig | None = None, *, groups: tuple[str, ...] = ("g",), start: bool = True,
                       **kw) -> tuple[GroupCoordinatorService, ManualClock, MemoryLog]:
    clock = ManualClock(1_000_000)
    log = MemoryLog()
    service = GroupCoordinatorService(log, config=config, timers=KeyedTimers(clock), **kw)
    if start:
        await service.start()
    for partition in {service.partition_for(g) for g in groups}:
        await service.load(partition, [])
    return service, clock, log


async def advance(service: GroupCoordinatorService, clock: ManualClock, ms: int) -> None:
    """Move the manual clock, stopping at each deadline, and let the groups handle expiries."""
    target = clock.now_ms() + ms
    while (due := service.timers.next_deadline_ms()) is not None and due <= target:
        clock.advance(max(0, due - clock.now_ms()))
        await service.advance_timers()
    clock.advance(target - clock.now_ms())
    await service.advance_timers()


async def new_member(service: GroupCoordinatorService, client: str, group: str = "g", **kw) -> str:
    result = await service.join_group(J(group, client_id=client, **kw))
    assert result.error is E.MEMBER_ID_REQUIRED
    return result.member_id


async def stable_group(service: GroupCoordinatorService, clock: ManualClock, n: int, group: str = "g") -> list[str]:
    ids = [await new_member(service, f"c{i}", group) for i in range(n)]
    joins = [asyncio.create_task(service.join_group(J(group, m, client_id=f"c{i}"))) for i, m in enumerate(ids)]
    await service.quiesce()
    while not all(t.done() for t in joins):
        await advance(service, clock, 3_000)
    results = [t.result() for t in joins]
    leader = results[0].leader_id
    assert all(r.error is E.NONE and r.generation_id == 1 and r.leader_id == leader for r in results)
    syncs = [asyncio.create_task(service.sync_group(c.SyncGroup(group, 1, m))) for m in ids if m != leader]
    await service.quiesce()
    assignment = tuple((m, m.encode()) for m in ids)
    assert (await service.sync_group(c.SyncGroup(group, 1, leader, assignments=assignment))).error is E.NONE
    followers = [m for m in ids if m != leader]
    assert [r.assignment for r in await asyncio.gather(*syncs)] == [m.encode() for m in followers]
    return [leader] + [m for m in ids if m != leader]


async def test_several_members_join_concurrently_and_get_one_generation() -> None:
    service, clock, log = await make_service()
    try:
        ids = [await new_member(service, f"client-{i}") for i in range(5)]
        joins = [asyncio.create_task(service.join_group(J(member_id=m, client_id=f"client-{i}")))
                 for i, m in enumerate(ids)]
        await service.quiesce()
        await advance(service, clock, 6_000)
        results = await asyncio.gather(*joins)
        assert {r.generation_id for r in results} == {1}
        leaders = [r for r in results if r.members]
        assert len(leaders) == 1 and {m.member_id for m in leaders[0].members} == set(ids)
        # The leader's SyncGroup releases every member's assignment, after the record is durable.
        leader = leaders[0].member_id
        followers = [asyncio.create_task(service.sync_group(c.SyncGroup("g", 1, m))) for m in ids if m != leader]
        await service.quiesce()
        assert not any(f.done() for f in followers)
        own = await service.sync_group(c.SyncGroup("g", 1, leader, assignments=tuple((m, m.encode()) for m in ids)))
        assert own.assignment == leader.encode()
        assigned = [r.assignment for r in await asyncio.gather(*followers)]
        assert sorted(assigned) == sorted(m.encode() for m in ids if m != leader)
        (record,) = [r for r in log.all() if isinstance(r, GroupMetadataRecord)]
        assert record.generation == 1 and len(record.members) == 5
    finally:
        await service.stop()


async def test_offset_commit_reply_waits_until_the_append_is_durable() -> None:
    service, clock, log = await make_service()
    try:
        log.gate = asyncio.Event()
        commit = asyncio.create_task(service.commit_offsets(c.OffsetCommit(
            "g", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 77, 4, "meta"),)),))))
        fetch = asyncio.create_task(service.fetch_offsets(c.OffsetFetch("g")))
        await service.quiesce_until(lambda: log.held == 1 and service.queued("g") == 1)
        assert not commit.done() and not fetch.done()  # the group's next command waits its turn
        log.gate.set()
        assert (await commit).topics[0].partitions[0].error is E.NONE
        fetched = (await fetch).topics[0].partitions[0]
        assert (fetched.offset, fetched.leader_epoch, fetched.metadata) == (77, 4, "meta")
        (record,) = log.all()
        assert isinstance(record, OffsetCommitRecord) and record.commit_timestamp == clock.wall_ms()
    finally:
        await service.stop()


async def test_a_slow_append_in_one_group_does_not_block_another_group() -> None:
    service, clock, log = await make_service(groups=("slow", "fast"))
    try:
        log.gate = asyncio.Event()
        slow = asyncio.create_task(service.commit_offsets(c.OffsetCommit(
            "slow", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 1),)),))))
        await service.quiesce_until(lambda: log.held == 1)
        result = await asyncio.wait_for(service.fetch_offsets(c.OffsetFetch("fast")), 1)
        assert result.error is E.NONE and not slow.done()
        log.gate.set()
        await slow
    finally:
        await service.stop()


@pytest.mark.parametrize(
    ("failure", "code"),
    [(KafkaError("no", E.NOT_LEADER_OR_FOLLOWER), E.NOT_COORDINATOR), (OSError("disk"), E.UNKNOWN_SERVER_ERROR)],
)
async def test_failed_append_is_translated(failure: BaseException, code: ErrorCode) -> None:
    service, clock, log = await make_service()
    try:
        log.fail_with = failure
        result = await service.commit_offsets(c.OffsetCommit(
            "g", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 1),)),)))
        assert result.topics[0].partitions[0].error is code
        assert (await service.fetch_offsets(c.OffsetFetch("g"))).topics == ()
    finally:
        await service.stop()


async def test_routing_rules() -> None:
    service, clock, log = await make_service(start=False)
    assert (await service.heartbeat(c.Heartbeat("g", 1, "m"))).error is E.COORDINATOR_NOT_AVAILABLE
    await service.start()
    try:
        assert (await service.join_group(J(""))).error is E.INVALID_GROUP_ID
        assert (await service.fetch_offsets(c.OffsetFetch(""))).error is not E.INVALID_GROUP_ID
        other = next(f"x{i}" for i in range(1000) if service.partition_for(f"x{i}") != service.partition_for("g"))
        assert (await service.join_group(J(other))).error is E.NOT_COORDINATOR
        assert (await service.list_groups()).error is E.NONE
    finally:
        await service.stop()


async def test_a_started_service_makes_its_futures_on_its_loop_without_asking_asyncio(monkeypatch) -> None:
    """Python 3.11's asyncio.get_running_loop makes a getpid system call: once per request it was
    about 1% of a Heartbeat's cost (`strace -c` of the broker under `bench.groups` rates)."""
    service, clock, log = await make_service(start=False)
    refused = service.submit(c.Heartbeat("g", 1, "m"))  # before start: asyncio's loop, as ever
    assert refused.get_loop() is asyncio.get_running_loop()
    await service.start()
    try:
        assert service.loop is asyncio.get_running_loop()

        def no_lookup() -> None:
            raise AssertionError("asked asyncio for the running loop")

        monkeypatch.setattr(asyncio, "get_running_loop", no_lookup)
        answered = service.submit(c.Heartbeat("g", 1, "m"))
        assert answered.get_loop() is service.loop
        assert (await answered).error is E.UNKNOWN_MEMBER_ID
    finally:
        monkeypatch.undo()
        await service.stop()
    assert service.loop is None  # stopped: the next start (on whatever loop) keeps its own


async def test_requests_while_loading() -> None:
    service, clock, log = await make_service(groups=())
    partition = service.partition_for("g")
    records = [OffsetCommitRecord("g", "t", 0, i, -1, "", 1) for i in range(5_000)]
    try:
        loading = asyncio.create_task(service.load(partition, records))
        await asyncio.sleep(0)  # load() replays a batch, then yields to the loop
        assert not loading.done()
        assert (await service.join_group(J())).error is E.COORDINATOR_LOAD_IN_PROGRESS
        assert (await service.fetch_offsets(c.OffsetFetch("g"))).error is E.COORDINATOR_LOAD_IN_PROGRESS
        assert await service.heartbeat(c.Heartbeat("g", 1, "m")) == HeartbeatResult(E.NONE)  # blind ack
        assert await service.sync_group(c.SyncGroup("g", 1, "m")) == SyncGroupResult(E.REBALANCE_IN_PROGRESS)
        assert (await service.list_groups()).error is E.COORDINATOR_LOAD_IN_PROGRESS
        await loading
        fetched = await service.fetch_offsets(c.OffsetFetch("g", (c.TopicPartitions("t", (0,)),)))
        assert fetched.topics[0].partitions[0].offset == 4_999
        assert (await service.list_groups()).error is E.NONE
    finally:
        await service.stop()


async def test_load_empty_serves_at_once_like_a_load_of_nothing() -> None:
    """A coordinator built with its first group request (broker/app.py) loads partitions known to hold
    no record without a turn of the loop: the request behind it is answered as after `load(p, [])`."""
    service, clock, log = await make_service(groups=())
    try:
        partition = service.partition_for("g")
        service.mark_loading(range(service.num_partitions))
        assert (await service.join_group(J())).error is E.COORDINATOR_LOAD_IN_PROGRESS
        service.load_empty(range(service.num_partitions))
        assert not service.is_loading and service.loaded_partitions == service.num_partitions
        joined = service.join_group(J())  # no await between load_empty and the request
        assert (await joined).error is E.MEMBER_ID_REQUIRED
        committed = await service.commit_offsets(c.OffsetCommit(
            "other", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 7),)),)))
        assert committed.topics[0].partitions[0].error is E.NONE
        assert [r.offset for r in log.all()] == [7]
        with pytest.raises(RuntimeError):
            service.load_empty([partition])  # a loaded partition is never reset to empty
    finally:
        await service.stop()


async def test_session_expiry_arrives_as_a_message() -> None:
    service, clock, log = await make_service()
    try:
        leader, follower = await stable_group(service, clock, 2)
        for _ in range(2):
            await advance(service, clock, 5_000)
            await service.heartbeat(c.Heartbeat("g", 1, leader))
        result = await service.heartbeat(c.Heartbeat("g", 1, follower))
        assert result.error is E.UNKNOWN_MEMBER_ID
    finally:
        await service.stop()


async def test_stale_expiry_behind_a_heartbeat_is_dropped() -> None:
    service, clock, log = await make_service()
    try:
        leader, follower = await stable_group(service, clock, 2)
        await advance(service, clock, 9_000)
        await service.heartbeat(c.Heartbeat("g", 1, leader))
        log.gate = asyncio.Event()  # the group gets stuck in an append...
        commit = asyncio.create_task(service.commit_offsets(c.OffsetCommit(
            "g", 1, leader, (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 1),)),))))
        await service.quiesce_until(lambda: log.held == 1)
        beat = asyncio.create_task(service.heartbeat(c.Heartbeat("g", 1, follower)))
        await service.quiesce_until(lambda: service.queued("g") == 1)
        clock.advance(1_000)  # ...while the follower's old deadline passes: expiry queued after the beat
        service.timers.advance_to(clock.now_ms())
        log.gate.set()
        await commit
        assert (await beat).error is E.NONE
        await service.quiesce()
        assert (await service.heartbeat(c.Heartbeat("g", 1, follower))).error is E.NONE
        assert service.machine(service.partition_for("g")).group("g").has(follower)
    finally:
        await service.stop()


async def test_a_group_holds_a_queue_only_while_it_waits_for_a_write() -> None:
    service, clock, log = await make_service()
    try:
        log.gate = asyncio.Event()
        commit = asyncio.create_task(service.commit_offsets(c.OffsetCommit(
            "g", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 5),)),))))
        await service.quiesce_until(lambda: log.held == 1)
        assert service.busy_groups == 1
        log.gate.set()
        await commit
        await service.quiesce()  # no clock moves, no real time passes: the queue went with its work
        assert service.busy_groups == 0
        fetched = await service.fetch_offsets(c.OffsetFetch("g"))
        assert fetched.topics[0].partitions[0].offset == 5
        assert service.busy_groups == 0  # an idle group's fetch ran inline
    finally:
        await service.stop()


async def test_load_then_describe_list_and_delete_groups() -> None:
    service, clock, log = await make_service(groups=())
    try:
        partition = service.partition_for("g")
        await service.load(partition, [
            OffsetCommitRecord("g", "t", 0, 3, -1, "", clock.wall_ms()),
            GroupMetadataRecord("g", "consumer", 4, None, None, clock.wall_ms(), ()),
        ])
        (described,) = await service.describe_groups(["g"])
        assert (described.state, described.protocol_type) == ("Empty", "consumer")
        assert [g.group_id for g in (await service.list_groups()).groups] == ["g"]
        assert await service.delete_groups(["g", "g-missing"]) == [
            DeletedGroup("g", E.NONE),
            DeletedGroup("g-missing", E.NOT_COORDINATOR if service.partition_for("g-missing") != partition
                         else E.GROUP_ID_NOT_FOUND),
        ]
        assert OffsetCommitTombstone("g", "t", 0) in log.all()
        assert (await service.list_groups()).groups == ()
    finally:
        await service.stop()


async def test_periodic_retention_check_expires_offsets() -> None:
    config = GroupConfig(offsets_retention_minutes=1, offsets_retention_check_interval_ms=30_000)
    service, clock, log = await make_service(config)
    try:
        await service.commit_offsets(c.OffsetCommit(
            "g", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 5),)),)))
        await advance(service, clock, 59_999)
        assert OffsetCommitTombstone("g", "t", 0) not in log.all()  # the 30 s check found it young
        await advance(service, clock, 1)
        assert OffsetCommitTombstone("g", "t", 0) in log.all()  # the 60 s check: retention reached
        assert service.machine(service.partition_for("g")).group("g") is None
    finally:
        await service.stop()


async def test_stop_answers_parked_requests() -> None:
    service, clock, log = await make_service()
    member = await new_member(service, "c")
    parked = asyncio.create_task(service.join_group(J(member_id=member, client_id="c")))
    await service.quiesce()
    await service.stop()
    assert (await parked).error is E.NOT_COORDINATOR


async def test_real_timer_driver_completes_a_rebalance() -> None:
    log = MemoryLog()
    service = GroupCoordinatorService(log, config=GroupConfig(group_initial_rebalance_delay_ms=50))
    await service.start()
    try:
        await service.load(service.partition_for("g"), [])
        member = await new_member(service, "c")
        result = await asyncio.wait_for(service.join_group(J(member_id=member, client_id="c")), 2)
        assert result.generation_id == 1 and result.leader_id == member
    finally:
        await service.stop()


async def test_stop_during_an_append_answers_the_waiting_commit() -> None:
    service, clock, log = await make_service()
    log.gate = asyncio.Event()  # never opened
    commit = asyncio.create_task(service.commit_offsets(c.OffsetCommit(
        "g", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, 1),)),))))
    await service.quiesce_until(lambda: log.held == 1)
    await service.stop()
    assert (await asyncio.wait_for(commit, 1)).topics[0].partitions[0].error is E.COORDINATOR_NOT_AVAILABLE
