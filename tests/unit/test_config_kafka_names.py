"""Kafka's own configuration: `KAFKA_*` variables as the apache/kafka and cp-kafka images read them,
server.properties files, the image's paths, the precedence flag > KBROKER_* > KAFKA_* > file, and
one line for each name that is not needed here or not known."""

from __future__ import annotations

import dataclasses

import pytest

from kbroker.broker.config import BrokerConfig, ConfigError, load_config, load_config_with_sources
from kbroker.broker.kafka_names import (
    AUTHORIZER_SETTINGS,
    IMAGE_CONFIG_PATHS,
    KBROKER_ONLY,
    NOT_NEEDED,
    kafka_name,
    property_name,
    read_properties,
    variable_name,
)
from kbroker.broker.kafka_settings import KAFKA_BROKER_SETTINGS


def load(env=None, flags=None, config_file=None, image_paths=()):
    return load_config_with_sources(flags or {}, config_file, env or {}, image_paths)


def notices(sources, event):
    return {n.fields["setting"]: n.fields for n in sources.notices if n.event == event}


def test_the_images_variable_names_are_kafkas_names() -> None:
    # the examples of the apache/kafka image's docker/examples/README.md, both ways
    for name, variable in (("abc.def", "KAFKA_ABC_DEF"), ("abc-def", "KAFKA_ABC___DEF"), ("abc_def", "KAFKA_ABC__DEF"),
                           ("log.retention.hours", "KAFKA_LOG_RETENTION_HOURS")):
        assert property_name(variable) == name and variable_name(name) == variable


def test_every_kafka_named_setting_is_one_kafka_has() -> None:
    """kbroker's settings named after Kafka's (`num_partitions` is num.partitions) are Kafka 4.4's, and
    so are the names it accepts as not needed (tests/reference checks the list against Kafka itself)."""
    named = [kafka_name(f.name) for f in dataclasses.fields(BrokerConfig) if f.name not in KBROKER_ONLY]
    assert sorted(n for n in named if n not in KAFKA_BROKER_SETTINGS) == sorted(AUTHORIZER_SETTINGS)
    assert sorted(n for n in NOT_NEEDED if n not in KAFKA_BROKER_SETTINGS) == [
        "confluent.balancer.topic.replication.factor", "confluent.license.topic.replication.factor",
        "zookeeper.connect"]  # cp-server's, and Kafka 3's


def test_apache_images_single_node_environment() -> None:
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
        "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT_HOST://localhost:9092,PLAINTEXT://broker:19092",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@broker:29093",
        "KAFKA_LISTENERS": "CONTROLLER://:29093,PLAINTEXT_HOST://:9092,PLAINTEXT://:19092",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
    }
    cfg, src = load(env)
    listeners = cfg.listener_set(src)
    assert [(e.name, e.host, e.port) for e in listeners.bind] == [("PLAINTEXT_HOST", "", 9092), ("PLAINTEXT", "", 19092)]
    assert listeners.describe("advertised") == "PLAINTEXT_HOST://localhost:9092,PLAINTEXT://broker:19092"
    assert (cfg.node_id, cfg.cluster_id, cfg.data_dir, cfg.group_initial_rebalance_delay_ms) == (
        1, "4L6g3nShT-eMCtK--X86sw", "/tmp/kraft-combined-logs", 0)
    assert src.label("group_initial_rebalance_delay_ms") == "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"
    assert src.label("cluster_id") == "CLUSTER_ID"
    not_needed = notices(src, "config_not_needed")
    assert set(not_needed) == {"process.roles", "controller.quorum.voters", "controller.listener.names",
                               "inter.broker.listener.name", "offsets.topic.replication.factor", "KAFKA_HEAP_OPTS"}
    assert not_needed["process.roles"]["source"] == "KAFKA_PROCESS_ROLES"
    assert notices(src, "config_unknown") == {}


