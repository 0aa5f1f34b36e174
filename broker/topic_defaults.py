"""Broker-wide topic defaults: Kafka's broker settings that give every topic the value of a topic
config it has not set itself (`log.retention.hours` for `retention.ms`, `log.segment.bytes` for
`segment.bytes`, `message.max.bytes` for `max.message.bytes`, ...), as Kafka applies and reports them.

Each topic config has a chain of broker settings in Kafka's synonym order (`log.retention.ms`, then
`log.retention.minutes`, then `log.retention.hours`): the first one set gives the value, converted
to the topic's unit; none set, Kafka's default does. A topic's own config (DYNAMIC_TOPIC_CONFIG)
wins over all of them, and a change of the broker's setting reaches every topic that has none
at its next start, as in Kafka. DescribeConfigs reports the synonyms as Kafka 4.4 does
(`synonyms`), quirks included: a chain is listed from its first name on, so a topic's
`retention.ms` set by `log.retention.hours` alone is DEFAULT_CONFIG with no synonyms there.

The values are BrokerConfig fields named after the settings (`log_retention_hours`), None when
unset; the topic-level defaults and checks are LogConfig's (broker/storage/log/config.py).
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .storage.log.config import default_of

if TYPE_CHECKING:
    from .config import BrokerConfig
    from .storage.log.config import LogConfig

STATIC, DEFAULT = "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"

# topic config -> its broker settings, in Kafka's synonym order, with Kafka's default (None: none).
# OWN is the topic config's own default, HOURS the same in hours: storage/log/config.py owns them.
OWN, HOURS = "<the topic config's default>", "<the topic config's default in hours>"
_SYNONYMS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", OWN),),
    "compression.gzip.level": (("compression.gzip.level", OWN),),
    "compression.lz4.level": (("compression.lz4.level", OWN),),
    "compression.type": (("compression.type", OWN),),
    "compression.zstd.level": (("compression.zstd.level", OWN),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", OWN),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", OWN),),
    "flush.messages": (("log.flush.interval.messages", OWN),),
    "flush.ms": (("log.flush.interval.ms", None), ("log.flush.scheduler.interval.ms", OWN)),
    "index.interval.bytes": (("log.index.interval.bytes", OWN),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", OWN),),
    "max.message.bytes": (("message.max.bytes", OWN),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", OWN),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", OWN),),
    "message.timestamp.type": (("log.message.timestamp.type", OWN),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", OWN),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", OWN),),
    "min.insync.replicas": (("min.insync.replicas", OWN),),
    "preallocate": (("log.preallocate", OWN),),
    "retention.bytes": (("log.retention.bytes", OWN),),
    "retention.ms": (("log.retention.ms", None), ("log.retention.minutes", None), ("log.retention.hours", HOURS)),
    "segment.bytes": (("log.segment.bytes", OWN),),
    "segment.index.bytes": (("log.index.size.max.bytes", OWN),),
    "segment.jitter.ms": (("log.roll.jitter.ms", None), ("log.roll.jitter.hours", HOURS)),
    "segment.ms": (("log.roll.ms", None), ("log.roll.hours", HOURS)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", OWN),),
}


def _resolved(topic: str, value: str | None) -> str | None:
    if value == OWN:
        return default_of(topic)
    if value == HOURS:
        return str(int(default_of(topic)) // 3_600_000)
    return value


# Topic configs with no broker setting behind them (not in Kafka's ServerTopicConfigSynonyms): described
# with their own default and no synonym.
TOPIC_ONLY = frozenset({"errors.deadletterqueue.group.enable"})

BROKER_SYNONYMS = {topic: tuple((name, _resolved(topic, value)) for name, value in chain)
                   for topic, chain in _SYNONYMS.items()}
_CHAINS = {name: chain for chain in BROKER_SYNONYMS.values() for name, _ in chain}  # broker name -> its chain
_UNITS = {"hours": 3_600_000, "minutes": 60_000}


def broker_names() -> list[str]:
    """Every broker setting that is a topic default, in table order."""
    return [name for chain in BROKER_SYNONYMS.values() for name, _ in chain]


def first_names() -> list[str]:
    """The first broker setting of each topic config's chain: the ones Kafka changes at run time."""
    return [chain[0][0] for chain in BROKER_SYNONYMS.values()]


