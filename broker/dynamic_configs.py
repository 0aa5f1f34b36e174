"""Dynamic broker configs: AlterConfigs and IncrementalAlterConfigs on the BROKER resource change
Kafka's dynamic broker settings at run time, per broker (the resource named by this node's id) or
cluster-wide (the empty name), as Kafka 4.4's DynamicBrokerConfig does.

A value comes from, in falling priority: the per-broker layer (DYNAMIC_BROKER_CONFIG), the
cluster-wide default layer (DYNAMIC_DEFAULT_BROKER_CONFIG), the broker's own settings (flags,
environment, file: STATIC_BROKER_CONFIG), Kafka's default (DEFAULT_CONFIG). The broker's settings
(`Broker.config`) stay what they were at start; `effective()` is them with the dynamic layers over.

Kafka's rules, kept: a name Kafka cannot change at run time is INVALID_REQUEST "Cannot update these
configs dynamically: [...]"; a security config without a listener prefix is refused; a per-broker
one (listeners, SSL/SASL listener settings) is refused at the cluster-wide level; a value is
checked against the setting's type (and, for the topic defaults, against the topic config's
bounds) before anything is kept: a bad one is INVALID_REQUEST, as Kafka 4.4 answers it. A name Kafka does not know is kept and reported, as Kafka keeps it.

What changes at run time here: the broker-wide topic defaults (the first broker synonym of each
topic config: `log.retention.ms` but not `log.retention.hours`, `message.max.bytes`,
`compression.type`, ...: every topic without its own value takes the new one at once), the log
cleaner's `log.cleaner.backoff.ms`, the connection limits for the next connection (`max.connections`,
`listener.name.X.max.connections`, `max.connections.per.ip` and its overrides: connection_limits())
`producer.id.expiration.ms`, and a TLS listener's keystore (a reconfigurable: security/tls_reload.py).
Kafka's other dynamic settings (its thread pools, the other listener SSL/SASL settings, replication
quotas) are accepted, checked, kept and reported like Kafka's, but change nothing: kbroker has no such
pools, and reads its other TLS and SASL settings at start (docs/configuration.md says why for each).

The layers are one JSON file in the data directory (`dynamic-broker-configs.json`), rewritten whole
(write, fsync, rename) before the request is answered, read at start before the logs load. A node of a
cluster over PostgreSQL keeps them in the database instead (`broker_configs`, broker/postgres_node.py):
stored there before the answer, read at start, and followed by every node as the others change them.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog

from . import topic_defaults
from .config import BrokerConfig
from .config_sources import ConfigError, coerce
from .kafka_settings import KAFKA_BROKER_SETTINGS
from .storage.log.config import ListValueError, parse_cleanup_policy
from .storage.log.files import write_file_durably
from ..protocol.errors import ErrorCode, KafkaError

log = structlog.get_logger("kbroker.dynamic_configs")

# Kafka's Reconfigurable: (this broker's layer as it would be, the names asked) -> its commit, or None
Reconfigure = Callable[[dict[str, str], Iterable[str]], Callable[[], None] | None]

FILE = "dynamic-broker-configs.json"
KAFKA_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DYNAMIC_BROKER, DYNAMIC_DEFAULT = "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"
LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)")

# Kafka 4.4's DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS, beyond the topic defaults' synonyms (DynamicLogConfig).
_SECURITY = frozenset({  # SslConfigs.RECONFIGURABLE_CONFIGS: per listener only
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
_LISTENER = frozenset({  # DynamicListenerConfig.RECONFIGURABLE_CONFIGS
    "listeners", "listener.security.protocol.map", "principal.builder.class", "ssl.protocol", "ssl.provider",
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_OTHERS = frozenset({
    # LogCleaner.RECONFIGURABLE_CONFIGS
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "cordoned.log.dirs",
    # DynamicThreadPool, metric reporters, SocketServer, the producer state manager
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "metric.reporters", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    # remote log, replication, config providers, group and share coordinators, quotas
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.follower.thread.pool.size",
    "remote.log.reader.threads", "follower.fetch.last.tiered.offset.enable", "config.providers",
    "group.coordinator.cached.buffer.max.bytes", "group.consumer.assignment.interval.ms",
    "group.consumer.assignor.offload.enable", "group.share.assignment.interval.ms",
    "group.share.assignor.offload.enable", "group.streams.assignment.interval.ms",
    "group.streams.assignor.offload.enable", "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix", "share.coordinator.cached.buffer.max.bytes",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
# DynamicLogConfig: the first broker name of each topic config's chain (log.retention.ms, not .hours)
_LOG = frozenset(topic_defaults.first_names())
ALL_DYNAMIC = _LOG | _SECURITY | _LISTENER | _OTHERS
PER_BROKER = (_SECURITY | _LISTENER | {"cordoned.log.dirs"}) - _CLUSTER_LEVEL_LISTENER
# Dynamic settings kbroker applies at run time through its own settings (BrokerConfig fields: effective()).
APPLIED = _LOG | {"log.cleaner.backoff.ms", "max.connections", "max.connections.per.ip"}
# Applied at run time without a BrokerConfig field: read with value() where they act (the network
# server: broker/network/connection_limits.py; the producer states' expiry). The rest are kept only.
APPLIED_BY_NAME = frozenset({"max.connections.per.ip.overrides", "producer.id.expiration.ms",
                             "log.cleaner.io.max.bytes.per.second"})
# Kafka's lower bounds of the settings kbroker applies or checks (ConfigDef atLeast).
_AT_LEAST = {"max.connections": 0, "max.connections.per.ip": 0, "max.connection.creation.rate": 0,
             "producer.id.expiration.ms": 1, "log.cleaner.threads": 0, "num.io.threads": 1,
             "num.network.threads": 1, "background.threads": 1, "num.replica.fetchers": 1,
             "num.recovery.threads.per.data.dir": 1}
# Java types of the kept-only numeric and boolean settings, checked as Kafka parses them.
_KEPT_TYPES = {
    "log.cleaner.threads": "int", "log.cleaner.dedupe.buffer.size": "int", "log.cleaner.io.buffer.size": "int",
    "log.cleaner.io.buffer.load.factor": "float", "log.cleaner.io.max.bytes.per.second": "float",
    "num.io.threads": "int", "num.replica.fetchers": "int", "num.recovery.threads.per.data.dir": "int",
    "background.threads": "int", "num.network.threads": "int", "max.connections": "int",
    "max.connections.per.ip": "int", "max.connection.creation.rate": "int", "producer.id.expiration.ms": "int",
    "transaction.partition.verification.enable": "bool", "group.coordinator.cached.buffer.max.bytes": "int",
    "leader.replication.throttled.rate": "int", "follower.replication.throttled.rate": "int",
    "replica.alter.log.dirs.io.max.bytes.per.second": "int",
}
# Kafka 4.4's defaults of the kept-only settings a DescribeConfigs names with their Java type (the
# DEFAULT_CONFIG synonym under a dynamic value); the others are described without one.
KEPT_DEFAULTS: dict[str, tuple[str, str]] = {
    "log.cleaner.threads": ("1", "INT"), "log.cleaner.dedupe.buffer.size": ("134217728", "LONG"),
    "log.cleaner.io.buffer.size": ("524288", "INT"), "log.cleaner.io.buffer.load.factor": ("0.9", "DOUBLE"),
    "log.cleaner.io.max.bytes.per.second": ("1.7976931348623157E308", "DOUBLE"),
    "num.io.threads": ("8", "INT"), "num.network.threads": ("3", "INT"), "num.replica.fetchers": ("1", "INT"),
    "background.threads": ("10", "INT"), "sasl.kerberos.min.time.before.relogin": ("60000", "LONG"),
    "max.connections.per.ip.overrides": ("", "STRING"),
}
_FIELDS = {f.name: f for f in dataclasses.fields(BrokerConfig)}


def _field(name: str) -> dataclasses.Field | None:
    """The BrokerConfig field an applied setting sets."""
    return _FIELDS.get(name.replace(".", "_")) if name in APPLIED else None


def is_dynamic(name: str) -> bool:
    return name in ALL_DYNAMIC


def base_name(name: str) -> str:
    """A listener-prefixed setting's own name (`listener.name.sasl_ssl.max.connections`: max.connections)."""
    base = LISTENER_PREFIX.fullmatch(name)
    return base.group(1) if base else name