def test_listeners_default_to_the_advertised_ports_on_every_interface_as_the_image_does() -> None:
    cfg, src = load({"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:9092,INTERNAL://kbroker:29092",
                     "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert cfg.listener_set(src).describe("listeners") == "PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:29092"
    assert src.label("listeners") == "listeners derived from KAFKA_ADVERTISED_LISTENERS"


def test_precedence_flag_then_kbroker_then_kafka_then_file(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\nlog.retention.hours=24\nauto.create.topics.enable=false\n")
    env = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_LOG_RETENTION_HOURS": "12", "KBROKER_NUM_PARTITIONS": "4"}
    cfg, src = load(env, {"num_partitions": 5}, str(props))
    assert (cfg.num_partitions, src.label("num_partitions")) == (5, "--num-partitions")
    cfg, src = load(env, {}, str(props))
    assert (cfg.num_partitions, src.label("num_partitions")) == (4, "KBROKER_NUM_PARTITIONS")
    assert (cfg.log_retention_hours, src.label("log_retention_hours")) == (12, "KAFKA_LOG_RETENTION_HOURS")
    assert (cfg.auto_create_topics_enable, src.label("auto_create_topics_enable")) == (
        False, f"auto.create.topics.enable in {props} line 3")
    cfg, _ = load({"KAFKA_NUM_PARTITIONS": "3"}, {}, str(props))
    assert cfg.num_partitions == 3
    with pytest.raises(ConfigError, match=f"num.partitions in {props} line 1: 'x' is not an integer"):
        props.write_text("num.partitions=x\n")
        load({}, {}, str(props))


def test_server_properties_as_java_reads_them(tmp_path) -> None:
    text = ("# a comment\n! another\n  listeners = PLAINTEXT://:9092,\\\n      INTERNAL://:29092\n"
            "advertised.listeners:PLAINTEXT://localhost:9092,INTERNAL://kbroker:29092\n"
            "listener.security.protocol.map PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
            "log.dirs=/var/lib/kafka\\u002fdata\nnode.id=1\nnode.id=7\nbroker.id=7\n")
    assert read_properties(text)[0] == ("listeners", "PLAINTEXT://:9092,INTERNAL://:29092", 3)
    props = tmp_path / "server.properties"
    props.write_text(text)
    cfg, src = load({}, {}, str(props))
    assert cfg.listener_set(src).describe("advertised") == "PLAINTEXT://localhost:9092,INTERNAL://kbroker:29092"
    assert (cfg.data_dir, cfg.node_id) == ("/var/lib/kafka/data", 7)  # the later line wins, as in Java


def test_toml_takes_kafkas_names_too(tmp_path) -> None:
    toml = tmp_path / "kbroker.toml"
    toml.write_text('"log.dirs" = "/srv/data"\n"log.retention.hours" = 1\n"process.roles" = "broker"\n')
    cfg, src = load({}, {}, str(toml))
    assert (cfg.data_dir, cfg.log_retention_hours) == ("/srv/data", 1)
    assert set(notices(src, "config_not_needed")) == {"process.roles"}


def test_unknown_names_are_one_warning_each_with_the_nearest_name() -> None:
    _, src = load({"KAFKA_NUM_PARTITONS": "3", "KAFKA_LOG_CLEANER_THREADS": "2", "KAFKA_WHATEVER": "1",
                   "KBROKER_DATA_DRI": "/x", "KBROKER_TEST_CLIENT_ID": "t", "KBROKER_BOOTSTRAP": "h:1"})
    unknown = notices(src, "config_unknown")
    assert set(unknown) == {"num.partitons", "log.cleaner.threads", "whatever", "KBROKER_DATA_DRI"}
    assert "did you mean num.partitions?" in unknown["num.partitons"]["why"]
    assert unknown["num.partitons"]["source"] == "KAFKA_NUM_PARTITONS"
    assert "a Kafka setting kbroker does not implement" in unknown["log.cleaner.threads"]["why"]
    assert "did you mean KBROKER_DATA_DIR?" in unknown["KBROKER_DATA_DRI"]["why"]
    assert all(n.level == "warning" for n in src.notices if n.event == "config_unknown")


@pytest.mark.parametrize("env, needles", [
    ({"KAFKA_PROCESS_ROLES": "controller"}, ["KAFKA_PROCESS_ROLES", "controller only", "leave the controller"]),
    ({"KAFKA_LOG_DIRS": "/a,/b"}, ["KAFKA_LOG_DIRS", "one directory"]),
    ({"KAFKA_LOG4J_ROOT_LOGLEVEL": "LOUD"}, ["KAFKA_LOG4J_ROOT_LOGLEVEL", "log4j level"]),
    ({"KAFKA_LISTENERS": "CONTROLLER://:9093", "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
      "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT"}, ["KAFKA_LISTENERS", "controller listener",
                                                                       "PLAINTEXT://:9092"]),
    ({"KAFKA_DEFAULT_REPLICATION_FACTOR": "3"}, ["KAFKA_DEFAULT_REPLICATION_FACTOR", "one node", "set 1"]),
    ({"KAFKA_LOG_SEGMENT_BYTES": "1000"}, ["KAFKA_LOG_SEGMENT_BYTES", "segment.bytes=1000", "1048576"]),
    ({"KAFKA_LOG_CLEANUP_POLICY": "forever"}, ["KAFKA_LOG_CLEANUP_POLICY", "cleanup.policy"]),
])
def test_mistakes_name_what_the_user_wrote(env, needles) -> None:
    with pytest.raises(ConfigError) as e:
        load(env)
    for needle in needles:
        assert needle in str(e.value), str(e.value)


def test_log4j_level_and_the_cluster_id() -> None:
    cfg, _ = load({"KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN", "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qk"})
    assert (cfg.log_level, cfg.cluster_id) == ("warning", "MkU3OEVBNTcwNTJENDM2Qk")


def test_the_images_paths(tmp_path) -> None:
    """A file mounted at /mnt/shared/config wins over the image's default file, which is read only
    without KAFKA_* settings (the image then configures Kafka from those alone)."""
    mounted, default = tmp_path / "mounted.properties", tmp_path / "server.properties"
    default.write_text("num.partitions=2\n")
    paths = (str(mounted), str(default))
    assert load_config({}, None, {}, paths).num_partitions == 2
    # a KAFKA_* setting: the default file is not read, as the apache/kafka image does
    cfg, src = load_config_with_sources({}, None, {"KAFKA_LOG_RETENTION_HOURS": "1"}, paths)
    assert cfg.num_partitions == 1 and not [n for n in src.notices if n.event == "config_file_read"]
    # (a JVM variable is no setting)
    assert load_config({}, None, {"KAFKA_HEAP_OPTS": "-Xmx1G"}, paths).num_partitions == 2
    assert IMAGE_CONFIG_PATHS == ("/mnt/shared/config/server.properties", "/opt/kafka/config/server.properties")
    mounted.write_text("num.partitions=3\n")
    cfg, src = load_config_with_sources({}, None, {"KAFKA_LOG_RETENTION_HOURS": "1"}, paths)
    assert (cfg.num_partitions, cfg.log_retention_hours) == (3, 1)
    assert [n.fields["path"] for n in src.notices if n.event == "config_file_read"] == [str(mounted)]
    # --config names another file: the image's paths are not read
    other = tmp_path / "other.properties"
    other.write_text("num.partitions=4\n")
    assert load_config({}, str(other), {}, paths).num_partitions == 4


def test_the_short_listen_forms_take_what_people_type() -> None:
    cfg, src = load({}, {"listen": "PLAINTEXT://127.0.0.1:9093"})
    assert cfg.listener_set(src).describe("listeners") == "PLAINTEXT://127.0.0.1:9093"
    with pytest.raises(ConfigError, match="--listen: 'SSL://127.0.0.1:9093'.*--listeners SSL://127.0.0.1:9093"):
        load({}, {"listen": "SSL://127.0.0.1:9093"})
    # an advertised host without a port advertises the port it listens on, not 9092
    cfg, src = load({}, {"listen": "0.0.0.0:9093", "advertised_listener": "myhost"})
    assert cfg.listener_set(src).describe("advertised") == "PLAINTEXT://myhost:9093"


def test_flags_cannot_be_abbreviated(capsys) -> None:
    from kbroker.broker.cli import main

    with pytest.raises(SystemExit) as e:
        main(["serve", "--cluster-i", "abc"])  # --cluster postgresql://... once quietly set --cluster-id
    assert e.value.code == 2 and "unrecognized arguments: --cluster-i" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--exec"])


def test_the_migration_page_lists_what_the_broker_does() -> None:
    """docs/migrating-from-kafka.md names every setting kbroker accepts as not needed and every
    broker-wide topic default it applies (a name added to either needs its line there)."""
    from pathlib import Path

    from kbroker.broker.kafka_names import JVM_VARIABLES
    from kbroker.broker.topic_defaults import broker_names

    page = (Path(__file__).resolve().parents[2] / "docs" / "migrating-from-kafka.md").read_text()
    assert [n for n in [*NOT_NEEDED, *broker_names()] if f"`{n}`" not in page] == []
    assert [v for v in JVM_VARIABLES - {"KAFKA_VERSION", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_DEBUG", "KAFKA_HOME",
                                        "KAFKA_LOG_DIR_FOR_LOG4J"} if f"`{v}`" not in page] == []
