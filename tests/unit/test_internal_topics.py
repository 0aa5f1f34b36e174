"""The internal topics' policy (broker/partitions/internal_topics.py) on the result of a change: what it
refuses, with which error, and what it puts back at start-up."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbroker.broker.partitions import internal_topics
from kbroker.broker.storage.log.config import LogConfig
from kbroker.protocol.errors import ErrorCode, KafkaError

OFFSETS, TXN, SHARE = "__consumer_offsets", "__transaction_state", "__share_group_state"
DEFAULTS = LogConfig()  # cleanup.policy=delete, retention.ms a week: what a topic without overrides gets
# log.cleanup.policy=compact set broker-wide (topic_defaults.log_config: a default, no topic override)
COMPACT_DEFAULTS = replace(LogConfig.from_topic_configs({"cleanup.policy": "compact"}), overrides=())


@pytest.mark.parametrize("overrides", [
    {},  # DELETE of cleanup.policy: the broker default (delete) would apply
    {"cleanup.policy": "delete"},
    {"cleanup.policy": "compact,delete"},
    {"cleanup.policy": "delete,compact", "segment.ms": "100"},
])
@pytest.mark.parametrize("topic", [OFFSETS, TXN])
def test_a_result_that_lets_retention_delete_is_a_policy_violation(topic, overrides) -> None:
    with pytest.raises(KafkaError) as refused:
        internal_topics.check_configs(topic, overrides, DEFAULTS)
    assert refused.value.code == ErrorCode.POLICY_VIOLATION and topic in str(refused.value)


def test_the_required_override_is_required_even_where_the_broker_default_is_compact() -> None:
    """A later start with another broker default would flip the topic: the override itself must stay."""
    with pytest.raises(KafkaError, match="leaving the broker default compact"):
        internal_topics.check_configs(OFFSETS, {"retention.ms": "1000"}, COMPACT_DEFAULTS)


def test_what_keeps_the_records_is_accepted_and_other_topics_are_not_its_business() -> None:
    internal_topics.check_configs(OFFSETS, {"cleanup.policy": "compact", "retention.ms": "1000",
                                            "segment.ms": "100"}, DEFAULTS)
    internal_topics.check_configs(SHARE, {"cleanup.policy": "delete", "retention.ms": "-1"}, DEFAULTS)
    internal_topics.check_configs("orders", {"cleanup.policy": "delete", "retention.ms": "1"}, DEFAULTS)


def test_an_invalid_value_is_invalid_config_before_the_policy_sees_it() -> None:
    with pytest.raises(KafkaError) as refused:
        internal_topics.check_configs(OFFSETS, {"cleanup.policy": ""}, DEFAULTS)
    assert refused.value.code == ErrorCode.INVALID_CONFIG


def test_the_share_state_topic_keeps_no_retention_limit() -> None:
    with pytest.raises(KafkaError, match="retention"):
        internal_topics.check_configs(SHARE, {"cleanup.policy": "delete", "retention.ms": "-1",
                                              "retention.bytes": "1000"}, DEFAULTS)


def test_creation_by_hand_is_refused_as_kafka_refuses_its_metadata_log() -> None:
    for name in (OFFSETS, TXN, SHARE, "__cluster_metadata"):
        with pytest.raises(KafkaError) as refused:
            internal_topics.check_creation(name)
        assert refused.value.code == ErrorCode.INVALID_REQUEST
        assert str(refused.value).startswith(f"Creation of internal topic {name} is prohibited.")
    internal_topics.check_creation("__my_own_topic")  # other "__" names are ordinary topics, as in Kafka


class Logs:
    """What repair_configs uses of the log manager."""

    def __init__(self, topics: dict[str, dict[str, str]], defaults: LogConfig = DEFAULTS) -> None:
        self.default_config = defaults
        self.altered: dict[str, dict[str, str]] = {}
        self._topics = {name: type("Info", (), {"overrides": o, "config": LogConfig.from_topic_configs(o, defaults)})
                        for name, o in topics.items()}

    def topic(self, name):
        return self._topics.get(name)

    def alter_topic_configs(self, name, overrides):
        self.altered[name] = overrides


def test_start_up_puts_back_what_an_older_broker_let_go_and_leaves_the_rest() -> None:
    logs = Logs({OFFSETS: {"retention.ms": "1000", "segment.bytes": "104857600"},
                 TXN: {"cleanup.policy": "compact"}})
    internal_topics.repair_configs(logs)
    assert logs.altered == {OFFSETS: {"retention.ms": "1000", "segment.bytes": "104857600", "cleanup.policy": "compact"}}


def test_start_up_turns_off_a_broker_wide_retention_limit_on_the_share_state_topic() -> None:
    logs = Logs({SHARE: {"cleanup.policy": "delete", "retention.ms": "-1"}},
                replace(LogConfig.from_topic_configs({"retention.bytes": "1000000"}), overrides=()))
    internal_topics.repair_configs(logs)
    assert logs.altered[SHARE]["retention.bytes"] == "-1"
