"""LogManager (topics, durable metadata, restart) and LogConfig (validation, describe)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from kbroker.broker.storage.log import FlushPolicy, LogConfig, LogManager, validate_topic_name
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_batch import Record, decode_batches, encode_batch


def code_of(fn, *args, **kwargs) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as exc_info:
        fn(*args, **kwargs)
    return exc_info.value.code


def one(i: int) -> bytes:
    return encode_batch([Record(0, 1_000 + i, b"k%d" % i, b"v%d" % i)])


# --- topic names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "orders.v1", "my_topic-2", "__consumer_offsets", "x" * 249])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "with space", "slash/name", "ümlaut", "a:b"])
def test_illegal_topic_names(name: str) -> None:
    assert code_of(validate_topic_name, name) == ErrorCode.INVALID_TOPIC_EXCEPTION


# --- config -------------------------------------------------------------------------------------------


def test_log_config_defaults_match_kafka() -> None:
    config = LogConfig()
    assert (config.segment_bytes, config.segment_ms, config.retention_ms, config.retention_bytes) == (
        1073741824, 604800000, 604800000, -1,
    )
    assert (config.index_interval_bytes, config.max_message_bytes, config.cleanup_policy) == (4096, 1048588, "delete")
    assert (config.delete_retention_ms, config.message_timestamp_type, config.min_compaction_lag_ms) == (
        86400000, "CreateTime", 0,
    )


def test_from_topic_configs_parses_and_validates() -> None:
    config = LogConfig.from_topic_configs(
        {"cleanup.policy": "delete,compact", "retention.ms": "1000", "message.timestamp.type": "LogAppendTime"}
    )
    # kept as given, as Kafka describes it (differential check "IncrementalAlterConfigs vN: append to a list")
    assert config.cleanup_policy == "delete,compact" and config.compact and config.delete
    assert config.retention_ms == 1000 and config.log_append_time
    for bad in (
        {"no.such.config": "1"},
        {"retention.ms": "soon"},
        {"segment.bytes": "10"},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": "Whenever"},
        {"retention.bytes": "-2"},
    ):
        assert code_of(LogConfig.from_topic_configs, bad) == ErrorCode.INVALID_CONFIG


def test_describe_reports_value_default_flag_and_source() -> None:
    config = LogConfig.from_topic_configs({"retention.ms": "5000", "min.insync.replicas": "1"})
    entries = {e.name: e for e in config.describe()}
    assert entries["retention.ms"].value == "5000"
    assert not entries["retention.ms"].is_default and entries["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["segment.bytes"].is_default and entries["segment.bytes"].source == "DEFAULT_CONFIG"
    assert entries["min.insync.replicas"].value == "1" and not entries["min.insync.replicas"].is_default


def test_flush_policy_parsing() -> None:
    assert FlushPolicy.parse("always") == FlushPolicy("always")
    assert FlushPolicy.parse("interval:250") == FlushPolicy("interval", 250)
    for bad in ("sometimes", "interval:", "interval:0", "interval:x"):
        with pytest.raises(ValueError):
            FlushPolicy.parse(bad)


# --- manager ------------------------------------------------------------------------------------------


def test_create_topic_and_metadata_survive_restart(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    fixed_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    info = manager.create_topic("orders", 3, {"retention.ms": "60000"}, fixed_id)
    auto = manager.create_topic("events", 1, {})
    assert info.topic_id == fixed_id and auto.topic_id.int != 0
    for p in range(3):
        plog = manager.get_log("orders", p)
        assert plog is not None
        for i in range(p + 1):
            plog.append(one(i), leader_epoch=0, now_ms=0)
    assert manager.get_log("orders", 3) is None
    meta = json.loads((tmp_path / "topics" / "orders.json").read_text())
    assert meta["topic_id"] == str(fixed_id) and meta["partitions"] == 3
    manager.close()
    assert (tmp_path / ".kbroker_clean_shutdown").exists()

    again = LogManager(tmp_path, LogConfig(), "never")
    assert not (tmp_path / ".kbroker_clean_shutdown").exists()  # a crash from now on is unclean
    topics = again.topics()
    assert set(topics) == {"orders", "events"}
    assert topics["orders"].topic_id == fixed_id
    assert topics["events"].topic_id == auto.topic_id
    assert topics["orders"].num_partitions == 3
    assert topics["orders"].config.retention_ms == 60000
    assert topics["orders"].overrides == {"retention.ms": "60000"}
    for p in range(3):
        plog = again.get_log("orders", p)
        assert plog is not None and plog.log_end_offset == p + 1
        (_, records), *_ = list(decode_batches(plog.read(0, 10_000).records))
        assert records[0].value == b"v0"
    again.close()


def test_unclean_restart_recovers(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 1, {})
    plog = manager.get_log("t", 0)
    assert plog is not None
    for i in range(5):
        plog.append(one(i), leader_epoch=0, now_ms=0)
    # no close(): simulate kill -9 by dropping the manager; the files stay as written
    with open(sorted((tmp_path / "t-0").glob("*.log"))[-1], "ab") as f:
        f.write(b"\x00\x00\x00")
    again = LogManager(tmp_path, LogConfig(), "never")
    reopened = again.get_log("t", 0)
    assert reopened is not None and reopened.log_end_offset == 5
    again.close()


def test_create_topic_errors(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("a.b", 1, {})
    assert code_of(manager.create_topic, "a.b", 1, {}) == ErrorCode.TOPIC_ALREADY_EXISTS
    assert code_of(manager.create_topic, "a_b", 1, {}) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert code_of(manager.create_topic, "bad name", 1, {}) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert code_of(manager.create_topic, "zero", 0, {}) == ErrorCode.INVALID_PARTITIONS
    assert code_of(manager.create_topic, "cfg", 1, {"retention.ms": "x"}) == ErrorCode.INVALID_CONFIG
    assert set(manager.topics()) == {"a.b"}
    assert not (tmp_path / "cfg-0").exists()
    manager.create_topic("dry", 2, {}, validate_only=True)
    assert "dry" not in manager.topics() and not (tmp_path / "dry-0").exists()
    manager.close()


def test_delete_topic_removes_files_and_metadata(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("gone", 2, {})
    plog = manager.get_log("gone", 0)
    assert plog is not None
    plog.append(one(0), leader_epoch=0, now_ms=0)
    manager.delete_topic("gone")
    assert manager.get_log("gone", 0) is None and "gone" not in manager.topics()
    assert not (tmp_path / "gone-0").exists() and not (tmp_path / "topics" / "gone.json").exists()
    assert not list(tmp_path.glob("*-delete"))
    assert code_of(manager.delete_topic, "gone") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    recreated = manager.create_topic("gone", 1, {})
    fresh = manager.get_log("gone", 0)
    assert fresh is not None and fresh.log_end_offset == 0
    manager.close()
    assert LogManager(tmp_path, LogConfig(), "never").topics()["gone"].topic_id == recreated.topic_id


def test_add_partitions_and_alter_configs_persist(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic("t", 1, {"retention.ms": "1000"})
    assert code_of(manager.add_partitions, "t", 1) == ErrorCode.INVALID_PARTITIONS
    assert code_of(manager.add_partitions, "nope", 4) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    manager.add_partitions("t", 4)
    assert manager.get_log("t", 3) is not None
    manager.alter_topic_configs("t", {"cleanup.policy": "compact"})
    plog = manager.get_log("t", 2)
    assert plog is not None and plog.config.compact and plog.config.retention_ms == LogConfig().retention_ms
    assert code_of(manager.alter_topic_configs, "t", {"bogus": "1"}) == ErrorCode.INVALID_CONFIG
    manager.close()
    again = LogManager(tmp_path, LogConfig(), "never")
    info = again.topics()["t"]
    assert info.num_partitions == 4 and info.overrides == {"cleanup.policy": "compact"}
    assert all(again.get_log("t", p) is not None for p in range(4))
    again.close()


def test_manager_ignores_unrelated_files_in_data_dir(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("cluster.id=x\n")
    (tmp_path / "stray-0").mkdir()
    manager = LogManager(tmp_path, LogConfig(), "never")
    assert manager.topics() == {}
    assert (tmp_path / "stray-0").exists()  # orphans are reported, never deleted
    manager.close()


def test_a_partition_directory_of_no_topic_is_reported_at_start(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    manager = LogManager(tmp_path)
    manager.create_topic("kept", 2, {})
    manager.close()
    (tmp_path / "gone-0").mkdir()  # a partition directory whose topic's metadata is not there
    (tmp_path / "kept-7").mkdir()  # a partition the topic does not have
    (tmp_path / "other-3").write_text("a file with a partition's name is not a partition directory")
    with capture_logs() as logs:
        reopened = LogManager(tmp_path)
    orphans = sorted(Path(e["dir"]).name for e in logs if e["event"] == "orphan_partition_dir")
    assert orphans == ["gone-0", "kept-7"]
    kept = reopened.topic("kept")
    assert kept is not None and kept.num_partitions == 2
    reopened.close()


def test_a_topic_of_the_longest_legal_name_is_created_restarted_and_deleted(tmp_path: Path) -> None:
    """249 characters (Kafka's limit): its file is 254 bytes, and the names made from it (the file's
    temporary copy, a partition directory marked for deletion) must still fit in 255."""
    name = "x" * 249
    manager = LogManager(tmp_path, LogConfig(), "never")
    manager.create_topic(name, 12, {})
    manager.alter_topic_configs(name, {"retention.ms": "1000"})
    plog = manager.get_log(name, 11)
    assert plog is not None
    plog.append(one(0), leader_epoch=0, now_ms=0)
    manager.close()
    again = LogManager(tmp_path, LogConfig(), "never")
    assert again.topics()[name].num_partitions == 12 and again.topics()[name].overrides == {"retention.ms": "1000"}
    again.delete_topic(name)
    assert not list(tmp_path.glob("x*")) and not list((tmp_path / "topics").iterdir())
    again.close()


def _disk_full_at(monkeypatch: pytest.MonkeyPatch, partition: int) -> None:
    """The directory of `partition` cannot be made, as on a full disk; the others can."""
    import errno

    from kbroker.broker.storage.log.partition_log import PartitionLog

    real = PartitionLog.create_empty

    def create_empty(directory):  # type: ignore[no-untyped-def]
        if str(directory).endswith(f"-{partition}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(directory)

    monkeypatch.setattr(PartitionLog, "create_empty", staticmethod(create_empty))


def test_a_storage_failure_while_making_a_topic_leaves_no_topic(tmp_path: Path, monkeypatch) -> None:
    manager = LogManager(tmp_path, LogConfig(), "never")
    _disk_full_at(monkeypatch, 2)
    assert code_of(manager.create_topic, "full", 4, {}) == ErrorCode.KAFKA_STORAGE_ERROR
    assert "full" not in manager.topics() and not (tmp_path / "topics" / "full.json").exists()
    manager.create_topic("t", 1, {})
    assert code_of(manager.add_partitions, "t", 4) == ErrorCode.KAFKA_STORAGE_ERROR
    assert manager.topics()["t"].num_partitions == 1 and manager.get_log("t", 1) is None
    manager.close()
    monkeypatch.undo()
    again = LogManager(tmp_path, LogConfig(), "never")
    assert set(again.topics()) == {"t"} and again.topics()["t"].num_partitions == 1  # as the failures left them
    again.create_topic("full", 4, {})  # the directories the failure left are taken up
    again.add_partitions("t", 4)
    assert all(again.get_log(n, p) is not None for n in ("full", "t") for p in range(4))
    again.close()
