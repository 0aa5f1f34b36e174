"""Broker-wide topic defaults (broker/topic_defaults.py): Kafka's broker settings, the topic values they
give, and the synonyms DescribeConfigs reports, as Apache Kafka 4.4 answered them (tests/reference
compares with a running Kafka)."""

from __future__ import annotations

import dataclasses

from kbroker.broker import topic_defaults as td
from kbroker.broker.config import BrokerConfig, load_config
from kbroker.broker.kafka_settings import KAFKA_BROKER_SETTINGS
from kbroker.broker.storage.log.config import LogConfig

S, D = td.STATIC, td.DEFAULT


def cfg(**env: str) -> BrokerConfig:
    return load_config({}, None, {f"KAFKA_{k.upper()}": v for k, v in env.items()}, ())


def test_every_broker_synonym_is_a_setting_of_kafka_and_of_kbroker() -> None:
    fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    for name in td.broker_names():
        assert name in KAFKA_BROKER_SETTINGS and td.field_of(name) in fields, name


def test_kafkas_defaults_are_the_topic_configs_defaults() -> None:
    """Unset, every broker setting leaves a topic at LogConfig's default: one default, two tables."""
    described = {e.name: e.value for e in LogConfig().describe()}
    for topic, chain in td.BROKER_SYNONYMS.items():
        name, default = next((n, d) for n, d in chain if d is not None)
        assert td._in_topic_unit(name, default) == described[topic], topic
    assert td.topic_values(BrokerConfig()) == {} and td.log_config(BrokerConfig()) == LogConfig()


def test_the_first_set_setting_of_a_chain_wins_in_the_topics_unit() -> None:
    assert td.topic_values(cfg(log_retention_hours="1")) == {"retention.ms": "3600000"}
    assert td.topic_values(cfg(log_retention_hours="1", log_retention_minutes="30")) == {"retention.ms": "1800000"}
    assert td.topic_values(cfg(log_retention_ms="-1", log_retention_minutes="30")) == {"retention.ms": "-1"}
    assert td.topic_values(cfg(log_retention_hours="-5")) == {"retention.ms": "-1"}  # any negative: no limit
    assert td.topic_values(cfg(log_roll_hours="2", log_cleanup_policy="delete,compact")) == {
        "segment.ms": "7200000", "cleanup.policy": "delete,compact"}  # as given, as Kafka describes it
    base = td.log_config(cfg(log_segment_bytes="2097152", message_max_bytes="2000000", log_retention_hours="1"))
    assert (base.segment_bytes, base.max_message_bytes, base.retention_ms, base.overrides) == (
        2097152, 2000000, 3600000, ())
    topic = LogConfig.from_topic_configs({"retention.ms": "5000"}, base)  # the topic's own config wins
    assert (topic.retention_ms, topic.segment_bytes, topic.override_dict()) == (5000, 2097152, {"retention.ms": "5000"})


def test_synonyms_as_kafka_4_4_reports_them() -> None:
    """The answers Kafka 4.4 gave with these settings (DescribeConfigs with synonyms)."""
    c = cfg(log_retention_hours="1", log_segment_bytes="2097152", log_roll_ms="3600000")
    assert td.synonyms(c, "log.segment.bytes") == [("log.segment.bytes", "2097152", S),
                                                   ("log.segment.bytes", "1073741824", D)]
    assert td.synonyms(c, "log.retention.hours") == [("log.retention.hours", "1", S), ("log.retention.hours", "168", D)]
    assert td.synonyms(c, "log.retention.ms") == []  # the chain dropped up to log.retention.ms, which is unset
    assert td.topic_synonyms(c, "retention.ms") == []  # so the topic's retention.ms says DEFAULT_CONFIG
    assert td.topic_synonyms(c, "segment.ms") == [("log.roll.ms", "3600000", S), ("log.roll.hours", "168", D)]
    assert td.synonyms(c, "log.roll.hours") == [("log.roll.hours", "168", D)]
    assert td.topic_synonyms(BrokerConfig(), "segment.ms") == []
    assert td.topic_synonyms(BrokerConfig(), "cleanup.policy") == [("log.cleanup.policy", "delete", D)]
