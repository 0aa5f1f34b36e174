"""Broker settings of the classic group coordinator, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# Not a config in Kafka either: a new member's JoinGroup may wait this long before the member is
# dropped (it cannot heartbeat before it knows its member id).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# The largest __consumer_offsets batch by default: the topic's max.message.bytes, which a broker
# reads live (it can be altered), and which a coordinator without a broker takes to be Kafka's default.
MAX_MESSAGE_BYTES = 1_048_588


def default_max_batch_bytes() -> int:
    return MAX_MESSAGE_BYTES


@dataclass(frozen=True, slots=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2_147_483_647
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50
    # Consumer groups (KIP-848), Kafka's names and defaults.
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = 2_147_483_647
    group_consumer_assignors: str = "uniform,range"  # the first is the default
    group_consumer_migration_policy: str = "bidirectional"
    # Streams groups (KIP-1071), Kafka's names and defaults.
    group_streams_session_timeout_ms: int = 45_000
    group_streams_heartbeat_interval_ms: int = 5_000
    group_streams_max_size: int = 2_147_483_647
    group_streams_num_standby_replicas: int = 0
    group_streams_initial_rebalance_delay_ms: int = 3_000
    group_streams_assignment_interval_ms: int = 1_000
    group_streams_num_warmup_replicas: int = 2  # Kafka 4.4 assigns no warm-up task whatever it is
    group_streams_acceptable_recovery_lag: int = 10_000
    group_streams_task_offset_interval_ms: int = 60_000
    # Share groups (KIP-932), Kafka's names and defaults.
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_max_size: int = 200
    group_share_record_lock_duration_ms: int = 30_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2_000

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def new_member_join_timeout_ms(self) -> int:
        return NEW_MEMBER_JOIN_TIMEOUT_MS

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        return tuple(_assignor_name(n) for n in self.group_consumer_assignors.split(",") if n.strip())

    def validate_consumer(self) -> None:
        """Kafka's start-up checks of the consumer group settings; raises ValueError."""
        s, lo, hi = (self.group_consumer_session_timeout_ms, self.group_consumer_min_session_timeout_ms,
                     self.group_consumer_max_session_timeout_ms)
        if not lo <= s <= hi:
            raise ValueError(f"group.consumer.session.timeout.ms must be within [{lo}, {hi}], not {s}")
        h, hlo, hhi = (self.group_consumer_heartbeat_interval_ms, self.group_consumer_min_heartbeat_interval_ms,
                       self.group_consumer_max_heartbeat_interval_ms)
        if not hlo <= h <= hhi:
            raise ValueError(f"group.consumer.heartbeat.interval.ms must be within [{hlo}, {hhi}], not {h}")
        if h >= s:
            raise ValueError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        unknown = [n for n in self.consumer_assignors if n not in ("uniform", "range")]
        if unknown or not self.consumer_assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown}; known: uniform, range")
        if self.group_consumer_migration_policy.lower() not in ("disabled", "upgrade", "downgrade", "bidirectional"):
            raise ValueError("group.consumer.migration.policy must be disabled, upgrade, downgrade or bidirectional")

    @classmethod
    def from_properties(cls, props: Mapping[str, str | int]) -> GroupConfig:
        """Build from Kafka-style dotted names (`group.max.size`); unknown keys are ignored."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        types = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {known[k]: (str(v) if types[known[k]] in ("str", str) else int(v))
                  for k, v in props.items() if k in known}
        return cls(**values)


def _assignor_name(name: str) -> str:
    """Kafka lists assignor classes; their short names are what clients send."""
    name = name.strip()
    return {
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    }.get(name, name)
