"""Group commit across partitions (broker/storage/log/sync_batcher.py): the flush rounds that start together
share a bounded number of worker-thread jobs, and a failed fsync fails only its own log."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from kbroker.broker.storage.log import LogConfig, LogManager
from kbroker.broker.storage.log.sync_batcher import MAX_JOBS
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import Record, encode_batch

PARTITIONS = 40


def batch(i: int) -> bytes:
    return encode_batch([Record(0, i, b"k%d" % i, b"v" * 50)])


class FailingFsync:
    """Counts fsyncs; raises EIO for the files of one partition directory."""

    def __init__(self, failing_dir: str | None = None) -> None:
        self.calls = 0
        self.failing_dir = failing_dir

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.failing_dir and os.readlink(f"/proc/self/fd/{fd}").startswith(self.failing_dir):
            raise OSError(errno.EIO, "simulated I/O error")


async def test_rounds_of_many_partitions_share_a_few_jobs(tmp_path: Path) -> None:
    fsync = FailingFsync()
    manager = LogManager(tmp_path, LogConfig(), "always", fsync=fsync)
    manager.create_topic("t", PARTITIONS, {})
    logs = [manager.get_log("t", p) for p in range(PARTITIONS)]
    batcher = manager._sync_batcher
    jobs_before = batcher.jobs
    futures = []
    for plog in logs:
        info = plog.append(batch(0), leader_epoch=0, now_ms=0)
        futures.append(plog.flusher.durable_future(info.last_offset))
    await asyncio.wait_for(asyncio.gather(*futures), timeout=30)
    assert all(plog.flusher.durable_offset == 1 for plog in logs)
    assert fsync.calls >= PARTITIONS  # every partition's file was fsynced...
    assert 1 <= batcher.jobs - jobs_before <= MAX_JOBS  # ...by at most MAX_JOBS thread jobs, not one each
    manager.close()


async def test_a_failed_fsync_fences_only_its_own_log(tmp_path: Path) -> None:
    fsync = FailingFsync()
    manager = LogManager(tmp_path, LogConfig(), "always", fsync=fsync)
    manager.create_topic("t", PARTITIONS, {})
    logs = [manager.get_log("t", p) for p in range(PARTITIONS)]
    fsync.failing_dir = str(logs[7].directory)
    futures = []
    for plog in logs:
        info = plog.append(batch(0), leader_epoch=0, now_ms=0)
        futures.append(plog.flusher.durable_future(info.last_offset))
    results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout=30)
    failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert failed == [7]
    assert isinstance(results[7], KafkaError) and results[7].code == ErrorCode.KAFKA_STORAGE_ERROR
    assert logs[7].flusher.fenced is not None
    assert all(plog.flusher.fenced is None and plog.flusher.durable_offset == 1
               for i, plog in enumerate(logs) if i != 7)
    with pytest.raises(KafkaError):
        logs[7].append(batch(1), leader_epoch=0, now_ms=0)
    manager.close()
