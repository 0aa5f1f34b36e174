"""Listener settings in Kafka's syntax, and configuration errors that name what the user wrote."""

from __future__ import annotations

import pytest

from kbroker.broker.config import ConfigError, load_config, load_config_with_sources
from kbroker.broker.partitions.startup_topics import TopicSpec, parse_create_topics

MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"


def listeners(**flags):
    cfg, sources = load_config_with_sources(flags, None, env={})
    return cfg.listener_set(sources)


def test_kafka_syntax_any_number_of_named_listeners() -> None:
    got = listeners(listeners="PLAINTEXT://0.0.0.0:9092,INTERNAL://:29092,internal2://[::1]:29093",
                    advertised_listeners="PLAINTEXT://localhost:9092,INTERNAL://kbroker:29092,"
                                         "INTERNAL2://[::1]:29093",
                    listener_security_protocol_map=MAP + ",INTERNAL2:PLAINTEXT")
    assert [(e.name, e.host, e.port) for e in got.bind] == [
        ("PLAINTEXT", "0.0.0.0", 9092), ("INTERNAL", "", 29092), ("INTERNAL2", "::1", 29093)]
    assert {n: (e.host, e.port) for n, e in got.advertised.items()} == {
        "PLAINTEXT": ("localhost", 9092), "INTERNAL": ("kbroker", 29092), "INTERNAL2": ("::1", 29093)}
    assert got.describe("advertised") == "PLAINTEXT://localhost:9092,INTERNAL://kbroker:29092,INTERNAL2://[::1]:29093"


def test_advertised_defaults_to_the_listener_and_to_the_default_map() -> None:
    got = listeners(listeners="PLAINTEXT://127.0.0.1:9092")
    assert (got.advertised["PLAINTEXT"].host, got.advertised["PLAINTEXT"].port) == ("127.0.0.1", 9092)
    partial = listeners(listeners="PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.2:9093",
                        advertised_listeners="INTERNAL://kbroker:9093", listener_security_protocol_map=MAP)
    assert partial.advertised_for("PLAINTEXT").host == "127.0.0.1"
    assert partial.advertised_for("INTERNAL").host == "kbroker"


def test_legacy_flags_are_one_plaintext_listener() -> None:
    got = listeners(listen="0.0.0.0:9092")
    assert [(e.name, e.host, e.port) for e in got.bind] == [("PLAINTEXT", "0.0.0.0", 9092)]
    assert got.advertised["PLAINTEXT"].host == "127.0.0.1"  # as before: a wildcard advertises loopback
    got = listeners(listen="0.0.0.0:9092", advertised_listener="localhost:9092")
    assert (got.advertised["PLAINTEXT"].host, got.advertised["PLAINTEXT"].port) == ("localhost", 9092)
    default = listeners()
    assert default.describe("listeners") == "PLAINTEXT://127.0.0.1:9092"


