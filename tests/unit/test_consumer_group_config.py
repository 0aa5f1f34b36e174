"""The consumer group (KIP-848) settings: Kafka's names and defaults, bounds checked at start-up."""

from __future__ import annotations

import pytest

from kbroker.broker.config import load_config
from kbroker.coordinator.config import GroupConfig


def test_defaults_are_kafkas() -> None:
    c = GroupConfig()
    assert (c.group_consumer_session_timeout_ms, c.group_consumer_heartbeat_interval_ms) == (45_000, 5_000)
    assert c.consumer_assignors == ("uniform", "range")
    assert c.group_consumer_migration_policy == "bidirectional"
    c.validate_consumer()


def test_kafka_dotted_names_in_toml(tmp_path) -> None:
    path = tmp_path / "kbroker.toml"
    path.write_text('"group.consumer.session.timeout.ms" = 50000\n'
                    '"group.consumer.assignors" = "org.apache.kafka.coordinator.group.assignor.RangeAssignor"\n'
                    '"group.consumer.migration.policy" = "upgrade"\n')
    cfg = load_config({}, str(path), env={})
    assert cfg.group_consumer_session_timeout_ms == 50_000
    group = GroupConfig.from_properties({"group.consumer.assignors": cfg.group_consumer_assignors})
    assert group.consumer_assignors == ("range",)


@pytest.mark.parametrize("flags", [
    {"group_consumer_session_timeout_ms": 30_000},                      # below the 45 s minimum
    {"group_consumer_session_timeout_ms": 70_000},                      # above the 60 s maximum
    {"group_consumer_heartbeat_interval_ms": 20_000},                   # above the 15 s maximum
    {"group_consumer_min_session_timeout_ms": 1_000, "group_consumer_session_timeout_ms": 5_000,
     "group_consumer_min_heartbeat_interval_ms": 100, "group_consumer_heartbeat_interval_ms": 5_000},
    {"group_consumer_assignors": "sticky"},
    {"group_consumer_migration_policy": "sideways"},
])
def test_out_of_bounds_settings_are_refused(flags) -> None:
    with pytest.raises(ValueError):
        load_config(flags, None, env={})
