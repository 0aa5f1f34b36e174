"""Loading `__consumer_offsets` when some of it is damaged (issue 10, section 2): each partition loads on
its own, a damaged batch or an undecodable record costs only what it held, and the loss is named in an
error event. Real LogManager files, real coordinator service."""

from __future__ import annotations

import structlog
from structlog.testing import capture_logs

from kbroker.broker.storage.log.manager import LogManager
from kbroker.broker.coordinators.offsets_topic import TOPIC, OffsetsTopic
from kbroker.broker.partitions.service import PartitionService
from kbroker.coordinator.groups.service import GroupCoordinatorService
from kbroker.coordinator.partitioning import partition_for
from kbroker.protocol.records.classic_records import OffsetCommitRecord
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.tests.faults.damage import rot, segments, stored_batches


def groups_on(partition: int, count: int) -> list[str]:
    out, i = [], 0
    while len(out) < count:
        name = f"g{i}"
        if partition_for(name, 50) == partition:
            out.append(name)
        i += 1
    return out


async def test_damage_in_one_partition_costs_only_what_it_held(tmp_path) -> None:
    logs = LogManager(tmp_path, flush_policy="always")
    topic = OffsetsTopic(PartitionService.offline(logs), 50)
    topic.ensure()
    victim, survivor = groups_on(3, 2)
    [later] = groups_on(40, 1)
    for group, offset in ((victim, 11), (survivor, 22), (later, 33)):
        await topic.append_records(partition_for(group, 50), [OffsetCommitRecord(group, "t", 0, offset, -1, "", 1)])
    # a record no coordinator wrote: a key of an unknown layout with a garbage body
    plog = logs.get_log(TOPIC, 3)
    plog.append(encode_batch([Record(0, 1, b"\x00\x01garbage", b"\xff" * 7)]), leader_epoch=0, now_ms=1)
    await topic.append_records(3, [OffsetCommitRecord(survivor, "t", 1, 44, -1, "", 1)])
    logs.close()
    [file] = segments(tmp_path, TOPIC, 3)
    rot(file, stored_batches(file)[0])  # the victim's commit

    logs = LogManager(tmp_path, flush_policy="always")
    topic = OffsetsTopic(PartitionService.offline(logs), 50)
    topic.ensure()

    async def no_writes(*_):
        raise AssertionError("loading must not write")

    coordinator = GroupCoordinatorService(no_writes, num_partitions=50)
    await coordinator.start()
    coordinator.mark_loading(range(50))
    with capture_logs() as events:
        await topic.load_all(coordinator)
    assert not coordinator.is_loading
    offsets = {g: {tp[1]: o.offset for tp, o in coordinator.offsets_of(g).items()}
               for g in (survivor, later)}
    assert offsets == {survivor: {0: 22, 1: 44}, later: {0: 33}}
    assert coordinator.machine(3).group(victim) is None
    [skipped] = [e for e in events if e["event"] == "offsets_batch_skipped"]
    assert skipped["log_level"] == "error" and skipped["partition"] == 3 and skipped["offset"] == 0
    assert skipped["lost"] == [f"{victim} t-0 (offset 0)"]
    [undecodable] = [e for e in events if e["event"] == "offsets_record_skipped"]
    assert undecodable["partition"] == 3 and undecodable["offset"] == 2
    await coordinator.stop()
    logs.close()


def test_structlog_capture_is_live() -> None:
    with capture_logs() as events:
        structlog.get_logger("x").error("ping")
    assert events
