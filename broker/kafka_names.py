"""Kafka's configuration names, read as the apache/kafka and cp-kafka images read them.

    KAFKA_LOG_RETENTION_HOURS=24            log.retention.hours=24   (the images' environment rule)
    kbroker serve --config server.properties                          (a Java properties file)
    /opt/kafka/config/server.properties     the apache/kafka image's path, read without --config

Both images turn a `KAFKA_*` variable into a property the same way (KafkaDockerWrapper in
apache/kafka, Confluent's configuration reference): drop `KAFKA_`, lower-case, `_` becomes `.`,
`__` becomes `_`, `___` becomes `-`. Each name then means what it means to Kafka:

- a setting kbroker has, mostly under the same name (`num.partitions` is `--num-partitions`);
- one that means nothing on one kbroker node (KRaft's controller quorum, replication factors of
  internal topics, thread and socket-buffer tuning, the JVM's variables): accepted, one info line;
- a Kafka setting kbroker does not implement, or a name Kafka does not know (a typo): one warning
  line each, the typo with the nearest name kbroker knows.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from .kafka_settings import KAFKA_BROKER_SETTINGS

ENV_PREFIX = "KAFKA_"
# The apache/kafka image: a folder mounted at /mnt/shared/config replaces the default file, which
# the image keeps at /opt/kafka/config/server.properties (read only without KAFKA_* settings, as
# the image writes its final file from those variables alone then).
MOUNTED_CONFIG = "/mnt/shared/config/server.properties"
IMAGE_CONFIG = "/opt/kafka/config/server.properties"
IMAGE_CONFIG_PATHS = (MOUNTED_CONFIG, IMAGE_CONFIG)

# Kafka names of settings kbroker keeps under another name.
ALIASES = {"log.dirs": "data_dir", "log.dir": "data_dir", "broker.id": "node_id"}
# Of two names for one setting in the same place, the one applied last wins (Kafka: log.dirs over log.dir).
ALIAS_ORDER = ("log.dir", "log.dirs", "broker.id", "node.id")
# kbroker's own settings: no Kafka name (the rest are Kafka's, `num_partitions` is `num.partitions`).
KBROKER_ONLY = frozenset({
    "listen", "advertised_listener", "data_dir", "log_format", "log_level", "max_inflated_batch_bytes", "flush",
    "shutdown_timeout_s", "cluster_id", "create_topics", "max_partitions", "log_max_open_files", "metrics_listen",
    "test_controls", "test_controls_remote", "test_controls_token", "metrics_allowed_hosts", "profile",
    "sasl_plain_users_file", "dev_security", "dev_unsecured_oauthbearer", "ssl_handshake_timeout_ms", "kafka_version",
    "client_metrics", "client_metrics_interval_ms", "nodes", "cluster", "cluster_poll_ms", "log_requests",
    "postgres_tail_bytes", "postgres_memory_bytes", "postgres_read_cache_bytes",
})

# Kafka settings of its StandardAuthorizer, not of KafkaConfig (which passes them on to it).
AUTHORIZER_SETTINGS = frozenset({"super.users", "allow.everyone.if.no.acl.found"})

_ONE_NODE = "kbroker is one node: every partition has one replica, which is its leader"
_NO_QUORUM = "KRaft's controller quorum: kbroker keeps its metadata itself, with no controllers"
NO_JVM = "a JVM or log4j setting: kbroker is a Python process (--log-level, --log-format)"
_NO_THREADS = "thread and buffer tuning of Kafka's JVM: kbroker serves from one event loop"
# Kafka settings with nothing to do on one kbroker node: accepted, and said so once.
NOT_NEEDED: dict[str, str] = {
    "process.roles": _NO_QUORUM,
    "controller.quorum.voters": _NO_QUORUM,
    "controller.quorum.bootstrap.servers": _NO_QUORUM,
    "controller.listener.names": _NO_QUORUM + "; its listeners are not served",
    "metadata.log.dir": _NO_QUORUM,
    "zookeeper.connect": "ZooKeeper (Kafka before 4.0): kbroker keeps its metadata itself",
    "inter.broker.listener.name": _ONE_NODE + " (no traffic between brokers)",
    "security.inter.broker.protocol": _ONE_NODE + " (no traffic between brokers)",
    "offsets.topic.replication.factor": _ONE_NODE,
    "transaction.state.log.replication.factor": _ONE_NODE,
    "transaction.state.log.min.isr": _ONE_NODE,
    "share.coordinator.state.topic.replication.factor": _ONE_NODE,
    "share.coordinator.state.topic.min.isr": _ONE_NODE,
    "confluent.license.topic.replication.factor": _ONE_NODE,
    "confluent.balancer.topic.replication.factor": _ONE_NODE,
    "num.network.threads": _NO_THREADS,
    "num.io.threads": _NO_THREADS,
    "num.replica.fetchers": _NO_THREADS,
    "num.recovery.threads.per.data.dir": _NO_THREADS,
    "background.threads": _NO_THREADS,
    "socket.send.buffer.bytes": _NO_THREADS,
    "socket.receive.buffer.bytes": _NO_THREADS,
    "group.coordinator.rebalance.protocols": "kbroker serves the classic and consumer protocols always",
}
# Environment variables of the images' JVM and start scripts (never properties).
JVM_VARIABLES = frozenset({
    "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS",
    "KAFKA_LOG4J_OPTS", "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME", "KAFKA_VERSION", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_DEBUG", "KAFKA_HOME", "KAFKA_LOG_DIR_FOR_LOG4J",
})
# KAFKA_LOG4J_ROOT_LOGLEVEL sets log4j's root level: kbroker's --log-level.
LOG4J_ROOT_LOGLEVEL = "KAFKA_LOG4J_ROOT_LOGLEVEL"
LOG4J_LEVELS = {"TRACE": "debug", "DEBUG": "debug", "INFO": "info", "WARN": "warning", "ERROR": "error",
                "FATAL": "error", "OFF": "error"}
# KAFKA_LOG4J_LOGGERS sets log4j loggers' levels ("kafka.request.logger=DEBUG,kafka.controller=INFO"): of
# them kbroker has kafka.request.logger's, --log-requests (on at DEBUG or TRACE, as Kafka writes its lines).
LOG4J_LOGGERS = "KAFKA_LOG4J_LOGGERS"
REQUEST_LOGGER = "kafka.request.logger"


def logs_requests(log4j_loggers: str) -> bool | None:
    """What KAFKA_LOG4J_LOGGERS says of the request logger: True at DEBUG or TRACE (or ALL), False at
    another level, None when it does not name it."""
    for item in log4j_loggers.split(","):
        name, sep, level = item.partition("=")
        if sep and name.strip() == REQUEST_LOGGER:
            return level.strip().upper() in ("DEBUG", "TRACE", "ALL")
    return None


# A few names clients (not brokers) read, which a shared environment may hold.
CLIENT_VARIABLES = frozenset({"KAFKA_BOOTSTRAP_SERVERS", "KAFKA_BROKERS", "KAFKA_BOOTSTRAP"})
CLIENT_VARIABLE = "a Kafka client's variable, not a broker setting"


def property_name(variable: str) -> str:
    """`KAFKA_LOG_RETENTION_HOURS` -> `log.retention.hours` (`__` is `_`, `___` is `-`)."""
    name = variable[len(ENV_PREFIX):].lower()
    return name.replace("_", ".").replace("...", "-").replace("..", "_")


def variable_name(name: str) -> str:
    """`log.retention.hours` -> `KAFKA_LOG_RETENTION_HOURS`: the images' rule the other way."""
    return ENV_PREFIX + name.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def kafka_name(field: str) -> str | None:
    """The Kafka name of a kbroker setting, None for kbroker's own."""
    if field in KBROKER_ONLY:
        return None
    return field.replace("_", ".")


