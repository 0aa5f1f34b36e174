"""What a group costs in memory: a group that only holds committed offsets (most groups of a long-lived
cluster) carries no member bookkeeping, and the topic names of its offsets are shared with every
other group's, however each commit or replayed record spelled them."""

from __future__ import annotations

import tracemalloc

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups.classic.group import ClassicGroup, GroupState
from kbroker.protocol.records.classic_records import OffsetCommitRecord
from kbroker.tests.coordinator_harness import Harness
from kbroker.protocol.errors import ErrorCode


def _commit(group: str, topic: str, offset: int) -> c.OffsetCommit:
    return c.OffsetCommit(group, -1, "", (c.OffsetCommitTopic(topic, (c.OffsetCommitPartition(0, offset),)),))


def _fresh(text: str) -> str:
    return "".join(list(text))  # an equal string that is not the same object, as a decoder makes


def test_a_group_with_only_committed_offsets_allocates_no_member_containers():
    h = Harness(GroupConfig())
    assert h.call(_commit("simple", "orders", 5)).topics[0].partitions[0].error is ErrorCode.NONE
    h.call(c.OffsetFetch("simple", (c.TopicPartitions("orders", (0,)),)))
    group = h.group("simple")
    assert group.is_state(GroupState.EMPTY) and h.offsets("simple")
    assert (group._pending_members, group._pending_sync_members, group._static_members,
            group._supported_protocols) == (None, None, None, None)


def test_member_containers_appear_on_first_use_and_behave_as_before():
    group = ClassicGroup("g", 0)
    assert not group.pending_members and group.static_members == {} and not group.supported_protocols
    group.pending_members.add("m-1")
    group.supported_protocols.update(["range"])
    assert group.pending_members == {"m-1"} and group.supported_protocols["range"] == 1


def test_offsets_of_many_groups_share_one_topic_name():
    h = Harness(GroupConfig())
    h.load([OffsetCommitRecord(f"r{g}", _fresh("orders"), 0, g, -1, "", 999_000) for g in range(3)])
    for g in range(3):
        h.call(_commit(f"g{g}", _fresh("orders"), g))
    names = [topic for g in ("g0", "g1", "g2", "r0", "r1", "r2") for topic, _ in h.offsets(g)]
    assert names == ["orders"] * 6 and len({id(n) for n in names}) == 1


def test_offsets_only_groups_stay_small():
    h = Harness(GroupConfig())
    h.call(_commit("warm-up", "orders", 0))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for g in range(1000):
            h.call(_commit(f"group-{g:04d}", _fresh("orders"), g))
        per_group = (tracemalloc.get_traced_memory()[0] - before) / 1000
    finally:
        tracemalloc.stop()
    # About 0.9 KB today (the group, its offsets dict and entry, its id); it was 1.5 KB with four
    # empty member containers and a copy of the topic name per group.
    assert per_group < 1100, per_group


async def test_a_group_holds_no_queue_once_its_commands_are_done_and_keeps_command_order():
    """A group's queue (and task) exists only while it has commands waiting: 10,000 groups that each
    committed once hold nothing but their state."""
    import asyncio

    from kbroker.coordinator.groups.service import GroupCoordinatorService

    appended = []

    async def append(partition, records):
        appended.extend(records)
        await asyncio.sleep(0)

    service = GroupCoordinatorService(append)
    await service.start()
    for p in range(service.num_partitions):
        await service.load(p, [])
    try:
        # 200 groups commit once each, and one group commits 50 times at once
        await asyncio.gather(*(service.commit_offsets(_commit(f"g{g}", "orders", g)) for g in range(200)))
        results = await asyncio.gather(*(service.commit_offsets(_commit("busy", "orders", n)) for n in range(50)))
        assert all(r.topics[0].partitions[0].error is ErrorCode.NONE for r in results)
        for _ in range(10):
            await asyncio.sleep(0)
        assert service.busy_groups == 0
        fetched = await service.fetch_offsets(c.OffsetFetch("busy", (c.TopicPartitions("orders", (0,)),)))
        assert fetched.topics[0].partitions[0].offset == 49  # applied in the order they were sent
        assert [r.offset for r in appended if r.group == "busy"] == list(range(50))
        assert (await service.fetch_offsets(c.OffsetFetch("g7", (c.TopicPartitions("orders", (0,)),)))
                ).topics[0].partitions[0].offset == 7
    finally:
        await service.stop()
