"""Topic-config defaults have one owner (broker/storage/log/config.py's table): LogConfig's fields and
what DescribeConfigs reports, values and the broker synonyms' defaults (broker/topic_defaults.py) alike,
come from it."""

from __future__ import annotations

import dataclasses

import pytest

from kbroker.broker.apis.describe_configs import TOPIC_CONFIGS
from kbroker.broker.topic_defaults import BROKER_SYNONYMS, TOPIC_ONLY
from kbroker.broker.storage.log.config import LogConfig, default_of, known_config_names


def test_log_config_fields_default_to_the_table() -> None:
    config = LogConfig()
    rows = {row.name: row for row in config.describe()}
    for name in known_config_names():
        assert rows[name].value == default_of(name) and rows[name].is_default
    for field in dataclasses.fields(LogConfig):
        if field.name != "overrides":
            name = field.name.replace("_", ".")
            assert str(getattr(config, field.name)) == default_of(name), field.name


@pytest.mark.parametrize("topic", sorted(BROKER_SYNONYMS))
def test_describe_configs_synonyms_report_the_tables_default(topic: str) -> None:
    defaults = [value for name, value in BROKER_SYNONYMS[topic] if value is not None]
    assert defaults, topic
    for name, value in BROKER_SYNONYMS[topic]:
        if value is None:
            continue
        if name.endswith(".hours"):
            assert int(value) * 3_600_000 == int(default_of(topic)), (topic, name)
        else:
            assert value == default_of(topic), (topic, name)


def test_every_described_topic_config_is_in_the_table() -> None:
    assert set(TOPIC_CONFIGS) <= set(known_config_names())
    assert set(BROKER_SYNONYMS) == set(TOPIC_CONFIGS) - TOPIC_ONLY
