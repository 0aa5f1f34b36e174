"""partition_for must match Java's String.hashCode and Utils.abs bit for bit; config defaults."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.coordinator.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from kbroker.coordinator.partitioning import java_string_hash, kafka_abs, one_per_partition, partition_for


@pytest.mark.parametrize(
    ("group_id", "hash_code", "partition"),
    [
        ("my-group", -1906497762, 12),
        ("payments-service", 332086293, 43),
        ("polygenelubricants", -2147483648, 0),
        ("émoji-😀-group", 404171064, 14),
    ],
)
def test_worked_examples(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id, 50) == partition


def test_utils_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5


def test_non_bmp_character_counts_as_two_code_units() -> None:
    # Iterating code points instead of UTF-16 units gives partition 1 for this id.
    assert partition_for("émoji-😀-group") != 1
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00


def test_empty_group_id_hashes_to_zero() -> None:
    assert java_string_hash("") == 0
    assert partition_for("") == 0


@given(st.text(max_size=40), st.integers(min_value=1, max_value=200))
def test_partition_is_always_in_range(group_id: str, n: int) -> None:
    assert 0 <= partition_for(group_id, n) < n


@given(st.text(max_size=40))
def test_hash_is_a_signed_32_bit_integer(group_id: str) -> None:
    assert -(1 << 31) <= java_string_hash(group_id) < (1 << 31)


def test_config_defaults_are_kafkas() -> None:
    cfg = GroupConfig()
    assert cfg.group_min_session_timeout_ms == 6_000
    assert cfg.group_max_session_timeout_ms == 1_800_000
    assert cfg.group_initial_rebalance_delay_ms == 3_000
    assert cfg.group_max_size == 2_147_483_647
    assert cfg.offsets_retention_minutes == 10_080
    assert cfg.offsets_retention_ms == 7 * 24 * 3600 * 1000
    assert cfg.offsets_retention_check_interval_ms == 600_000
    assert cfg.offset_metadata_max_bytes == 4_096
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.new_member_join_timeout_ms == NEW_MEMBER_JOIN_TIMEOUT_MS == 300_000


def test_config_from_kafka_property_names() -> None:
    cfg = GroupConfig.from_properties({
        "group.initial.rebalance.delay.ms": "0",
        "group.max.size": 3,
        "offsets.retention.minutes": "1",
        "unrelated.setting": "x",
    })
    assert cfg.group_initial_rebalance_delay_ms == 0
    assert cfg.group_max_size == 3
    assert cfg.offsets_retention_ms == 60_000


@pytest.mark.parametrize("n", [1, 3, 50])
def test_one_per_partition_names_an_id_for_each_partition_in_order(n: int) -> None:
    ids = one_per_partition("probe", n)
    assert [partition_for(i, n) for i in ids] == list(range(n))
    assert all(i.startswith("probe-") for i in ids) and len(set(ids)) == n
