"""Durability policies: group commit for `always`, background fsync for `interval:MS`, none for `never`.

fsyncs are counted through the injectable `fsync` hook, which still calls the real os.fsync.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from kbroker.broker.storage.log import LogConfig, LogManager, PartitionLog
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import Record, encode_batch


class CountingFsync:
    def __init__(self) -> None:
        self.calls = 0
        self.gate: threading.Event | None = None  # when set, fsync blocks until the test opens it
        self.entered = threading.Event()  # set by the first fsync to start
        self.fail = False

    def __call__(self, fd: int) -> None:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(timeout=10)
        if self.fail:
            raise OSError(5, "simulated I/O error")
        self.calls += 1
        os.fsync(fd)


def batch(i: int) -> bytes:
    return encode_batch([Record(0, i, b"k%d" % i, b"v" * 50)])


async def test_group_commit_shares_fsyncs_between_concurrent_appends(tmp_path: Path) -> None:
    fsync = CountingFsync()
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always", fsync=fsync)

    async def produce(i: int) -> int:
        info = plog.append(batch(i), leader_epoch=0, now_ms=0)
        await plog.wait_durable(info.last_offset)
        return info.base_offset

    offsets = await asyncio.gather(*(produce(i) for i in range(200)))
    assert sorted(offsets) == list(range(200))
    assert 1 <= fsync.calls < 10  # 200 appends, a handful of fsyncs
    assert plog.flusher.durable_offset == plog.log_end_offset == 200
    plog.close()


async def test_waiters_resolve_only_after_their_fsync_and_loop_keeps_serving(tmp_path: Path) -> None:
    fsync = CountingFsync()
    fsync.gate = threading.Event()
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always", fsync=fsync)
    first = plog.append(batch(0), leader_epoch=0, now_ms=0)
    waiter = asyncio.create_task(plog.wait_durable(first.last_offset))
    assert await asyncio.to_thread(fsync.entered.wait, 10)  # the round's fsync has started...
    assert not waiter.done()  # ...and is blocked in its thread...
    # ...while the event loop still accepts appends, which queue for the next round
    second = plog.append(batch(1), leader_epoch=0, now_ms=0)
    late_waiter = asyncio.create_task(plog.wait_durable(second.last_offset))
    await asyncio.sleep(0)  # let it register; nothing can complete it while the gate is shut
    assert not late_waiter.done()
    fsync.gate.set()
    await asyncio.wait_for(asyncio.gather(waiter, late_waiter), timeout=5)
    assert fsync.calls == 2  # round 1 covered offset 0 only; round 2 covered offset 1
    # an offset that is already durable returns without another fsync
    await plog.wait_durable(0)
    assert fsync.calls == 2
    plog.close()


async def test_fsync_failure_is_a_storage_error(tmp_path: Path) -> None:
    fsync = CountingFsync()
    fsync.fail = True
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always", fsync=fsync)
    info = plog.append(batch(0), leader_epoch=0, now_ms=0)
    with pytest.raises(KafkaError) as exc_info:
        await plog.wait_durable(info.last_offset)
    assert exc_info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    fsync.fail = False
    plog.close()


async def test_interval_policy_flushes_in_background(tmp_path: Path) -> None:
    fsync = CountingFsync()
    manager = LogManager(tmp_path, LogConfig(), "interval:20", fsync=fsync)
    manager.create_topic("t", 2, {})
    plog = manager.get_log("t", 1)
    assert plog is not None
    ticked = asyncio.Event()
    tick = manager.flush_dirty_logs

    async def observed_tick() -> None:  # the background task looks the method up at every tick
        await tick()
        if fsync.calls:
            ticked.set()

    manager.flush_dirty_logs = observed_tick  # type: ignore[method-assign]
    info = plog.append(batch(0), leader_epoch=0, now_ms=0)
    await asyncio.wait_for(plog.wait_durable(info.last_offset), timeout=0.01)  # returns at once
    assert fsync.calls == 0
    await asyncio.wait_for(ticked.wait(), timeout=10)  # a tick of the background task fsynced it
    assert plog.flusher.durable_offset == 1
    manager.close()


async def test_never_policy_does_not_fsync_appends_but_close_does(tmp_path: Path) -> None:
    fsync = CountingFsync()
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="never", fsync=fsync)
    for i in range(20):
        info = plog.append(batch(i), leader_epoch=0, now_ms=0)
        await plog.wait_durable(info.last_offset)
    await plog.quiesce()  # no flush is under way or pending...
    assert fsync.calls == 0  # ...and none ran
    plog.close()
    assert fsync.calls >= 1


async def test_rolled_segment_is_fsynced_with_its_indexes_whatever_the_policy(tmp_path: Path) -> None:
    fsync = CountingFsync()
    config = LogConfig(segment_bytes=500, index_interval_bytes=50)
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config, flush_policy="never", fsync=fsync)
    for i in range(10):
        plog.append(batch(i), leader_epoch=0, now_ms=0)
    assert len(plog.segments) > 1
    await plog.quiesce()  # the flushes each roll started have finished
    assert all(s.indexes_synced and not s.dirty for s in plog.segments[:-1])
    assert fsync.calls >= 3 * (len(plog.segments) - 1)  # log + two indexes per rolled segment
    plog.close()


async def test_an_idle_partition_has_no_flusher_and_its_first_append_is_not_durable_before_its_fsync(
        tmp_path: Path) -> None:
    """The flusher is made with its first use (thousands of idle partitions hold none). Made late, it
    must still count as durable only what load found: the first append waits for a real fsync."""
    fsync = CountingFsync()
    first = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always", fsync=fsync)
    first.append(batch(0), leader_epoch=0, now_ms=0)
    first.close()
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always", fsync=fsync,
                        clean_shutdown=True)
    assert not plog.has_flusher and plog.fenced is None and plog.log_end_offset == 1
    plog.read(0, 1 << 20)  # reading makes none either
    assert not plog.has_flusher
    fsync.gate = threading.Event()
    info = plog.append(batch(1), leader_epoch=0, now_ms=0)
    assert plog.has_flusher and plog.flusher.durable_offset == 1  # the recovered record, not the new one
    wait = asyncio.ensure_future(plog.wait_durable(info.last_offset))
    assert await asyncio.to_thread(fsync.entered.wait, 10)
    await asyncio.sleep(0.05)
    assert not wait.done()  # held by the fsync still in progress
    fsync.gate.set()
    await asyncio.wait_for(wait, 10)
    assert plog.flusher.durable_offset == 2
    plog.close()


async def test_interval_ticks_leave_untouched_partitions_without_a_flusher(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), flush_policy="interval:10")
    manager.create_topic("idle", 3, {})
    manager.create_topic("busy", 1, {})
    manager.get_log("busy", 0).append(batch(0), leader_epoch=0, now_ms=0)
    await manager.flush_dirty_logs()
    assert manager.get_log("busy", 0).flusher.durable_offset == 1
    assert not any(manager.get_log("idle", p).has_flusher for p in range(3))
    manager.close()
    reopened = LogManager(tmp_path, LogConfig(), flush_policy="interval:10")
    assert reopened.get_log("busy", 0).log_end_offset == 1
    reopened.close()
