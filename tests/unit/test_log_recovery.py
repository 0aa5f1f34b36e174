"""Start-up recovery after an unclean stop: torn tails, corrupt batches, damaged or missing indexes.

Each test writes a log, closes it, then damages the files the way a crash or bad disk would and
reopens with clean_shutdown=False (what the manager does without its clean-shutdown marker).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.protocol.errors import CorruptRecordError
from kbroker.protocol.record_batch import Record, decode_batches, encode_batch, iter_batches

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=200)


def batch(i: int) -> bytes:
    return encode_batch([Record(j, 1_000 + i, b"key-%d-%d" % (i, j), b"value-%d" % i) for j in range(2)])


def build(path: Path, batches: int = 60) -> tuple[PartitionLog, list[int]]:
    plog = PartitionLog(path / "t-0", "t", 0, CONFIG, flush_policy="never")
    for i in range(batches):
        plog.append(batch(i), leader_epoch=0, now_ms=0)
    return plog, [s.base_offset for s in plog.segments]


def reopen(path: Path, clean: bool = False) -> PartitionLog:
    if not clean:
        # an unclean stop never ran close(), so the checkpoint has no clean log end: drop it
        checkpoint = path / "t-0" / "checkpoint.json"
        body = json.loads(checkpoint.read_text())
        body.pop("log_end_offset", None)
        checkpoint.write_text(json.dumps(body))
    return PartitionLog(path / "t-0", "t", 0, CONFIG, flush_policy="never", clean_shutdown=clean)


def active_log_file(path: Path) -> Path:
    return sorted((path / "t-0").glob("*.log"))[-1]


def offsets(plog: PartitionLog) -> list[int]:
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        chunk = plog.read(offset, 100_000).records
        decoded = list(decode_batches(chunk))
        for _, records in decoded:
            out.extend(r.offset for r in records if r.offset >= offset)
        if not decoded:  # a gap up to the log end (offsets lost to damage are not reused)
            break
        offset = decoded[-1][0].next_offset
    return out


def batch_positions(file: Path) -> list[int]:
    return [pos for pos, _ in iter_batches(file.read_bytes())]


def test_torn_tail_is_truncated_and_logged(tmp_path: Path) -> None:
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    size = file.stat().st_size
    last_start = batch_positions(file)[-1]
    os.truncate(file, size - 7)  # cut into the last batch

    with capture_logs() as logs:
        recovered = reopen(tmp_path)
    assert recovered.log_end_offset == end - 2
    assert offsets(recovered) == list(range(end - 2))
    assert file.stat().st_size == last_start
    [event] = [e for e in logs if e["event"] == "log_truncated_on_recovery"]
    assert event["file"] == str(file)
    assert event["position"] == last_start
    assert event["bytes"] == size - 7 - last_start
    assert event["reason"] == "torn_batch"
    # the log keeps working after recovery
    assert recovered.append(batch(99), leader_epoch=0, now_ms=0).base_offset == end - 2


def test_corrupted_last_batch_is_truncated(tmp_path: Path) -> None:
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    data = bytearray(file.read_bytes())
    data[-3] ^= 0xFF  # a flipped byte inside the last batch's records: the CRC no longer matches
    file.write_bytes(bytes(data))

    recovered = reopen(tmp_path)
    assert recovered.log_end_offset == end - 2
    assert offsets(recovered) == list(range(end - 2))


def test_garbage_after_last_batch_is_truncated(tmp_path: Path) -> None:
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    size = file.stat().st_size
    with open(file, "ab") as f:
        f.write(os.urandom(500))
    recovered = reopen(tmp_path)
    assert recovered.log_end_offset == end
    assert file.stat().st_size == size
    assert offsets(recovered) == list(range(end))


def test_zeroed_tail_is_truncated(tmp_path: Path) -> None:
    # a crash after the file grew but before the data reached the disk leaves zeros
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    with open(file, "ab") as f:
        f.write(b"\x00" * 4096)
    recovered = reopen(tmp_path)
    assert recovered.log_end_offset == end


def test_rot_in_middle_of_active_segment_keeps_the_records_behind_it(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    positions = batch_positions(file)
    assert len(positions) >= 3
    data = bytearray(file.read_bytes())
    data[positions[1] + 70] ^= 0x55  # the second batch's CRC no longer matches; valid batches follow
    file.write_bytes(bytes(data))
    with capture_logs() as logs:
        recovered = reopen(tmp_path)
    assert not [e for e in logs if e["event"] == "log_truncated_on_recovery"]
    [rot] = [e for e in logs if e["event"] == "corrupt_batch_on_recovery"]
    assert rot["position"] == positions[1] and rot["base_offset"] == bases[-1] + 2
    assert recovered.log_end_offset == end
    damaged = bases[-1] + 2
    with pytest.raises(CorruptRecordError) as raised:
        recovered.read(damaged, 100_000)
    assert raised.value.code == 2 and raised.value.resume_offset == damaged + 2
    # everything else stays readable, and appends go on after the last valid batch
    assert recovered.read(damaged + 2, 100_000).records
    assert recovered.append(batch(99), leader_epoch=0, now_ms=0).base_offset == end


def test_rotten_last_batches_are_a_torn_tail(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    positions = batch_positions(file)
    data = bytearray(file.read_bytes())
    data[positions[-2] + 70] ^= 0x55
    data[-3] ^= 0x55
    file.write_bytes(bytes(data))
    recovered = reopen(tmp_path)
    assert recovered.log_end_offset == end - 4
    assert file.stat().st_size == positions[-2]
    assert offsets(recovered) == list(range(end - 4))


def test_deleted_indexes_are_rebuilt_for_every_segment(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    assert len(bases) >= 3
    end = plog.log_end_offset
    plog.close()
    original = {p.name: p.read_bytes() for p in (tmp_path / "t-0").glob("*index")}
    for p in (tmp_path / "t-0").glob("*index"):
        p.unlink()
    for clean in (True, False):
        recovered = reopen(tmp_path, clean=clean)
        assert recovered.log_end_offset == end
        assert offsets(recovered) == list(range(end))
        assert recovered.offset_for_timestamp(1_030) == (60, 1_030)
        recovered.close()
        rebuilt = {p.name: p.read_bytes() for p in (tmp_path / "t-0").glob("*index")}
        assert rebuilt == original


def test_damaged_index_of_an_old_segment_is_rebuilt(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    first_index = tmp_path / "t-0" / f"{bases[0]:020d}.index"
    good = first_index.read_bytes()
    assert len(good) >= 16
    first_index.write_bytes(good[:-3])  # not a whole number of entries
    second_time_index = tmp_path / "t-0" / f"{bases[1]:020d}.timeindex"
    second_time_index.write_bytes(b"\x7f" * 12 + second_time_index.read_bytes())  # timestamps go backwards
    recovered = reopen(tmp_path, clean=True)  # even a "clean" start sanity-checks indexes
    assert first_index.read_bytes() == good
    assert recovered.log_end_offset == end
    assert offsets(recovered) == list(range(end))


def test_index_pointing_past_a_truncated_log_is_not_trusted(tmp_path: Path) -> None:
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    positions = batch_positions(file)
    os.truncate(file, positions[len(positions) // 2] + 10)
    recovered = reopen(tmp_path)
    kept = len(positions) // 2
    assert recovered.log_end_offset == end - 2 * (len(positions) - kept)
    assert offsets(recovered) == list(range(recovered.log_end_offset))
    index = recovered.active.offset_index
    assert all(p < recovered.active.size for p in index.values)


def test_clean_start_skips_scan_but_still_finds_log_end(tmp_path: Path) -> None:
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    with capture_logs() as logs:
        recovered = reopen(tmp_path, clean=True)
    assert recovered.log_end_offset == end
    assert not [e for e in logs if e["event"] == "log_truncated_on_recovery"]


def test_torn_tail_in_a_log_believed_clean_is_still_recovered(tmp_path: Path) -> None:
    plog, _ = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    file = active_log_file(tmp_path)
    os.truncate(file, file.stat().st_size - 5)
    with capture_logs() as logs:
        recovered = reopen(tmp_path, clean=True)
    assert [e["reason"] for e in logs if e["event"] == "log_truncated_on_recovery"] == ["torn_batch"]
    # the last batch is gone, but its offsets are not handed out again (the clean close recorded the end)
    [behind] = [e for e in logs if e["event"] == "log_end_behind_checkpoint"]
    assert behind["log_end_offset"] == end - 2 and behind["checkpointed_log_end_offset"] == end
    assert recovered.log_end_offset == end
    assert offsets(recovered) == list(range(end - 2))


def test_stray_compaction_output_is_removed(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    stray = tmp_path / "t-0" / f"{bases[0]:020d}.log.cleaned"
    stray.write_bytes(b"half-written")
    recovered = reopen(tmp_path)
    assert not stray.exists()
    assert recovered.log_end_offset == end


def test_half_written_files_are_removed_and_only_digit_named_logs_are_segments(tmp_path: Path) -> None:
    plog, bases = build(tmp_path)
    end = plog.log_end_offset
    plog.close()
    partition = tmp_path / "t-0"
    torn_checkpoint = partition / "checkpoint.json.tmp"  # a checkpoint write that never got renamed
    torn_checkpoint.write_bytes(b'{"log_start')
    foreign = partition / "notes.log"  # not a segment: its name is not a base offset
    foreign.write_bytes(b"kept")
    recovered = reopen(tmp_path)
    assert not torn_checkpoint.exists()
    assert foreign.read_bytes() == b"kept"
    assert [s.base_offset for s in recovered.segments] == bases
    assert recovered.log_end_offset == end


def test_structlog_is_configured_for_capture() -> None:
    # guards the tests above: capture_logs only sees events if loggers are structlog's
    with capture_logs() as logs:
        structlog.get_logger("x").info("ping")
    assert logs and logs[0]["event"] == "ping"


_WRITER = r"""
import asyncio, sys
from kbroker.broker.storage.log import LogConfig, LogManager
from kbroker.protocol.record_batch import Record, encode_batch

async def main() -> None:
    manager = LogManager(sys.argv[1], LogConfig(segment_bytes=20_000), "always")
    if "t" not in manager.topics():
        manager.create_topic("t", 1, {})
    plog = manager.get_log("t", 0)
    i = 0
    while True:
        infos = [plog.append(encode_batch([Record(0, i, b"k%d" % i, b"v" * 100)]), leader_epoch=0, now_ms=0)
                 for _ in range(5)]
        await plog.wait_durable(infos[-1].last_offset)
        print("ACK", infos[-1].last_offset, flush=True)
        i += 1

asyncio.run(main())
"""


def test_kill_9_during_appends_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from kbroker.broker.storage.log import LogManager

    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    acked = -1
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("ACK "):
                acked = int(line.split()[1])
                if acked >= 400:  # several segment rolls in
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert acked >= 400
    manager = LogManager(tmp_path, CONFIG, "never")
    assert not (tmp_path / ".kbroker_clean_shutdown").exists()
    plog = manager.get_log("t", 0)
    assert plog is not None
    assert len(plog.segments) > 1
    assert plog.log_end_offset > acked
    assert offsets(plog) == list(range(plog.log_end_offset))
    manager.close()