@pytest.mark.parametrize("flags, needles", [
    ({"listeners": "PLAINTEXT://127.0.0.1:0"}, ["--listeners", "port 0", "1-65535"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, ["--listeners", "70000"]),
    ({"listen": "127.0.0.1:65536"}, ["--listen", "65536"]),
    ({"listen": "127.0.0.1:http"}, ["--listen", "127.0.0.1:http"]),
    ({"listeners": "FOO://127.0.0.1:9092"}, ["--listeners", "FOO", "--listener-security-protocol-map"]),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, ["--listeners", "port", "PLAINTEXT://127.0.0.1"]),
    ({"listeners": "127.0.0.1:9092"}, ["--listeners", "NAME://HOST:PORT"]),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, ["--listeners", "0.0.0.0", "--advertised-listeners"]),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised_listeners": "PLAINTEXT://0.0.0.0:9092"},
     ["--advertised-listeners", "0.0.0.0"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised_listeners": "INTERNAL://kbroker:29092",
      "listener_security_protocol_map": MAP}, ["--advertised-listeners", "INTERNAL", "not in --listeners"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, ["--listeners", "twice"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.2:9092", "listener_security_protocol_map": MAP},
     ["--listeners", "port 9092"]),
    # TLS listeners are served (issue 14) and need the broker's certificate
    ({"listeners": "SSL://127.0.0.1:9093"}, ["--ssl-keystore-location", "SSL", "certificate"]),
    ({"listeners": "EXT://127.0.0.1:9093", "listener_security_protocol_map": "EXT:SASL_SSL"},
     ["--ssl-keystore-location", "EXT", "TLS"]),
    ({"listener_security_protocol_map": "PLAINTEXT:TLS"}, ["--listener-security-protocol-map", "TLS"]),
    ({"listen": "127.0.0.1:9092", "listeners": "PLAINTEXT://127.0.0.1:9092"}, ["--listen", "--listeners"]),
    ({"log_level": "loud"}, ["--log-level", "loud"]),
    ({"num_partitions": "-1"}, ["--num-partitions", "-1"]),
    ({"num_partitions": "three"}, ["--num-partitions", "three"]),
    ({"node_id": "1.5"}, ["--node-id", "1.5"]),
    ({"socket_request_max_bytes": "0"}, ["--socket-request-max-bytes", "0"]),
    ({"flush": "interval:soon"}, ["--flush", "interval:soon"]),
    ({"create_topics": "orders"}, ["--create-topics", "orders"]),
    ({"create_topics": "orders:0"}, ["--create-topics", "orders:0"]),
    ({"create_topics": "orders:3:forever"}, ["--create-topics", "forever"]),
    ({"create_topics": "bad/name:3"}, ["--create-topics", "bad/name"]),
])
def test_bad_values_name_the_option_and_the_value(flags, needles) -> None:
    with pytest.raises(ValueError) as info:
        load_config(flags, None, env={})
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_toml_takes_kafkas_dotted_names_bare_quoted_or_in_sections(tmp_path) -> None:
    toml = tmp_path / "k.toml"
    toml.write_text('group.initial.rebalance.delay.ms = 0\n"num.partitions" = 4\ndata_dir = "/srv/k"\n'
                    '[log]\nlevel = "warning"\n')
    cfg = load_config({}, str(toml), env={})
    assert (cfg.group_initial_rebalance_delay_ms, cfg.num_partitions, cfg.data_dir, cfg.log_level) == (
        0, 4, "/srv/k", "warning")
    toml.write_text("group.initial.rebalance.delay = 0\n")
    with pytest.raises(ConfigError) as info:
        load_config({}, str(toml), env={})
    assert str(info.value) == f"{toml}: unknown setting 'group.initial.rebalance.delay'"
    toml.write_text('num.partitions = "many"\n')
    with pytest.raises(ConfigError) as info:
        load_config({}, str(toml), env={})
    assert str(info.value).startswith(f"num.partitions in {toml}:")


def test_environment_and_toml_errors_name_the_variable_or_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^KBROKER_NUM_PARTITIONS: -1 is below the minimum 1$"):
        load_config({}, None, env={"KBROKER_NUM_PARTITIONS": "-1"})
    with pytest.raises(ConfigError, match="KBROKER_LISTENERS.*70000"):
        load_config({}, None, env={"KBROKER_LISTENERS": "PLAINTEXT://127.0.0.1:70000"})
    toml = tmp_path / "k.toml"
    toml.write_text('"num.partitions" = "many"\n')
    with pytest.raises(ConfigError) as info:
        load_config({}, str(toml), env={})
    assert str(info.value).startswith(f"num.partitions in {toml}:") and "--" not in str(info.value)
    toml.write_text('log_level = "info"\nlisteners = PLAINTEXT://x:1\n')
    with pytest.raises(ConfigError) as info:
        load_config({}, str(toml), env={})
    assert str(toml) in str(info.value) and "line 2" in str(info.value)
    with pytest.raises(ConfigError, match="--config: cannot read"):
        load_config({}, str(tmp_path / "missing.toml"), env={})


def test_kafka_and_short_forms_at_different_levels_the_higher_wins() -> None:
    cfg, src = load_config_with_sources({"listen": "127.0.0.1:9999"}, None,
                                        env={"KBROKER_LISTENERS": "PLAINTEXT://127.0.0.1:9092"})
    assert cfg.listener_set(src).describe("listeners") == "PLAINTEXT://127.0.0.1:9999"
    cfg, src = load_config_with_sources({"listeners": "PLAINTEXT://127.0.0.1:9092"}, None,
                                        env={"KBROKER_LISTEN": "127.0.0.1:9999"})
    assert cfg.listener_set(src).describe("listeners") == "PLAINTEXT://127.0.0.1:9092"
    with pytest.raises(ConfigError, match="KBROKER_LISTEN and KBROKER_LISTENERS are both set"):
        load_config({}, None, env={"KBROKER_LISTEN": "127.0.0.1:1", "KBROKER_LISTENERS": "PLAINTEXT://127.0.0.1:2"})


def test_create_topics_spec() -> None:
    assert parse_create_topics("orders:3, payments:6:compact,logs:1:delete", "--create-topics") == [
        TopicSpec("orders", 3, "delete"), TopicSpec("payments", 6, "compact"), TopicSpec("logs", 1, "delete")]
    assert parse_create_topics("", "--create-topics") == []
    with pytest.raises(ValueError, match="listed twice"):
        parse_create_topics("a:1,a:2", "--create-topics")
    with pytest.raises(ValueError, match="internal topic"):
        parse_create_topics("__consumer_offsets:50", "--create-topics")
