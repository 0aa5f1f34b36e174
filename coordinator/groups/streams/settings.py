"""A streams group's settings: its own config (the GROUP config resource) where it has one, else the
broker's `group.streams.*` default (Kafka's streamsGroup...() getters of GroupMetadataManager)."""

from __future__ import annotations

from collections.abc import Callable

from ...config import GroupConfig

# The group configs a streams group's assignment is computed with, by the names Kafka's task assignor
# knows them (AssignmentConfigsImpl): a change recomputes the assignment.
NUM_STANDBY_REPLICAS, RACK_AWARE_ASSIGNMENT_TAGS = "num.standby.replicas", "rack.aware.assignment.tags"


class StreamsSettings:
    def __init__(self, config: GroupConfig, group_config: Callable[[str, str], str | None]) -> None:
        self.config = config
        self.group_config = group_config

    def _int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_config(group_id, name)
        return default if value is None else int(value)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._int(group_id, "streams.session.timeout.ms", self.config.group_streams_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._int(group_id, "streams.heartbeat.interval.ms", self.config.group_streams_heartbeat_interval_ms)

    def initial_rebalance_delay_ms(self, group_id: str) -> int:
        return self._int(group_id, "streams.initial.rebalance.delay.ms",
                         self.config.group_streams_initial_rebalance_delay_ms)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self._int(group_id, "streams.assignment.interval.ms", self.config.group_streams_assignment_interval_ms)

    def acceptable_recovery_lag(self, group_id: str) -> int:
        """Answered to every member (AcceptableRecoveryLag): how far a warm-up task may lag to count as caught up."""
        return self._int(group_id, "streams.acceptable.recovery.lag", self.config.group_streams_acceptable_recovery_lag)

    def task_offset_interval_ms(self, group_id: str) -> int:
        """Answered to every member (TaskOffsetIntervalMs): how often it reports its tasks' changelog offsets."""
        return self._int(group_id, "streams.task.offset.interval.ms", self.config.group_streams_task_offset_interval_ms)

    def assignment_configs(self, group_id: str) -> dict[str, str]:
        """Kafka's streamsGroupAssignmentConfigs: what the target assignment is computed with."""
        configs = {NUM_STANDBY_REPLICAS: str(self._int(group_id, "streams.num.standby.replicas",
                                                       self.config.group_streams_num_standby_replicas))}
        tags = [t.strip() for t in (self.group_config(group_id, "streams.rack.aware.assignment.tags") or "").split(",")]
        if any(tags):
            configs[RACK_AWARE_ASSIGNMENT_TAGS] = ",".join(t for t in tags if t)
        return configs
