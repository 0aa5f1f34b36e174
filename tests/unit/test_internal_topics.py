"""The internal topics' policy (broker/partitions/internal_topics.py) on the result of a change: what it
refuses, with which error, and what it puts back at start-up."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbroker.broker.partitions import internal_topics
from kbroker.broker.partitions.catalogue import TopicCatalogue
from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.log.manager import LogManager
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
        internal_topics.check_configs(OFFSETS, {"cleanup.policy": "compact,"}, DEFAULTS)
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


def catalogue_over(tmp_path, topics: dict[str, dict[str, str]], defaults: LogConfig = DEFAULTS) -> TopicCatalogue:
    """A real engine in tmp_path whose internal topics an older kbroker left with `topics`' overrides,
    opened again (as a start opens it) under the broker defaults `defaults`."""
    first = LogManager(tmp_path, LogConfig(), "never")
    for name, overrides in topics.items():
        first.create_topic(name, 1, overrides)  # the engine's own: what an older kbroker's records say
    first.close()
    return TopicCatalogue(LogManager(tmp_path, defaults, "never"), 0, None)


def test_start_up_puts_back_what_an_older_broker_let_go_and_leaves_the_rest(tmp_path) -> None:
    catalogue = catalogue_over(tmp_path, {OFFSETS: {"retention.ms": "1000", "segment.bytes": "104857600"},
                                          TXN: {"cleanup.policy": "compact"}})
    internal_topics.repair_configs(catalogue)
    offsets, txn = catalogue.topic(OFFSETS), catalogue.topic(TXN)
    assert offsets is not None and txn is not None
    assert offsets.overrides == {"retention.ms": "1000", "segment.bytes": "104857600", "cleanup.policy": "compact"}
    assert txn.overrides == {"cleanup.policy": "compact"}
    # the record on disk says so too: the next start reads the repaired configs
    again = TopicCatalogue(LogManager(tmp_path, DEFAULTS, "never"), 0, None).topic(OFFSETS)
    assert again is not None and again.overrides["cleanup.policy"] == "compact"


def test_start_up_turns_off_a_broker_wide_retention_limit_on_the_share_state_topic(tmp_path) -> None:
    catalogue = catalogue_over(tmp_path, {SHARE: {"cleanup.policy": "delete", "retention.ms": "-1"}},
                               replace(LogConfig.from_topic_configs({"retention.bytes": "1000000"}), overrides=()))
    internal_topics.repair_configs(catalogue)
    share = catalogue.topic(SHARE)
    assert share is not None and share.overrides["retention.bytes"] == "-1"


# --- the catalogue: every change of a topic passes the policy, whoever asks ---------------------------

async def test_the_catalogue_refuses_every_change_that_breaks_the_policy_whoever_asks(tmp_path) -> None:
    catalogue = TopicCatalogue(LogManager(tmp_path, LogConfig(), "never"), 0, None)
    catalogue.create_internal_topic(OFFSETS, 3, {"cleanup.policy": "compact", "segment.bytes": "104857600"})
    catalogue.create_topic("orders", 1, {})
    refusals = {
        "alter": lambda: catalogue.alter_topic_configs(OFFSETS, {"cleanup.policy": "delete"}),
        "alter, validate only": lambda: catalogue.alter_topic_configs(OFFSETS, {}, validate_only=True),
        "delete": lambda: catalogue.delete_topic(OFFSETS),
        "create": lambda: catalogue.create_topic(TXN, 3, {"cleanup.policy": "delete"}),
        "create the metadata log": lambda: catalogue.create_topic("__cluster_metadata", 1, {}),
        "create share state with the defaults": lambda: catalogue.create_topic(SHARE, 1, {}),
    }
    codes = {}
    for what, change in refusals.items():
        with pytest.raises(internal_topics.Refused) as refused:
            change()
        codes[what] = refused.value.code
    for what, change in {"create, async": catalogue.create_topic_async(TXN, 3, {}),
                         "grow": catalogue.add_partitions_async(OFFSETS, 60)}.items():
        with pytest.raises(internal_topics.Refused) as refused:
            await change
        codes[what] = refused.value.code
    assert codes == {"alter": ErrorCode.POLICY_VIOLATION, "alter, validate only": ErrorCode.POLICY_VIOLATION,
                     "delete": ErrorCode.INVALID_TOPIC_EXCEPTION, "create": ErrorCode.INVALID_REQUEST,
                     "create the metadata log": ErrorCode.INVALID_REQUEST,
                     "create share state with the defaults": ErrorCode.INVALID_REQUEST,
                     "create, async": ErrorCode.INVALID_REQUEST, "grow": ErrorCode.POLICY_VIOLATION}
    offsets = catalogue.topic(OFFSETS)
    assert offsets is not None and offsets.num_partitions == 3 and offsets.overrides["cleanup.policy"] == "compact"
    assert catalogue.topic(TXN) is None and catalogue.topic(SHARE) is None
    # ordinary topics are not the policy's business
    catalogue.alter_topic_configs("orders", {"cleanup.policy": "delete", "retention.ms": "1"})
    catalogue.delete_topic("orders")
    assert catalogue.topic("orders") is None


async def test_a_coordinator_makes_its_internal_topic_only_with_configs_that_keep_it(tmp_path) -> None:
    catalogue = TopicCatalogue(LogManager(tmp_path, LogConfig(), "never"), 0, None)
    with pytest.raises(internal_topics.PolicyViolation):
        catalogue.create_internal_topic(OFFSETS, 3, {"segment.bytes": "104857600"})  # the default delete
    with pytest.raises(internal_topics.PolicyViolation):
        await catalogue.create_internal_topic_async(TXN, 3, {"cleanup.policy": "compact,delete"})
    with pytest.raises(ValueError):
        catalogue.create_internal_topic("orders", 1, {"cleanup.policy": "compact"})
    assert catalogue.topics() == {}
    await catalogue.create_internal_topic_async(TXN, 4, {"cleanup.policy": "compact"})
    txn = catalogue.topic(TXN)
    assert txn is not None and txn.num_partitions == 4