def field_for(name: str, fields: Iterable[str]) -> str | None:
    """The kbroker setting a Kafka name sets, or None."""
    if name in ALIASES:
        return ALIASES[name]
    candidate = name.replace(".", "_")
    if candidate in fields and candidate not in KBROKER_ONLY:
        return candidate
    return None


def unknown_hint(name: str, fields: Iterable[str]) -> str:
    """Why a Kafka name sets nothing here: a Kafka setting kbroker does not implement, or the
    nearest name kbroker knows for a typo."""
    if name in KAFKA_BROKER_SETTINGS or name.startswith("listener.name."):
        return "a Kafka setting kbroker does not implement; ignored"
    known = [n for n in (kafka_name(f) for f in fields) if n] + list(ALIASES) + list(NOT_NEEDED)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    return f"not a Kafka setting; ignored (did you mean {close[0]}?)" if close else "not a Kafka setting; ignored"


# --- Java properties files ----------------------------------------------------------------------------

_SEPARATOR = re.compile(r"(?<!\\)[=:\s]")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(text: str) -> list[tuple[str, str, int]]:
    """(key, value, line number) of each entry, as java.util.Properties.load reads them: `#` and `!`
    comments, `key=value`, `key: value` or `key value`, a trailing backslash continues the line,
    backslash escapes (\\t, \\uXXXX, an escaped separator)."""
    out: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        match = _SEPARATOR.search(line)
        if match is None:
            key, value = line, ""
        else:
            key, rest = line[:match.start()], line[match.end():]
            rest = rest.lstrip(" \t\f")
            if match.group() not in "=:" and rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t\f")
            value = rest
        out.append((_unescape(key), _unescape(value), start + 1))
    return out


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes continues the line on the next."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def listeners_from_advertised(advertised: str) -> str:
    """The apache/kafka image's default for KAFKA_LISTENERS: KAFKA_ADVERTISED_LISTENERS with every
    host replaced by 0.0.0.0 (docker/resources/common-scripts/configure)."""
    return re.sub(r"://[^:]*:", "://0.0.0.0:", advertised)
