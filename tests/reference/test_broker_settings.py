"""Kafka's broker settings against Apache Kafka 4.4 itself: the names kbroker knows Kafka by
(broker/kafka_settings.py) are Kafka's, and broker-wide topic defaults read from one server.properties
are reported by both brokers alike: every topic config's value, source and synonyms, and every broker
setting's, through DescribeConfigs."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from kbroker.admin.client import Connection
from kbroker.broker import topic_defaults
from kbroker.broker.kafka_settings import KAFKA_BROKER_LISTS, KAFKA_BROKER_SETTINGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.reference.kafka import SINGLE_NODE, KafkaProcess, java_command, kafka_libs

NAMES_JAVA = """
public class Names {
  public static void main(String[] a) {
    for (String n : new java.util.TreeSet<>(org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF.names()))
      System.out.println(n);
  }
}
"""
# Each LIST-typed setting with its default as Kafka renders it (ConfigDef.convertToString), tab-separated.
LISTS_JAVA = """
import org.apache.kafka.common.config.ConfigDef;
public class Lists {
  public static void main(String[] a) {
    var keys = org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF.configKeys();
    for (String n : new java.util.TreeSet<>(keys.keySet())) {
      var k = keys.get(n);
      if (k.type == ConfigDef.Type.LIST)
        System.out.println(n + "\t" + (k.hasDefault() && k.defaultValue != null
            ? "=" + ConfigDef.convertToString(k.defaultValue, k.type) : "none"));
    }
  }
}
"""
# Broker-wide topic defaults, set in one server.properties for both brokers.
SETTINGS = {
    "log.retention.hours": "1", "log.segment.bytes": "2097152", "message.max.bytes": "2000000",
    "log.roll.ms": "3600000", "log.cleanup.policy": "delete", "log.retention.bytes": "50000000",
    "compression.type": "gzip", "log.message.timestamp.type": "LogAppendTime",
    "log.cleaner.delete.retention.ms": "1000", "num.partitions": "2",
}
# Kafka 4.4 formats a KRaft cluster with min.insync.replicas as a cluster-wide dynamic default
# (DYNAMIC_DEFAULT_BROKER_CONFIG): a quirk of its storage tool, not a broker setting.
SKIP = {"min.insync.replicas"}


@pytest.fixture(scope="module")
def jars():
    if kafka_libs() is None:
        if os.environ.get("KBROKER_REQUIRE_KAFKA") == "1":
            pytest.fail("Apache Kafka's jars are missing (make kafka-jars)")
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")


def test_the_vendored_setting_names_are_kafka_4_4s(jars, tmp_path) -> None:
    source = tmp_path / "Names.java"
    source.write_text(NAMES_JAVA)
    # a single-file source program (JEP 330), run with the reference jars on its class path
    out = subprocess.run(java_command(str(source), heap="256m"), capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert set(out.stdout.split()) == KAFKA_BROKER_SETTINGS


def test_the_vendored_list_settings_are_kafka_4_4s(jars, tmp_path) -> None:
    source = tmp_path / "Lists.java"
    source.write_text(LISTS_JAVA)
    out = subprocess.run(java_command(str(source), heap="256m"), capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    lists = dict(line.split("\t") for line in out.stdout.splitlines())
    assert {n: d.removeprefix("=") if d != "none" else None for n, d in lists.items()} == KAFKA_BROKER_LISTS


def _describe(bootstrap: str, resource_type: int, name: str) -> dict:
    conn = Connection(bootstrap, 30)
    try:
        request = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type, name, None)],
                                         include_synonyms=True, include_documentation=False)
        deadline = time.monotonic() + 60
        while True:
            (result,) = conn.request(32, request, 4).results
            # Kafka answers CreateTopics before its broker's metadata has the topic: ask again
            if result.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result.error_code == 0, (bootstrap, name, result.error_message)
        return {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
                for c in result.configs}
    finally:
        conn.close()


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> dict[str, tuple[str, int]]:
    """CreateTopics v7; the configs the answer reports, (value, source) by name."""
    conn = Connection(bootstrap, 30)
    try:
        request = CreateTopicsRequest(topics=[CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1,
            configs=[CreatableTopicConfig(k, v) for k, v in configs.items()])], timeout_ms=30000)
        (result,) = conn.request(19, request, 7).topics
        assert result.error_code == 0, result.error_message
        assert result.num_partitions == int(SETTINGS["num.partitions"])
        return {c.name: (c.value, c.config_source) for c in result.configs}
    finally:
        conn.close()


def test_broker_wide_topic_defaults_are_described_as_kafka_describes_them(jars, tmp_path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in {**SINGLE_NODE, **SETTINGS}.items()))
    with KafkaProcess(tmp_path / "kafka", SETTINGS) as kafka, \
            BrokerProcess(tmp_path / "kbroker" / "data", "--config", str(properties)) as kbroker:
        answers, created = {}, {}
        for broker, bootstrap, node in (("kafka", kafka.bootstrap, "1"), ("kbroker", kbroker.bootstrap, "1")):
            created[broker] = {"overridden": _create(bootstrap, "overridden", {"retention.ms": "5000",
                                                                              "segment.bytes": "3000000"}),
                               "plain": _create(bootstrap, "plain", {})}
            answers[broker] = {"overridden": _describe(bootstrap, 2, "overridden"),
                               "plain": _describe(bootstrap, 2, "plain"), "broker": _describe(bootstrap, 4, node)}
        # CreateTopics answers with each config's value and source too (Kafka's controller: no synonyms)
        for topic in ("overridden", "plain"):
            for config in sorted(set(topic_defaults.BROKER_SYNONYMS) - SKIP):
                assert created["kbroker"][topic][config] == created["kafka"][topic][config], (topic, config)
        for topic in ("overridden", "plain"):
            for config in sorted(set(topic_defaults.BROKER_SYNONYMS) - SKIP):
                assert answers["kbroker"][topic][config] == answers["kafka"][topic][config], (topic, config)
        for name in sorted(set(topic_defaults.broker_names()) - SKIP):
            assert answers["kbroker"]["broker"][name][:2] == answers["kafka"]["broker"][name][:2], name
            assert answers["kbroker"]["broker"][name][2] == answers["kafka"]["broker"][name][2], name
        assert answers["kbroker"]["broker"]["num.partitions"][:2] == ("2", 4)
