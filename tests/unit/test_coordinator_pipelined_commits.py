"""Offset commits on the pipelined path: appended and applied at once, answered only once durable,
so a group's commits need not wait for each other's fsync; membership writes keep the strict path."""

from __future__ import annotations

import asyncio

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.service import GroupCoordinatorService
from kbroker.coordinator.config import GroupConfig
from kbroker.protocol.records.classic_records import GroupMetadataRecord, OffsetCommitRecord, Record
from kbroker.tests.coordinator_harness import join_request
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers

E = ErrorCode


class DeferredLog:
    """`append_records_nowait` whose fsyncs complete only when the test says so."""

    def __init__(self) -> None:
        self.appended: list[Record] = []
        self.pending: list[asyncio.Future] = []
        self.fail_append: KafkaError | None = None

    def nowait(self, partition: int, records: list[Record]):
        if self.fail_append is not None:
            error, self.fail_append = self.fail_append, None
            raise error
        self.appended.extend(records)
        fsync = asyncio.get_running_loop().create_future()
        self.pending.append(fsync)
        return fsync

    def sync_all(self, error: BaseException | None = None) -> None:
        for f in self.pending:
            if not f.done():
                f.set_exception(error) if error else f.set_result(None)


async def service_with(log: DeferredLog) -> GroupCoordinatorService:
    async def strict(partition: int, records: list[Record]) -> None:
        fsync = log.nowait(partition, records)
        log.sync_all()
        await fsync

    service = GroupCoordinatorService(strict, append_records_nowait=log.nowait, timers=KeyedTimers(ManualClock(0)),
                                      config=GroupConfig(group_initial_rebalance_delay_ms=0))
    await service.start()
    await service.load(service.partition_for("g"), [])
    return service


def commit(offset: int, partition: int = 0) -> c.OffsetCommit:
    return c.OffsetCommit("g", -1, "", (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(partition, offset),)),))


async def test_commits_of_one_group_are_applied_before_their_fsync_and_answered_after() -> None:
    log = DeferredLog()
    service = await service_with(log)
    first, second = service.submit(commit(10)), service.submit(commit(20, partition=1))
    await service.quiesce()
    # Both appended although neither fsync has completed: the group did not wait.
    assert [r.offset for r in log.appended if isinstance(r, OffsetCommitRecord)] == [10, 20]
    assert not first.done() and not second.done()
    log.sync_all()
    assert (await first).topics[0].partitions[0].error == E.NONE
    assert (await second).topics[0].partitions[0].error == E.NONE
    fetched = await service.fetch_offsets(c.OffsetFetch("g", None))
    assert {(t.name, p.partition, p.offset) for t in fetched.topics for p in t.partitions} == {("t", 0, 10), ("t", 1, 20)}
    await service.stop()


async def test_offset_fetch_serves_only_durable_offsets() -> None:
    """A fetch behind a commit still waiting for its fsync is answered once that fsync lands."""
    log = DeferredLog()
    service = await service_with(log)
    committed = service.submit(commit(10))
    for stable in (False, True):
        fetch = service.submit(c.OffsetFetch("g", None, require_stable=stable))
        await service.quiesce()
        assert not fetch.done()  # the commit it would show is not on disk yet
    log.sync_all()
    assert (await committed).topics[0].partitions[0].error == E.NONE
    fetched = await fetch
    assert [(p.partition, p.offset) for t in fetched.topics for p in t.partitions] == [(0, 10)]
    await service.stop()


async def test_a_failed_fsync_is_never_served_and_unloads_the_partition() -> None:
    log = DeferredLog()
    service = await service_with(log)
    committed = service.submit(commit(10))
    fetch = service.submit(c.OffsetFetch("g", None))
    await service.quiesce()
    log.sync_all(KafkaError("fsync failed", E.KAFKA_STORAGE_ERROR))
    assert (await committed).topics[0].partitions[0].error == E.NOT_COORDINATOR
    assert (await fetch).error == E.NOT_COORDINATOR
    # Memory held the failed commit; the partition no longer serves it, nor anything else.
    later = await service.fetch_offsets(c.OffsetFetch("g", None))
    assert later.error == E.NOT_COORDINATOR
    again = await service.submit(commit(11))
    assert again.topics[0].partitions[0].error == E.NOT_COORDINATOR
    await service.stop()


async def test_a_failed_fsync_answers_the_commit_with_the_translated_error() -> None:
    log = DeferredLog()
    service = await service_with(log)
    pending = service.submit(commit(5))
    await service.quiesce()
    log.sync_all(KafkaError("disk gone", E.KAFKA_STORAGE_ERROR))
    assert (await pending).topics[0].partitions[0].error == E.NOT_COORDINATOR  # NOTES.md section 5
    await service.stop()


async def test_an_append_refused_at_once_is_not_applied() -> None:
    log = DeferredLog()
    service = await service_with(log)
    log.fail_append = KafkaError("no partition", E.UNKNOWN_TOPIC_OR_PARTITION)
    result = await service.submit(commit(7))
    assert result.topics[0].partitions[0].error == E.COORDINATOR_NOT_AVAILABLE
    fetched = await service.fetch_offsets(c.OffsetFetch("g", None))
    assert all(p.offset == -1 for t in fetched.topics for p in t.partitions)
    await service.stop()


async def test_membership_writes_keep_the_strict_path() -> None:
    """A join that completes a generation writes GroupMetadata through `append_records` (awaited)."""
    log = DeferredLog()
    service = await service_with(log)
    join = asyncio.ensure_future(service.join_group(join_request("g", require_known_member_id=False)))
    for _ in range(50):
        if join.done():
            break
        await service.advance_timers()
    joined = await asyncio.wait_for(join, 5)
    assert joined.error == E.NONE
    synced = await asyncio.wait_for(service.sync_group(c.SyncGroup(
        "g", joined.generation_id, joined.member_id, assignments=((joined.member_id, b"a"),))), 10)
    assert synced.error == E.NONE
    assert any(isinstance(r, GroupMetadataRecord) for r in log.appended)
    await service.stop()
