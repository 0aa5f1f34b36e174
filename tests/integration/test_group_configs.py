"""The GROUP config resource (KIP-848 / KIP-932 dynamic group configs) against a real broker process:
DescribeConfigs and IncrementalAlterConfigs answer as Kafka 4.4's reference broker did for the same
requests (names, order, types, sources, synonyms, checks and messages), overrides survive a restart,
and the share configs are honoured: share.auto.offset.reset (earliest, by_duration), the lock
duration, share.isolation.level read_committed skipping aborted transactions."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kbroker.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                         IncrementalAlterConfigsRequest)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup
from kbroker.tests.integration.wire import Wire

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2

# Kafka 4.4's DescribeConfigs of a group with no override: (name, value, type, synonym), in its order.
KAFKA_DEFAULTS = [
    ("consumer.session.timeout.ms", "45000", 3, "group.consumer.session.timeout.ms"),
    ("streams.assignor.name", "sticky", 2, "group.streams.assignors"),
    ("consumer.assignment.interval.ms", "1000", 3, "group.consumer.assignment.interval.ms"),
    ("errors.deadletterqueue.copy.record.enable", "false", 1, "errors.deadletterqueue.copy.record.enable"),
    ("share.auto.offset.reset", "latest", 2, "share.auto.offset.reset"),
    ("streams.rack.aware.assignment.tags", "", 7, "group.streams.rack.aware.assignment.tags"),
    ("share.renew.acknowledge.enable", "true", 1, "share.renew.acknowledge.enable"),
    ("streams.initial.rebalance.delay.ms", "3000", 3, "group.streams.initial.rebalance.delay.ms"),
    ("share.session.timeout.ms", "45000", 3, "group.share.session.timeout.ms"),
    ("streams.assignment.interval.ms", "1000", 3, "group.streams.assignment.interval.ms"),
    ("share.heartbeat.interval.ms", "5000", 3, "group.share.heartbeat.interval.ms"),
    ("streams.heartbeat.interval.ms", "5000", 3, "group.streams.heartbeat.interval.ms"),
    ("share.delivery.count.limit", "5", 3, "group.share.delivery.count.limit"),
    ("errors.deadletterqueue.topic.name", "", 2, "errors.deadletterqueue.topic.name"),
    ("consumer.heartbeat.interval.ms", "5000", 3, "group.consumer.heartbeat.interval.ms"),
    ("share.record.lock.duration.ms", "30000", 3, "group.share.record.lock.duration.ms"),
    ("share.assignment.interval.ms", "1000", 3, "group.share.assignment.interval.ms"),
    ("share.isolation.level", "read_uncommitted", 2, "share.isolation.level"),
    ("streams.session.timeout.ms", "45000", 3, "group.streams.session.timeout.ms"),
    ("share.partition.max.record.locks", "2000", 3, "group.share.partition.max.record.locks"),
    ("streams.num.standby.replicas", "0", 3, "group.streams.num.standby.replicas"),
]

_BAD_RESET = ("Invalid value {v} for configuration share.auto.offset.reset: Invalid value `{v}` for configuration "
              "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
              "'by_duration:<PnDTnHnMn.nS>'.")
# (operations, Kafka 4.4's error code and message), asked of its reference broker.
KAFKA_ALTERS = [
    ([("share.auto.offset.reset", SET, "earliest")], 0, None),
    ([("share.auto.offset.reset", SET, "bogus")], 40, _BAD_RESET.format(v="bogus")),
    ([("share.auto.offset.reset", SET, "by_duration:PT1H")], 0, None),
    ([("share.auto.offset.reset", SET, "by_duration:xx")], 40, _BAD_RESET.format(v="by_duration:xx")),
    ([("share.isolation.level", SET, "read_committed")], 0, None),
    ([("share.isolation.level", SET, "x")], 40,
     "Invalid value x for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
    ([("share.record.lock.duration.ms", SET, "100")], 40,
     "Invalid value 100 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ([("share.record.lock.duration.ms", SET, "20000")], 0, None),
    ([("share.record.lock.duration.ms", SET, "abc")], 40,
     "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type INT"),
    ([("share.session.timeout.ms", SET, "1000")], 40, "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ([("share.session.timeout.ms", SET, "50000")], 0, None),
    ([("share.heartbeat.interval.ms", SET, "60000")], 40,
     "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ([("consumer.session.timeout.ms", SET, "50000")], 0, None),
    ([("consumer.heartbeat.interval.ms", SET, "1")], 40,
     "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ([("share.delivery.count.limit", SET, "3")], 0, None),
    ([("share.delivery.count.limit", SET, "1")], 40,
     "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
    ([("no.such.config", SET, "1")], 40, "Unknown group config name: no.such.config"),
    ([("share.auto.offset.reset", APPEND, "x")], 40,
     "Can't APPEND to key share.auto.offset.reset because its type is not LIST."),
    ([("share.auto.offset.reset", DELETE, None)], 0, None),
    ([("share.auto.offset.reset", SET, None)], 42, "Null value not supported for : share.auto.offset.reset"),
    # KIP-1191's dead letter queue: any name but an internal one (the broker's prefix is checked at write)
    ([("errors.deadletterqueue.topic.name", SET, "__dlq")], 40,
     "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
    ([("errors.deadletterqueue.topic.name", SET, "_x")], 0, None),
    ([("errors.deadletterqueue.topic.name", SET, "no-prefix")], 0, None),
    ([("errors.deadletterqueue.copy.record.enable", SET, "true")], 0, None),
    ([("errors.deadletterqueue.copy.record.enable", SET, "yes")], 40,
     "Invalid value yes for configuration errors.deadletterqueue.copy.record.enable: "
     "Expected value to be either true or false"),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("group-configs") / "data", "--num-partitions", "1")
    yield proc
    proc.stop()


def describe(wire, name, keys=None, synonyms=True):
    return wire.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=GROUP, resource_name=name, configuration_keys=keys)], include_synonyms=synonyms,
        include_documentation=False)).results[0]


def alter(wire, name, ops, validate_only=False):
    return wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=GROUP, resource_name=name, configs=[AlterableConfig(name=n, config_operation=o, value=v)
                                                          for n, o, v in ops])], validate_only=validate_only)
    ).responses[0]


def test_describe_and_alter_answer_as_kafka(broker):
    w = Wire(broker.bootstrap)
    group = f"gc-{uuid.uuid4().hex[:6]}"
    described = describe(w, group)
    assert (described.error_code, described.error_message) == (0, "")
    assert [(c.name, c.value, c.config_type, c.config_source, c.read_only, [(s.name, s.value, s.source)
             for s in c.synonyms]) for c in described.configs] == [
        (n, v, t, 5, False, [(syn, v, 5)]) for n, v, t, syn in KAFKA_DEFAULTS]
    for ops, code, message in KAFKA_ALTERS:
        answer = alter(w, group, ops)
        assert (answer.error_code, answer.error_message) == (code, message), ops
    assert (alter(w, "", [("share.auto.offset.reset", SET, "earliest")]).error_message
            == "Default group resources are not allowed.")
    assert alter(w, group, [("share.isolation.level", SET, "read_uncommitted")], validate_only=True).error_code == 0
    changed = {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
               for c in describe(w, group).configs}
    assert changed["share.record.lock.duration.ms"] == (
        "20000", 8, [("share.record.lock.duration.ms", "20000", 8), ("group.share.record.lock.duration.ms", "30000", 5)])
    assert changed["share.isolation.level"][:2] == ("read_committed", 8)  # validate_only changed nothing
    assert changed["share.auto.offset.reset"][:2] == ("latest", 5)  # deleted
    only = describe(w, group, ["share.auto.offset.reset", "nope"], synonyms=False)
    assert [(c.name, c.synonyms) for c in only.configs] == [("share.auto.offset.reset", [])]
    empty = describe(w, "")
    assert (empty.error_code, empty.error_message) == (42, "Group name must not be empty")
    w.close()


def test_the_internal_streams_configs_are_described_once_a_group_sets_them(broker):
    """Kafka 4.4 defines streams.num.warmup.replicas, .acceptable.recovery.lag, .assignor.offload.enable
    and .task.offset.interval.ms as internal group configs: a group may set them; its describe lists
    them (first, in this order, as Kafka's reference broker answered) only once set."""
    w = Wire(broker.bootstrap)
    group = f"gc-{uuid.uuid4().hex[:6]}"
    assert "streams.num.warmup.replicas" not in {c.name for c in describe(w, group).configs}
    assert alter(w, group, [("streams.task.offset.interval.ms", SET, "20000"),
                            ("streams.acceptable.recovery.lag", SET, "77"), ("streams.num.warmup.replicas", SET, "3"),
                            ("streams.assignor.offload.enable", SET, "false"),
                            ("streams.assignor.name", SET, "sticky")]).error_code == 0
    described = describe(w, group).configs
    assert [(c.name, c.value, c.config_type, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in described[:4]] == [
        ("streams.num.warmup.replicas", "3", 3, 8,
         [("streams.num.warmup.replicas", "3", 8), ("group.streams.num.warmup.replicas", "2", 5)]),
        ("streams.acceptable.recovery.lag", "77", 5, 8,
         [("streams.acceptable.recovery.lag", "77", 8), ("group.streams.acceptable.recovery.lag", "10000", 5)]),
        ("streams.assignor.offload.enable", "false", 1, 8,
         [("streams.assignor.offload.enable", "false", 8), ("group.streams.assignor.offload.enable", "true", 5)]),
        ("streams.task.offset.interval.ms", "20000", 3, 8,
         [("streams.task.offset.interval.ms", "20000", 8), ("group.streams.task.offset.interval.ms", "60000", 5)]),
    ]
    assert [c.name for c in described[4:]] == [n for n, *_ in KAFKA_DEFAULTS]
    only = describe(w, group, ["streams.num.warmup.replicas", "streams.assignor.offload.enable"])
    assert [c.name for c in only.configs] == ["streams.num.warmup.replicas", "streams.assignor.offload.enable"]
    assert describe(w, "other", ["streams.num.warmup.replicas"]).configs == []
    refused = alter(w, group, [("streams.assignor.name", SET, "nope")])
    assert (refused.error_code, refused.error_message) == (
        40, "streams.assignor.name 'nope' is not a registered task assignor. Registered assignors are: [sticky].")
    w.close()


def test_overrides_survive_a_restart(tmp_path):
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1")
    try:
        w = Wire(broker.bootstrap)
        assert alter(w, "kept", [("share.delivery.count.limit", SET, "7")]).error_code == 0
        w.close()
        broker.restart(clean=False)
        w = Wire(broker.bootstrap)
        assert {c.name: c.value for c in describe(w, "kept").configs}["share.delivery.count.limit"] == "7"
        w.close()
    finally:
        broker.kill()


@pytest.mark.parametrize("reset", ["earliest", "by_duration:PT1H"])
def test_share_auto_offset_reset_starts_at_the_log_start(broker, reset):
    topic, topic_id, group = setup(broker, 0)
    produce(broker, topic, 5)
    w = Wire(broker.bootstrap)
    assert alter(w, group, [("share.auto.offset.reset", SET, reset),
                            ("share.record.lock.duration.ms", SET, "15000")]).error_code == 0
    w.close()
    fetched = Member(broker, group, topic, topic_id).fetch(max_wait_ms=5_000)
    assert acquired(fetched) == [(0, 4, 1)]
    assert fetched.acquisition_lock_timeout_ms == 15000


def test_latest_by_default_and_a_duration_that_reaches_nothing(broker):
    for reset in (None, "by_duration:PT0S"):
        topic, topic_id, group = setup(broker, 0)
        produce(broker, topic, 3)
        if reset:
            w = Wire(broker.bootstrap)
            assert alter(w, group, [("share.auto.offset.reset", SET, reset)]).error_code == 0
            w.close()
        m = Member(broker, group, topic, topic_id)
        assert acquired(m.fetch()) == []
        produce(broker, topic, 1)
        assert acquired(m.fetch(max_wait_ms=5_000)) == [(3, 3, 1)]


def test_read_committed_skips_aborted_transactions(broker):
    topic, topic_id, group = setup(broker, 0)
    w = Wire(broker.bootstrap)
    assert alter(w, group, [("share.auto.offset.reset", SET, "earliest"),
                            ("share.isolation.level", SET, "read_committed")]).error_code == 0
    w.close()
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"aborted-1")
    p.produce(topic, b"aborted-2")
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"open")
    p.flush(10)
    m = Member(broker, group, topic, topic_id)
    got = acquired(m.fetch(max_wait_ms=2_000))
    offsets = [o for first, last, _ in got for o in range(first, last + 1)]
    # 0-1 aborted, 2 its marker, 3 committed, 4 its marker, 5 open (past the last stable offset)
    assert offsets == [3], got
    p.abort_transaction(30)