# Listener-prefixed settings kbroker acts on: the connection limit, and the TLS keystore (tls_reload.py).
_APPLIED_PER_LISTENER = frozenset({"max.connections", "ssl.keystore.location", "ssl.key.password",
                                   "ssl.truststore.location", "ssl.allow.dn.changes", "ssl.allow.san.changes"})


def applied(name: str) -> bool:
    """Whether kbroker acts on this dynamic setting (else it is kept and reported only)."""
    return name in APPLIED or name in APPLIED_BY_NAME or (
        name != base_name(name) and base_name(name) in _APPLIED_PER_LISTENER)


def sensitive(name: str) -> bool:
    base = LISTENER_PREFIX.fullmatch(name)
    base_name = base.group(1) if base else name
    return base_name.endswith(".password") or base_name.endswith("sasl.jaas.config") or base_name == "ssl.keystore.key"


class DynamicBrokerConfigs:
    """The two dynamic layers over the broker's settings, kept in the data directory."""

    def __init__(self, data_dir: Path, static: BrokerConfig,
                 layers: tuple[dict[str, str], dict[str, str]] | None = None) -> None:
        """`layers`: (this node's, the cluster-wide defaults) as a cluster's database holds them (a node
        over PostgreSQL); without them, the file in `data_dir`."""
        self.path: Path | None = Path(data_dir) / FILE if layers is None else None
        self.static = static
        self.node: dict[str, str] = {}  # this broker's (the resource named by its id)
        self.default: dict[str, str] = {}  # the cluster-wide defaults (the empty name)
        self._reconfigurables: list[Reconfigure] = []
        if layers is not None:
            self.node, self.default = dict(layers[0]), dict(layers[1])
        elif self.path is not None and self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
                self.node = {str(k): str(v) for k, v in loaded.get("broker", {}).items()}
                self.default = {str(k): str(v) for k, v in loaded.get("default", {}).items()}
            except (OSError, ValueError, AttributeError) as exc:
                log.error("dynamic_broker_configs_unreadable", path=str(self.path), error=repr(exc))
        try:
            self._effective = self._build(self.node, self.default)
        except KafkaError as exc:  # a kept value no longer valid here: the static settings serve
            log.error("dynamic_broker_configs_ignored", path=str(self.path), error=str(exc))
            self.node, self.default = {}, {}
            self._effective = static

    def effective(self) -> BrokerConfig:
        """The broker's settings with the dynamic layers over them."""
        return self._effective

    def value(self, name: str) -> str | None:
        """A dynamic setting's value: this broker's, else the cluster-wide default's, else None."""
        return self.node[name] if name in self.node else self.default.get(name)

    def connection_limits(self, listener: str, ip: str) -> tuple[int, int]:
        """(max.connections, max.connections.per.ip) as a listener applies them to its next connection
        from `ip`: the listener's own `listener.name.<listener>.max.connections` where set, else the
        broker's; the address's override where one names it (Kafka's DynamicConnectionQuota). The
        connections open stay."""
        effective = self._effective
        own = self.value(f"listener.name.{listener.lower()}.max.connections")
        overrides = self.value("max.connections.per.ip.overrides")
        per_ip = effective.max_connections_per_ip
        if overrides:
            per_ip = _address_overrides(overrides).get(ip, per_ip)
        return int(own) if own is not None else effective.max_connections, per_ip

    def producer_id_expiration_ms(self) -> int:
        """producer.id.expiration.ms: how long an idle producer's state is kept (Kafka's 24 hours unless set)."""
        value = self.value("producer.id.expiration.ms")
        return int(value) if value is not None else KAFKA_PRODUCER_ID_EXPIRATION_MS

    def cleaner_io_max_bytes_per_s(self) -> float:
        """log.cleaner.io.max.bytes.per.second: the log cleaner's read and write rate (unlimited unless set)."""
        value = self.value("log.cleaner.io.max.bytes.per.second")
        return float(value) if value is not None else math.inf

    def layer(self, cluster_default: bool) -> dict[str, str]:
        return self.default if cluster_default else self.node

    def synonyms(self, names: list[str]) -> list[tuple[str, str, str]]:
        """The dynamic entries of `names` (a setting's synonym chain), in Kafka's order: per-broker
        ones, then cluster-wide defaults (ConfigHelper.configSynonyms)."""
        out = [(n, self.node[n], DYNAMIC_BROKER) for n in names if n in self.node]
        return out + [(n, self.default[n], DYNAMIC_DEFAULT) for n in names if n in self.default]

    def add_reconfigurable(self, prepare: Reconfigure) -> None:
        """Something that acts on this broker's dynamic configs (a TLS listener's keystore: Kafka's
        Reconfigurable): `prepare(layer, names)` checks the layer as it would be (KafkaError) and
        gives what applies it, or None. The layer in force now is applied at once (after a restart)."""
        self._reconfigurables.append(prepare)
        try:
            commit = prepare(self.node, list(self.node))
        except KafkaError as exc:
            log.error("dynamic_broker_configs_not_applied", path=str(self.path), error=str(exc),
                      action="the broker's own settings serve until a valid change")
            return
        if commit is not None:
            commit()

    def alter(self, cluster_default: bool, change: Callable[[dict[str, str]], dict[str, str]],
              validate_only: bool, names: Iterable[str] = ()) -> bool:
        """Apply `change` to one layer; every name and value checked (KafkaError) before any is kept,
        and kept durably before this returns. `names`: the ones the request names (a TLS keystore
        named again is reloaded when its file changed, unchanged as the value is). True when the
        effective settings may have changed."""
        new = self.prepare(cluster_default, change, validate_only, names)
        if new is None:
            if not validate_only:
                self.reconfigure(names)
            return False
        return self.adopt(*((self.node, new) if cluster_default else (new, self.default)), names=names)

    def prepare(self, cluster_default: bool, change: Callable[[dict[str, str]], dict[str, str]],
                validate_only: bool, names: Iterable[str] = ()) -> dict[str, str] | None:
        """The layer after `change`, every name and value checked (KafkaError), the reconfigurables'
        checks too; None when nothing is to be kept (validate-only, or no change). A cluster's node
        stores it, then adopts it."""
        current = self.layer(cluster_default)
        new = change(dict(current))
        self._check_names(set(new) - set(current) | {n for n in new if new[n] != current.get(n)}, cluster_default)
        node, default = (self.node, new) if cluster_default else (new, self.default)
        self._build(node, default)
        for reconfigurable in self._reconfigurables:
            reconfigurable(node, names)  # checked only: adopt() applies
        return None if validate_only or new == current else new

    def adopt(self, node: dict[str, str], default: dict[str, str], names: Iterable[str] | None = None) -> bool:
        """These layers from now on (checked: a bad value raises KafkaError and changes nothing), kept in
        the file when they are a file's, and applied to the reconfigurables (`names`, or those changed,
        asked to reload). True when they changed."""
        if (node, default) == (self.node, self.default):
            return False
        effective = self._build(node, default)
        changed = {n for n in set(node) | set(self.node) if node.get(n) != self.node.get(n)} | \
            {n for n in set(default) | set(self.default) if default.get(n) != self.default.get(n)}
        self.node, self.default, self._effective = dict(node), dict(default), effective
        if self.path is not None:
            write_file_durably(self.path, json.dumps({"broker": self.node, "default": self.default},
                                                     sort_keys=True, indent=1).encode())
        unused = sorted(n for n in changed if not applied(n))
        log.info("dynamic_broker_configs_altered", broker={n: None if sensitive(n) else v for n, v in node.items()},
                 default={n: None if sensitive(n) else v for n, v in default.items()},
                 **({"kept_not_used": unused} if unused else {}))
        self.reconfigure(changed | set(names or ()))
        return True

    def reconfigure(self, names: Iterable[str]) -> None:
        """Apply this broker's layer to the reconfigurables for `names` (a TLS listener's keystore); one
        that no longer checks (a file gone since) is logged and left as it was."""
        names = list(names)
        for reconfigurable in self._reconfigurables:
            try:
                commit = reconfigurable(self.node, names)
            except KafkaError as exc:
                log.error("dynamic_broker_configs_not_applied", error=str(exc), configs=sorted(names),
                          action="the setting in force stays until a valid change")
                continue
            if commit is not None:
                commit()

    @staticmethod
    def _check_names(names: set[str], cluster_default: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs, in its order."""
        def refuse(what: set[str], message: str) -> None:
            if what:  # Kafka prints a Java set: [a, b]
                raise KafkaError(f"{message}: [{', '.join(sorted(what))}]", ErrorCode.INVALID_REQUEST)

        refuse({n for n in names if n in KAFKA_BROKER_SETTINGS and n not in ALL_DYNAMIC},
               "Cannot update these configs dynamically")
        refuse(names & _SECURITY,
               "These security configs can be dynamically updated only per-listener using the listener prefix")
        if cluster_default:
            per_broker = {n for n in names if n in PER_BROKER or (
                (m := LISTENER_PREFIX.fullmatch(n)) is not None and m.group(1) not in _CLUSTER_LEVEL_LISTENER)}
            refuse(per_broker, "Cannot update these configs at default cluster level, broker id must be specified")

    def _build(self, node: dict[str, str], default: dict[str, str]) -> BrokerConfig:
        """The static settings with `default` then `node` over them; a bad value is INVALID_REQUEST."""
        values: dict[str, Any] = {}
        for layer in (default, node):
            for name, raw in layer.items():
                _check_type(name, raw)
                f = _field(name)
                if f is not None:
                    values[f.name] = _coerced(f, name, raw)
        _check_connection_limits({**default, **node})
        if not values:
            return self.static
        effective = dataclasses.replace(self.static, **values)
        if effective.log_cleaner_backoff_ms < 0:
            raise KafkaError(f"Invalid value {effective.log_cleaner_backoff_ms} for configuration "
                             f"log.cleaner.backoff.ms: Value must be at least 0", ErrorCode.INVALID_REQUEST)
        try:
            topic_defaults.log_config(effective)
        except KafkaError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_REQUEST) from None
        return effective


# The INT ones among the applied settings' Java types (the other whole numbers are LONG).
_INTS = frozenset({"max.connections", "max.connections.per.ip", "message.max.bytes", "log.segment.bytes", "log.index.interval.bytes", "log.index.size.max.bytes",
                   "log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.roll.jitter.hours",
                   "min.insync.replicas", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"})


def _coerced(f: dataclasses.Field, name: str, raw: str) -> Any:
    try:
        return coerce(f, raw, name)
    except ConfigError:
        kind = str(f.type).removesuffix(" | None")
        what = ("Expected value to be either true or false" if kind == "bool" else
                "Not a number of type DOUBLE" if kind == "float" else
                f"Not a number of type {'INT' if name in _INTS else 'LONG'}")
        raise KafkaError(f"Invalid value {raw} for configuration {name}: {what}", ErrorCode.INVALID_REQUEST) from None


def _check_type(name: str, raw: str) -> None:
    """A kept-only setting's value parsed as Kafka's ConfigDef parses its type, and held to its lower
    bound, named as Kafka names it (a listener-prefixed one by its own name); the cleanup policy's
    items checked under the broker's name (Kafka's ValidList names the item it refuses)."""
    if name == "log.cleanup.policy":
        try:
            parse_cleanup_policy(raw)
        except ListValueError as exc:
            raise KafkaError(exc.message(name), ErrorCode.INVALID_REQUEST) from None
        return
    if name == "max.connections.per.ip.overrides":
        connection_overrides(raw)
        return
    base = base_name(name)
    kind = _KEPT_TYPES.get(base)
    if kind is None:
        return
    text = raw.strip()
    ok = (text.lower() in ("true", "false")) if kind == "bool" else _number(text, kind)
    if not ok:
        what = {"int": "Not a number of type INT", "float": "Not a number of type DOUBLE",
                "bool": "Expected value to be either true or false"}[kind]
        raise KafkaError(f"Invalid value {raw} for configuration {base}: {what}", ErrorCode.INVALID_REQUEST)
    low = _AT_LEAST.get(base)
    if low is not None and float(text) < low:
        raise KafkaError(f"Invalid value {raw} for configuration {base}: Value must be at least {low}",
                         ErrorCode.INVALID_REQUEST)


def connection_overrides(raw: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:limit,...` (Kafka's parseCsvMap; a limit that is not
    a Java int is refused in Java's words)."""
    out: dict[str, int] = {}
    for entry in raw.split(","):
        if not entry.strip():
            continue
        host, sep, limit = entry.strip().rpartition(":")
        if not sep or not host.strip():
            raise KafkaError(f"Invalid value {raw} for configuration max.connections.per.ip.overrides: each entry "
                             f"must be host:limit", ErrorCode.INVALID_REQUEST)
        if not _number(limit.strip(), "int") or "." in limit:
            raise KafkaError(f'For input string: "{limit.strip()}"', ErrorCode.INVALID_REQUEST)
        out[host.strip()] = int(limit)
    return out