def chain_of(broker_name: str) -> list[str] | None:
    """The names of the synonym chain a broker setting is in, None when it is no topic default."""
    chain = _CHAINS.get(broker_name)
    return [name for name, _ in chain] if chain else None


def field_of(broker_name: str) -> str:
    return broker_name.replace(".", "_")


def kafka_default(broker_name: str) -> str | None:
    return dict(_CHAINS[broker_name])[broker_name]


def configured(config: BrokerConfig, broker_name: str) -> str | None:
    """The broker setting's value as set (rendered as Kafka renders it), None when unset."""
    return _render(getattr(config, field_of(broker_name)))


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _in_topic_unit(broker_name: str, value: str) -> str:
    """Hours and minutes in milliseconds; a negative time is -1 (no limit), as Kafka reads it."""
    unit = _UNITS.get(broker_name.rsplit(".", 1)[-1])
    if unit is None:
        return value
    millis = int(value) * unit
    return str(-1 if millis < 0 else millis)


def set_values(config: BrokerConfig) -> dict[str, tuple[str, str]]:
    """topic config -> (value in the topic's unit, the broker setting it came from), for each
    topic config a broker setting gives a value."""
    out = {}
    for topic, chain in BROKER_SYNONYMS.items():
        for name, _ in chain:
            value = configured(config, name)
            if value is not None:
                out[topic] = (_in_topic_unit(name, value), name)
                break
    return out


def log_config(config: BrokerConfig) -> LogConfig:
    """The LogConfig every topic starts from: Kafka's defaults with the broker's settings over them
    (none of them a topic override). InvalidConfigError names the topic config a bad value reached."""
    from .storage.log.config import LogConfig

    base = LogConfig.from_topic_configs({topic: value for topic, (value, _) in set_values(config).items()})
    return replace(base, overrides=())


def topic_values(config: BrokerConfig) -> dict[str, str]:
    """The value each topic config has on a topic that has not set it, where a broker setting gives
    it (LogConfig's canonical spelling: `delete,compact` is `compact,delete`)."""
    from .storage.log.config import LogConfig

    values = {topic: value for topic, (value, _) in set_values(config).items()}
    return LogConfig.from_topic_configs(values).override_dict() if values else {}


# The dynamic entries of a chain's names (broker/dynamic_configs.py's DynamicBrokerConfigs.synonyms).
Dynamic = Callable[[list[str]], list[tuple[str, str, str]]]


def synonyms(config: BrokerConfig, broker_name: str, dynamic: Dynamic | None = None) -> list[tuple[str, str | None, str]]:
    """Kafka's synonyms of a broker setting, (name, value, source): the settings of its chain from
    it on that a dynamic broker config sets (per broker, then cluster-wide), then those set at start
    (STATIC_BROKER_CONFIG), then those with a default (DEFAULT_CONFIG), the whole dropped up to the
    first entry named `broker_name` (ConfigHelper.configSynonyms in Kafka 4.4). `config`: the
    broker's settings as started, without the dynamic ones."""
    chain = _CHAINS[broker_name]
    names = [name for name, _ in chain]
    tail = chain[names.index(broker_name):]
    found: list[tuple[str, str | None, str]] = []
    if dynamic is not None:
        found += dynamic([name for name, _ in tail])
    found += [(name, configured(config, name), STATIC) for name, _ in tail if configured(config, name) is not None]
    found += [(name, default, DEFAULT) for name, default in tail if default is not None]
    while found and found[0][0] != broker_name:
        found.pop(0)
    return found


def topic_synonyms(config: BrokerConfig, topic: str, dynamic: Dynamic | None = None) -> list[tuple[str, str | None, str]]:
    """The broker synonyms of a topic config (its chain from the first name on)."""
    chain = BROKER_SYNONYMS.get(topic)
    return synonyms(config, chain[0][0], dynamic) if chain else []
