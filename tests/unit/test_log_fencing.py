"""A failed fsync or write fences the log until restart (issue 10, section 7).

After an fsync error the kernel may have dropped the dirty pages, so a later fsync that succeeds
proves nothing about them: the log must never mark the failed records durable, and must refuse
every later append and wait with KAFKA_STORAGE_ERROR. fsync failures are injected through the
log's `fsync` hook (the real os.fsync otherwise); write failures through a segment whose file
write raises ENOSPC, as a full disk does.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kbroker.broker.storage.log import LogConfig, LogManager, PartitionLog
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import Record, encode_batch


class FailingFsync:
    def __init__(self) -> None:
        self.fail = False
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.fail:
            raise OSError(errno.EIO, "simulated I/O error")
        os.fsync(fd)


def batch(i: int) -> bytes:
    return encode_batch([Record(0, i, b"k%d" % i, b"v" * 50)])


async def test_a_failed_fsync_never_lets_a_later_one_mark_its_records_durable(tmp_path: Path) -> None:
    fsync = FailingFsync()
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always", fsync=fsync)
    ok = plog.append(batch(0), leader_epoch=0, now_ms=0)
    await plog.wait_durable(ok.last_offset)
    durable_before = plog.flusher.durable_offset
    fsync.fail = True
    lost = plog.append(batch(1), leader_epoch=0, now_ms=0)
    with pytest.raises(KafkaError) as failed:
        await plog.wait_durable(lost.last_offset)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    fsync.fail = False  # the disk "recovers": the log must stay fenced anyway
    with pytest.raises(KafkaError) as refused:
        plog.append(batch(2), leader_epoch=0, now_ms=0)
    assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError):
        await plog.wait_durable(lost.last_offset)
    with pytest.raises(KafkaError):
        plog.flush()
    assert plog.flusher.durable_offset == durable_before  # the failed record is never "durable"
    plog.close()


async def test_interval_policy_fences_the_logs_of_a_failed_round(tmp_path: Path) -> None:
    fsync = FailingFsync()
    fsync.fail = True
    manager = LogManager(tmp_path, LogConfig(), "interval:20", fsync=fsync)
    manager.create_topic("t", 1, {})
    plog = manager.get_log("t", 0)
    assert plog is not None
    plog.append(batch(0), leader_epoch=0, now_ms=0)
    await manager.flush_dirty_logs()  # a tick of the interval policy, as its background task runs it
    assert plog.flusher.fenced is not None
    fsync.fail = False
    await manager.flush_dirty_logs()  # later rounds succeed, yet mark nothing durable
    assert plog.flusher.durable_offset == 0
    with pytest.raises(KafkaError):
        plog.append(batch(1), leader_epoch=0, now_ms=0)
    manager.close()


async def test_a_write_the_disk_refuses_fences_the_log(tmp_path: Path, monkeypatch) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always")
    first = plog.append(batch(0), leader_epoch=0, now_ms=0)
    await plog.wait_durable(first.last_offset)
    segment = plog.active

    def disk_full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment, "append", disk_full)
    with pytest.raises(KafkaError) as failed:
        plog.append(batch(1), leader_epoch=0, now_ms=0)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    with pytest.raises(KafkaError):  # space is back; the log stays fenced until restart
        plog.append(batch(2), leader_epoch=0, now_ms=0)
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), flush_policy="always")
    assert reopened.log_end_offset == 1
    again = reopened.append(batch(3), leader_epoch=0, now_ms=0)
    assert again.base_offset == 1
    reopened.close()