@functools.lru_cache(maxsize=8)
def _address_overrides(raw: str) -> dict[str, int]:
    """The overrides by address as a peer's is written (an IP literal, normalised); a host name is
    kept and reported but matches no peer: kbroker does not resolve names (Kafka does, once)."""
    out = {}
    for host, limit in connection_overrides(raw).items():
        try:
            out[str(ipaddress.ip_address(host.strip("[]")))] = limit
        except ValueError:
            continue
    return out


def _check_connection_limits(values: dict[str, str]) -> None:
    """Kafka's checks across the connection settings (KafkaConfig's requirements and
    DynamicConnectionQuota.validateReconfiguration) on the layers as they would be."""
    if values.get("max.connections", "").strip() == "0":
        raise KafkaError("Invalid value org.apache.kafka.common.config.ConfigException: Invalid max.connections 0 "
                         "for configuration Invalid dynamic configuration", ErrorCode.INVALID_REQUEST)
    if values.get("max.connections.per.ip", "").strip() == "0" and not values.get("max.connections.per.ip.overrides"):
        raise KafkaError("requirement failed: max.connections.per.ip can be set to zero only if "
                         "max.connections.per.ip.overrides property is set.", ErrorCode.INVALID_REQUEST)


def _number(text: str, kind: str) -> bool:
    try:
        int(text) if kind == "int" else float(text)
    except ValueError:
        return False
    return True
