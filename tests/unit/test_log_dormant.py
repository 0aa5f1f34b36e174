"""Dormant partitions (broker/storage/log/dormant.py): an empty, unused partition keeps no log object until its
first use, and the log built then is the one a load of its files builds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.broker.storage.log import LogConfig, LogManager, PartitionLog
from kbroker.broker.storage.log.dormant import DormantPartitions, sole_empty_segment
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import Record, encode_batch


def batch(i: int) -> bytes:
    return encode_batch([Record(0, 1_000 + i, b"k%d" % i, b"v%d" % i)])


def shape(plog: PartitionLog) -> tuple:
    """What a log is, as far as its users can tell (its flusher made last: reading it makes one)."""
    return (plog.log_start_offset, plog.log_end_offset, plog.high_watermark, plog.size_bytes, plog._recovery_point,
            [(s.base_offset, s.next_offset, s.size, s.synced_size, s.verified_size, s.max_timestamp,
              s.offset_of_max_timestamp, s.first_batch_timestamp, s.indexes_synced, s.untouched)
             for s in plog.segments], plog.untouched_empty, plog.flusher.durable_offset)


def loaded(directory: Path, topic: str, partition: int) -> PartitionLog:
    return PartitionLog(directory / f"{topic}-{partition}", topic, partition, LogConfig(), flush_policy="never",
                        clean_shutdown=True)


def test_the_table_itself() -> None:
    table = DormantPartitions()
    assert not table and ("t", 0) not in table and table.take("t", 0) is None
    table.add("t", 3, 0)
    table.add("t", 1, 7)
    table.add("u", 0, 0)
    table.add("t", 3, 0)  # again: no double count
    assert len(table) == 3
    assert ("t", 3) in table and ("t", 1) in table and ("t", 2) not in table and ("t", 9) not in table
    assert ("t", -1) not in table
    assert sorted(table.items()) == [("t", 1, 7), ("t", 3, 0), ("u", 0, 0)]
    assert table.take("t", 1) == 7 and table.take("t", 1) is None
    assert table.take("t", 3) == 0 and len(table) == 1
    assert list(table.items()) == [("u", 0, 0)]


def test_a_new_topic_holds_no_log_until_first_use(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("wide", 50, {})
    assert manager.logs() == [] and manager.partition_count == 50
    assert len(manager.dormant_partitions()) == 50
    # on disk as a loaded log would have left it: the directory and its first segment's three files
    assert sorted(os.listdir(tmp_path / "wide-7")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    assert manager.has_partition("wide", 49) and not manager.has_partition("wide", 50)
    assert manager.partition_size("wide", 3) == 0 and manager.partition_size("wide", 50) is None
    assert manager.logs() == []  # none of those built a log

    plog = manager.get_log("wide", 7)
    assert plog is not None and manager.get_log("wide", 7) is plog  # built once, then the same object
    assert manager.logs() == [plog] and manager.partition_count == 50
    assert shape(plog) == shape(loaded(tmp_path, "wide", 7))
    info = plog.append(batch(0), leader_epoch=0, now_ms=0)
    assert info.base_offset == 0 and len(plog.read(0, 1 << 20).records) == plog.size_bytes == len(batch(0))
    assert manager.partition_size("wide", 7) == plog.size_bytes > 0
    assert manager.get_log("wide", 50) is None
    manager.close()

    reopened = LogManager(tmp_path, LogConfig(), "never")
    assert [(p.topic, p.partition) for p in reopened.logs()] == [("wide", 7)]  # the others stayed dormant
    assert reopened.get_log("wide", 7).log_end_offset == 1
    assert reopened.get_log("wide", 8).log_end_offset == 0
    reopened.close()


def test_a_partition_emptied_at_a_later_offset_wakes_there(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 1, {})
    plog = manager.get_log("t", 0)
    for i in range(3):
        plog.append(batch(i), leader_epoch=0, now_ms=0)
    plog.roll(0)
    assert plog.delete_records_before(3) == 3 and len(plog.segments) == 1
    manager.close()

    reopened = LogManager(tmp_path, LogConfig(), "never")
    assert reopened.logs() == [] and reopened.dormant_partitions() == [("t", 0, 3)]
    woken = reopened.get_log("t", 0)
    assert shape(woken) == shape(loaded(tmp_path, "t", 0))
    assert (woken.log_start_offset, woken.log_end_offset) == (3, 3)
    assert woken.append(batch(3), leader_epoch=0, now_ms=0).base_offset == 3
    reopened.close()
    assert LogManager(tmp_path, LogConfig(), "never").get_log("t", 0).log_end_offset == 4


def test_an_unclean_stop_leaves_dormant_partitions_as_they_were(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 3, {})
    manager.get_log("t", 1).append(batch(0), leader_epoch=0, now_ms=0)
    manager.get_log("t", 1).flush()
    # no close: the next start finds no clean-shutdown marker and recovers
    again = LogManager(tmp_path, LogConfig(), "never")
    assert sorted(again.dormant_partitions()) == [("t", 0, 0), ("t", 2, 0)]
    assert [again.get_log("t", p).log_end_offset for p in range(3)] == [0, 1, 0]
    again.close()


def test_delete_alter_and_the_partition_limit_count_dormant_partitions(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never", max_partitions=8)
    manager.create_topic("a", 5, {})
    manager.get_log("a", 0)
    with pytest.raises(KafkaError) as refused:
        manager.create_topic("b", 4, {})
    assert refused.value.code == ErrorCode.POLICY_VIOLATION
    manager.alter_topic_configs("a", {"retention.ms": "1234"})
    assert manager.get_log("a", 0).config.retention_ms == 1234
    assert manager.get_log("a", 3).config.retention_ms == 1234  # built after the change: the topic's config
    manager.delete_topic("a")
    assert manager.partition_count == 0 and manager.dormant_partitions() == []
    assert not [name for name in os.listdir(tmp_path) if name.startswith("a-")]
    manager.create_topic("b", 8, {})  # the budget is free again
    manager.close()


async def test_async_creation_and_growth_leave_partitions_dormant(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    await manager.create_topic_async("t", 4, {})
    await manager.add_partitions_async("t", 6)
    assert manager.logs() == [] and sorted(p for _, p, _ in manager.dormant_partitions()) == list(range(6))
    assert manager.get_log("t", 5).append(batch(0), leader_epoch=0, now_ms=0).base_offset == 0
    manager.close()


def test_a_directory_left_by_an_earlier_topic_is_loaded_not_assumed_empty(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 1, {})
    manager.get_log("t", 0).append(batch(0), leader_epoch=0, now_ms=0)
    manager.close()
    # a crash in the middle of a deletion: the topic file is gone, the partition directory is not
    (tmp_path / "topics" / "t.json").unlink()
    again = LogManager(tmp_path, LogConfig(), "never")
    again.create_topic("t", 2, {})
    assert again.get_log("t", 0).log_end_offset == 1  # what the directory holds, as before dormancy
    assert ("t", 1, 0) in again.dormant_partitions()
    again.close()


def test_a_log_with_anything_made_or_held_is_not_dormant(tmp_path: Path) -> None:
    def fresh(name: str) -> PartitionLog:
        return PartitionLog(tmp_path / name, "t", 0, LogConfig(), flush_policy="never")

    assert fresh("a").untouched_empty
    with_flusher = fresh("b")
    with_flusher.flusher  # noqa: B018 (made by a wait or flush)
    with_state = fresh("c")
    with_state.txn_state = object()  # type: ignore[assignment]
    holding = fresh("d")
    holding.before_append = lambda: None
    indexed = fresh("e")
    indexed.active.offset_index  # noqa: B018
    for plog in (with_flusher, with_state, holding, indexed):
        assert not plog.untouched_empty


def test_a_log_cut_while_stopped_goes_dormant_at_its_old_end(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 1, {})
    for i in range(3):
        manager.get_log("t", 0).append(batch(i), leader_epoch=0, now_ms=0)
    manager.close()
    os.truncate(tmp_path / "t-0" / "00000000000000000000.log", 0)  # the records vanish while stopped
    again = LogManager(tmp_path, LogConfig(), "never")
    # its offsets are not reused: an empty segment at the old end, which is all a dormant one needs
    assert again.dormant_partitions() == [("t", 0, 3)]
    woken = again.get_log("t", 0)
    assert shape(woken) == shape(loaded(tmp_path, "t", 0))
    assert woken.append(batch(3), leader_epoch=0, now_ms=0).base_offset == 3
    again.close()


def test_stale_indexes_beside_an_emptied_log_are_emptied_before_it_goes_dormant(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 1, {"index.interval.bytes": "100"})
    for i in range(20):
        manager.get_log("t", 0).append(batch(i), leader_epoch=0, now_ms=0)
    manager.close()
    directory = tmp_path / "t-0"
    assert (directory / "00000000000000000000.index").stat().st_size > 0
    for name in ("00000000000000000000.log", "checkpoint.json", "../.kbroker_clean_shutdown"):
        path = directory / name
        os.truncate(path, 0) if name.endswith(".log") else path.unlink()
    again = LogManager(tmp_path, LogConfig(), "never")  # unclean, no checkpoint: recovers from zero
    assert again.dormant_partitions() == [("t", 0, 0)]
    assert (directory / "00000000000000000000.index").stat().st_size == 0
    assert (directory / "00000000000000000000.timeindex").stat().st_size == 0
    woken = again.get_log("t", 0)
    for i in range(20):
        woken.append(batch(i), leader_epoch=0, now_ms=0)
    assert woken.read(15, 1 << 20).records[:8] == (15).to_bytes(8, "big")  # found through the new index
    again.close()


def test_nothing_is_built_from_a_worker_thread_or_after_close(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 2, {})
    assert manager.loaded_log("t", 0) is None and manager.logs() == []
    plog = manager.get_log("t", 0)
    assert manager.loaded_log("t", 0) is plog
    manager.close()
    assert manager.get_log("t", 1) is None and len(manager.dormant_partitions()) == 1


def _segment_files(directory: Path, base: int, *, log: bytes = b"", index: bytes = b"") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for suffix, data in ((".log", log), (".index", index), (".timeindex", b"")):
        (directory / f"{base:020d}{suffix}").write_bytes(data)


@pytest.mark.parametrize("case, expected", [
    ("new", 0), ("at 42", 42), ("records", None), ("stale index", None), ("checkpoint", None),
    ("producer snapshot", None), ("half-written file", None), ("two segments", None), ("missing", None),
    ("not a segment", None), ("other digits", None), ("not a regular file", None),
])
def test_a_start_skips_the_load_only_of_one_empty_segment_and_nothing_else(tmp_path: Path, case: str,
                                                                          expected: int | None) -> None:
    """`sole_empty_segment` answers only for what a load would turn into one empty segment at that base;
    whatever else the directory holds is left to the load (which checks, repairs or keeps it)."""
    directory = tmp_path / "t-0"
    if case != "missing":
        _segment_files(directory, 42 if case == "at 42" else 0, log=batch(0) if case == "records" else b"",
                       index=b"\x00" * 8 if case == "stale index" else b"")
    extra = {"checkpoint": "checkpoint.json", "producer snapshot": "00000000000000000000.snapshot",
             "half-written file": "checkpoint.json.tmp", "two segments": "00000000000000000009.log",
             "not a segment": "0000000000000000000x.log"}.get(case)
    if extra is not None:
        (directory / extra).write_bytes(b"")
    if case == "not a segment":
        (directory / "00000000000000000000.log").unlink()
    if case == "other digits":  # digits to str.isdigit, not to int()
        for path in directory.iterdir():
            path.rename(directory / ("\u2460" * 20 + path.suffix))
    if case == "not a regular file":  # size 0 too: only its type tells
        (directory / "00000000000000000000.timeindex").unlink()
        os.mkfifo(directory / "00000000000000000000.timeindex")
    assert sole_empty_segment(str(directory)) == expected


def test_a_restart_keeps_empty_partitions_dormant_without_building_their_logs(tmp_path: Path,
                                                                               monkeypatch) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 4, {})
    manager.get_log("t", 1).append(batch(0), leader_epoch=0, now_ms=0)
    manager.close()
    _segment_files(tmp_path / "t-3", 0, index=b"\x00" * 8)  # an index left beside an empty log
    built: list[int] = []
    make_log = LogManager._make_log
    monkeypatch.setattr(LogManager, "_make_log",
                        lambda self, info, partition, *a, **k: built.append(partition) or make_log(
                            self, info, partition, *a, **k))
    again = LogManager(tmp_path, LogConfig(), "never")
    assert built == [1, 3]  # the partition with a record, and the one the load must repair
    assert sorted(again.dormant_partitions()) == [("t", 0, 0), ("t", 2, 0), ("t", 3, 0)]
    assert (tmp_path / "t-3" / "00000000000000000000.index").stat().st_size == 0
    built.clear()
    woken = again.get_log("t", 2)
    assert built == [2] and shape(woken) == shape(loaded(tmp_path, "t", 2))  # as a full load builds it
    assert [again.get_log("t", p).log_end_offset for p in range(4)] == [0, 1, 0, 0]
    again.close()
