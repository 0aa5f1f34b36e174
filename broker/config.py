"""Broker configuration: flags win over `KBROKER_*` environment variables, which win over an
optional TOML file, which wins over the defaults (Kafka's defaults where Kafka has the setting).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any


def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [::1]:9092
        host, _, rest = text[1:].partition("]")
        return host, int(rest.lstrip(":") or default_port)
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    return host or "0.0.0.0", int(port)


@dataclass(slots=True)
class BrokerConfig:
    """Every setting, with the help text `kbroker --help` prints and its Kafka name where one exists."""

    listen: str = field(default="127.0.0.1:9092", metadata={"help": "HOST:PORT to listen on"})
    advertised_listener: str = field(
        default="", metadata={"help": "HOST:PORT clients are told to connect to (default: the listen address)"}
    )
    data_dir: str = field(default="./data", metadata={"help": "directory holding the logs and cluster metadata"})
    node_id: int = field(default=1, metadata={"help": "this broker's node id (Kafka node.id)"})
    log_format: str = field(
        default="auto", metadata={"help": "console, json, or auto (console on a terminal, json otherwise)"}
    )
    log_level: str = field(default="info", metadata={"help": "debug, info, warning or error"})
    socket_request_max_bytes: int = field(
        default=104857600, metadata={"help": "largest request frame accepted (socket.request.max.bytes)"}
    )
    flush: str = field(
        default="always",
        metadata={"help": "always (group commit: ack after fsync), interval:MS, or never"},
    )
    auto_create_topics_enable: bool = field(
        default=True, metadata={"help": "create unknown topics on Metadata and Produce (auto.create.topics.enable)"}
    )
    num_partitions: int = field(default=1, metadata={"help": "partitions of auto-created topics (num.partitions)"})
    shutdown_timeout_s: float = field(default=4.0, metadata={"help": "seconds to finish in-flight requests on SIGTERM"})
    group_initial_rebalance_delay_ms: int = field(
        default=3000, metadata={"help": "group.initial.rebalance.delay.ms"}
    )
    group_min_session_timeout_ms: int = field(default=6000, metadata={"help": "group.min.session.timeout.ms"})
    group_max_session_timeout_ms: int = field(default=1800000, metadata={"help": "group.max.session.timeout.ms"})
    group_max_size: int = field(default=2147483647, metadata={"help": "group.max.size"})
    offsets_topic_num_partitions: int = field(default=50, metadata={"help": "offsets.topic.num.partitions"})
    offsets_retention_minutes: int = field(default=10080, metadata={"help": "offsets.retention.minutes"})
    offsets_retention_check_interval_ms: int = field(
        default=600000, metadata={"help": "offsets.retention.check.interval.ms"}
    )
    offset_metadata_max_bytes: int = field(default=4096, metadata={"help": "offset.metadata.max.bytes"})
    log_retention_check_interval_ms: int = field(
        default=300000, metadata={"help": "log.retention.check.interval.ms"}
    )
    cluster_id: str = field(default="", metadata={"help": "cluster id to create the data dir with (default: random)"})
    metrics_listen: str = field(
        default="", metadata={"help": "HOST:PORT of the HTTP endpoint for /metrics, /health, /ready, group history "
                                      "and test controls (off when empty)"}
    )
    test_controls: bool = field(
        default=False, metadata={"help": "serve the test controls (POST /v1/test/...) on --metrics-listen "
                                         "(127.0.0.1:9644 when unset); never in production"}
    )
    test_controls_remote: bool = field(
        default=False, metadata={"help": "allow --test-controls on a non-loopback --metrics-listen address"}
    )
    create_topics: str = field(
        default="", metadata={"help": "topics to create at start-up, NAME:PARTITIONS[:compact],...; /ready waits "
                                      "for them"}
    )
    profile: str = field(
        default="", metadata={"help": "'test': the settings test suites copy by hand (no initial rebalance "
                                      "delay, 1 s minimum session timeout, --flush never)"}
    )

    @property
    def listen_address(self) -> tuple[str, int]:
        return parse_host_port(self.listen)

    @property
    def advertised_address(self) -> tuple[str, int]:
        if self.advertised_listener:
            return parse_host_port(self.advertised_listener)
        host, port = self.listen_address
        return ("127.0.0.1" if host in ("0.0.0.0", "::", "") else host), port


ENV_PREFIX = "KBROKER_"


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    if kind == "bool":
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() in ("1", "true", "yes", "on")
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    return str(value)


def load_config(flags: dict[str, Any], config_file: str | None = None, env: dict[str, str] | None = None) -> BrokerConfig:
    """Merge defaults, an optional TOML file, `KBROKER_*` variables and flags (in rising priority).

    TOML keys and environment names use the field names (`data_dir` / `KBROKER_DATA_DIR`);
    Kafka's dotted names (`group.initial.rebalance.delay.ms`) are accepted in the TOML file too.
    """
    env = os.environ if env is None else env
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    values: dict[str, Any] = {}
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    if path:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        for key, value in data.items():
            name = key.replace(".", "_").replace("-", "_")
            if name not in fields:
                raise ValueError(f"{path}: unknown setting {key!r}")
            values[name] = _coerce(fields[name], value)
    for name, f in fields.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _coerce(f, raw)
    for name, value in flags.items():
        if value is not None and name in fields:
            values[name] = _coerce(fields[name], value)
    if values.get("profile") == "test":
        for name, value in TEST_PROFILE.items():
            values.setdefault(name, value)  # what the user set explicitly wins over the profile
    if values.get("test_controls") and not values.get("metrics_listen"):
        values["metrics_listen"] = DEFAULT_ADMIN_LISTEN
    cfg = BrokerConfig(**values)
    validate(cfg)
    return cfg


DEFAULT_ADMIN_LISTEN = "127.0.0.1:9644"
# `--profile test`: what every test set-up copies by hand. Explicit settings win.
TEST_PROFILE: dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 1000,
    "flush": "never",
}


def parse_topic_specs(text: str) -> list[tuple[str, int, dict[str, str]]]:
    """`orders:3,payments:6:compact` -> [(name, partitions, configs)]."""
    specs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, *rest = item.split(":")
        partitions = int(rest[0]) if rest and rest[0] else 1
        configs = {"cleanup.policy": "compact"} if "compact" in rest[1:] else {}
        if not name or partitions < 1:
            raise ValueError(f"--create-topics: bad topic {item!r} (NAME:PARTITIONS[:compact])")
        specs.append((name, partitions, configs))
    return specs


def validate(cfg: BrokerConfig) -> None:
    if cfg.log_format not in ("auto", "console", "json"):
        raise ValueError(f"--log-format must be console, json or auto, not {cfg.log_format!r}")
    if not (cfg.flush in ("always", "never") or cfg.flush.startswith("interval:")):
        raise ValueError(f"--flush must be always, never or interval:MS, not {cfg.flush!r}")
    if cfg.flush.startswith("interval:"):
        int(cfg.flush.split(":", 1)[1])
    cfg.listen_address  # raises on a malformed address
    if cfg.profile not in ("", "test"):
        raise ValueError(f"--profile must be test (or empty), not {cfg.profile!r}")
    parse_topic_specs(cfg.create_topics)
    if cfg.metrics_listen:
        host, _ = parse_host_port(cfg.metrics_listen)
        if cfg.test_controls and not cfg.test_controls_remote and host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"--test-controls on {cfg.metrics_listen} would let anyone who reaches it delete "
                             f"every topic; bind --metrics-listen to loopback or add --test-controls-remote")
    cfg.advertised_address
