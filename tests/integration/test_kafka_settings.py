"""A broker configured as Kafka is: a server.properties file with KAFKA_* variables over it, broker-wide
topic defaults that real clients meet (and see through DescribeConfigs), one line for each name that
is not needed or not known, and connections logged at debug."""

from __future__ import annotations

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource  # noqa: E402

PROPERTIES = """\
# as a Kafka operator's file has it
process.roles=broker,controller
num.partitions=3
message.max.bytes=20000
log.retention.hours=1
log.cleaner.threads=2
log.retension.bytes=1000
"""


def test_server_properties_and_kafka_variables_configure_the_broker(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(PROPERTIES)
    env = {"KAFKA_LOG_SEGMENT_BYTES": "2097152", "KAFKA_NUM_PARTITIONS": "2"}  # a variable wins over the file
    with BrokerProcess(tmp_path / "data", "--config", str(props), env=env) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 1000000})
        producer.produce("auto", value=b"small")
        assert producer.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert len(admin.list_topics("auto", timeout=10).topics["auto"].partitions) == 2
        # a batch over message.max.bytes is refused by the broker, as Kafka refuses it
        errors = []
        producer.produce("auto", value=b"x" * 50000, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)
        assert errors and errors[0].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
        # ... unless the topic says otherwise: its own config wins over the broker's default
        admin.create_topics([confluent_kafka.admin.NewTopic("big", 1, config={"max.message.bytes": "100000"})])[
            "big"].result(30)
        producer.produce("big", value=b"x" * 50000)
        assert producer.flush(30) == 0

        (topic,) = admin.describe_configs([ConfigResource("topic", "auto")]).values()
        configs = topic.result(30)
        assert (configs["retention.ms"].value, configs["segment.bytes"].value, configs["max.message.bytes"].value) == (
            "3600000", "2097152", "20000")
        assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert configs["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        (node,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
        described = node.result(30)
        assert (described["log.retention.hours"].value, described["log.retention.hours"].source) == (
            "1", ConfigSource.STATIC_BROKER_CONFIG.value)
        assert (described["num.partitions"].value, described["log.roll.hours"].source) == (
            "2", ConfigSource.DEFAULT_CONFIG.value)

        not_needed = broker.events("config_not_needed")
        assert [(e["setting"], e["source"]) for e in not_needed] == [("process.roles", str(props))]
        unknown = {e["setting"]: e["why"] for e in broker.events("config_unknown")}
        assert set(unknown) == {"log.cleaner.threads", "log.retension.bytes"}
        assert "did you mean log.retention.bytes?" in unknown["log.retension.bytes"]
        assert "does not implement" in unknown["log.cleaner.threads"]
        # connections: debug lines, not info
        assert broker.events("connection_open") == [] and broker.events("connection_close") == []


def test_connections_are_debug_lines(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data", "--log-level", "debug") as broker:
        assert broker.probe()
        opened = broker.events("connection_open")
        assert opened and all(e["level"] == "debug" for e in opened)
        closed = broker.events("connection_close")
        assert closed and all(e["level"] == "debug" and e["reason"] == "closed by client" for e in closed)
