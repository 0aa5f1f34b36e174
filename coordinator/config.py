"""Broker settings of the classic group coordinator, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

# Not a config in Kafka either: a new member's JoinGroup may wait this long before the member is
# dropped (it cannot heartbeat before it knows its member id).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


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

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def new_member_join_timeout_ms(self) -> int:
        return NEW_MEMBER_JOIN_TIMEOUT_MS

    @classmethod
    def from_properties(cls, props: Mapping[str, str | int]) -> GroupConfig:
        """Build from Kafka-style dotted names (`group.max.size`); unknown keys are ignored."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        values = {known[k]: int(v) for k, v in props.items() if k in known}
        return cls(**values)
