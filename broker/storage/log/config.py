"""Per-topic log configuration with Kafka's names and defaults, plus the broker's flush policy.

`_SPECS` is the one table of topic-config defaults: LogConfig's fields, DescribeConfigs' values and
its broker synonyms (broker/apis/describe_configs.py, through `default_of`) all come from it."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Iterable

from ....protocol.errors import ErrorCode, KafkaError

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MIN_SEGMENT_BYTES = 1024 * 1024


class InvalidConfigError(KafkaError):
    code = ErrorCode.INVALID_CONFIG


# The reasons in Kafka's ConfigDef words: a refused value is answered "Invalid value V for configuration
# N: <reason>" (ConfigException), as Kafka answers CreateTopics and AlterConfigs.
def _parse_int(lo: int, hi: int, kind: str = "LONG") -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
        if value < lo:
            raise ValueError(f"Value must be at least {lo}")
        if value > hi:
            raise ValueError(f"Value must be no more than {hi}")
        return value

    return parse


def _parse_choice(choices: tuple[str, ...], normalise: Callable[[str], str] = str.strip) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = normalise(raw)
        if value not in choices:
            raise ValueError(f"String must be one of: {', '.join(choices)}")
        return value

    return parse


class ListValueError(ValueError):
    """A LIST config refused by Kafka 4.4's ValidList, whose message is its own (it names an item or a
    rule, not the whole value): str(self) has a `{name}` for the config's name."""

    def message(self, name: str) -> str:
        return str(self).format(name=name)


def parse_cleanup_policy(raw: str) -> str:
    """Kafka 4.4's LIST parse and ValidList check: an empty value is the empty list (neither delete nor
    compact: records stay until deleted), an empty or repeated item is refused, and each must be one of
    compact, delete. Kafka takes them in any order and describes them as given (an IncrementalAlterConfigs
    APPEND of compact to delete reads back "delete,compact")."""
    text = raw.strip()
    parts = [p.strip() for p in text.split(",")] if text else []
    if len(set(parts)) != len(parts):
        raise ListValueError("Configuration '{name}' values must not be duplicated.")
    if "" in parts:
        raise ListValueError("Configuration '{name}' values must not be empty.")
    for part in parts:
        if part not in ("compact", "delete"):
            raise ListValueError(f"Invalid value {part} for configuration {{name}}: String must be one of: compact, delete")
    return ",".join(parts)


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    return lowered == "true"


def _parse_ratio(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("Not a number of type DOUBLE") from None
    if value < 0:
        raise ValueError("Value must be at least 0")
    if value > 1:
        raise ValueError("Value must be no more than 1")
    return value


def _parse_gzip_level(raw: str) -> int:
    # Kafka: 1 (fastest) to 9 (best), or -1 for the codec's default
    value = _parse_int(-1, 9, "INT")(raw)
    if value == 0:
        raise ValueError("Value must be -1 or between 1 and 9")
    return value


# Kafka 3.9's MetadataVersion strings: each release, with how many inter-broker versions (IVn) it had.
# message.format.version took any of them (Kafka 3.x validated it, then ignored it).
_IBP_VERSIONS = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1,
    "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2,
    "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1,
}
# Kafka 3.x topic configs that Kafka 4.0 removed: a 4.x broker refuses them as unknown (Kafka 4.4 answers
# "Unknown topic config name: message.format.version"), a 3.x broker accepts and ignores them.
KAFKA_3_ONLY = frozenset({"message.format.version", "message.downconversion.enable",
                          "message.timestamp.difference.max.ms"})


def check_known_in(kafka_version: tuple[int, int], names: Iterable[str]) -> None:
    """A Kafka 4.x broker does not know KAFKA_3_ONLY's configs: INVALID_CONFIG, as Kafka 4.4 answers."""
    if kafka_version >= (4, 0):
        for name in names:
            if name in KAFKA_3_ONLY:
                raise InvalidConfigError(f"Unknown topic config name: {name}")


def known_in(kafka_version: tuple[int, int], entries: Iterable[ConfigEntry]) -> list[ConfigEntry]:
    """The rows a broker of that Kafka release describes: a 4.x one has none of KAFKA_3_ONLY."""
    return [e for e in entries if kafka_version < (4, 0) or e.name not in KAFKA_3_ONLY]


def _parse_message_format_version(raw: str) -> str:
    """MetadataVersion.fromVersionString: the first three parts of a 0.x version, the first two of any
    other, name a release (`0.10.0.0` and `2.8.1` are 0.10.0 and 2.8) or one of its IVs (`3.0-IV1`)."""
    parts = raw.split(".")
    keep = 3 if raw.startswith("0.") else 2
    key = raw if keep >= len(parts) else ".".join(parts[:keep])
    release, _, iv = key.partition("-IV")
    if release in _IBP_VERSIONS and (key == release or (iv.isdigit() and int(iv) < _IBP_VERSIONS[release]
                                                        and iv == str(int(iv)))):
        return raw
    raise ValueError(f"Version {raw} is not a valid version")


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str  # Kafka's topic-level config name
    attr: str | None  # LogConfig field it sets, or None for accepted-but-not-enforced configs
    default: Any
    parse: Callable[[str], Any]


# Configs kbroker enforces, then Kafka topic configs that clients commonly set (Streams, kafka-topics,
# admin tools) and that a single-node broker accepts and reports without acting on.
_SPECS: tuple[_Spec, ...] = (
    # Kafka 4 (KIP-1030) refuses segments under 1 MiB: tiny segments mean a file triple per few records.
    _Spec("segment.bytes", "segment_bytes", 1073741824, _parse_int(MIN_SEGMENT_BYTES, _INT32_MAX, "INT")),
    _Spec("segment.ms", "segment_ms", 604800000, _parse_int(1, INT64_MAX)),
    _Spec("retention.ms", "retention_ms", 604800000, _parse_int(-1, INT64_MAX)),
    _Spec("retention.bytes", "retention_bytes", -1, _parse_int(-1, INT64_MAX)),
    _Spec("index.interval.bytes", "index_interval_bytes", 4096, _parse_int(0, _INT32_MAX, "INT")),
    _Spec("max.message.bytes", "max_message_bytes", 1048588, _parse_int(0, _INT32_MAX, "INT")),
    _Spec("cleanup.policy", "cleanup_policy", "delete", parse_cleanup_policy),
    _Spec("delete.retention.ms", "delete_retention_ms", 86400000, _parse_int(0, INT64_MAX)),
    _Spec("message.timestamp.type", "message_timestamp_type", "CreateTime", _parse_choice(TIMESTAMP_TYPES)),
    _Spec("min.compaction.lag.ms", "min_compaction_lag_ms", 0, _parse_int(0, INT64_MAX)),
    _Spec(
        "compression.type",
        None,
        "producer",
        _parse_choice(("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"), lambda s: s.strip().lower()),
    ),
    # KIP-390's levels go with compression.type, which is accepted and reported but not applied either
    _Spec("compression.gzip.level", None, -1, _parse_gzip_level),
    _Spec("compression.lz4.level", None, 9, _parse_int(1, 17, "INT")),
    _Spec("compression.zstd.level", None, 3, _parse_int(-131072, 22, "INT")),
    _Spec("min.insync.replicas", "min_insync_replicas", 1, _parse_int(1, _INT32_MAX, "INT")),
    _Spec("unclean.leader.election.enable", None, False, _parse_bool),
    _Spec("max.compaction.lag.ms", "max_compaction_lag_ms", INT64_MAX, _parse_int(1, INT64_MAX)),
    _Spec("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", 0.5, _parse_ratio),
    _Spec("segment.jitter.ms", None, 0, _parse_int(0, INT64_MAX)),
    _Spec("segment.index.bytes", None, 10485760, _parse_int(4, _INT32_MAX, "INT")),
    _Spec("file.delete.delay.ms", None, 60000, _parse_int(0, INT64_MAX)),
    _Spec("flush.messages", None, INT64_MAX, _parse_int(1, INT64_MAX)),
    _Spec("flush.ms", None, INT64_MAX, _parse_int(0, INT64_MAX)),
    _Spec("preallocate", None, False, _parse_bool),
    _Spec("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", INT64_MAX, _parse_int(0, INT64_MAX)),
    _Spec("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", 3600000, _parse_int(0, INT64_MAX)),
    # Deprecated in Kafka 3.x and removed in 4.0; 3.x accepts and ignores them, and so do we.
    _Spec("message.format.version", None, "3.0-IV1", _parse_message_format_version),
    _Spec("message.downconversion.enable", None, True, _parse_bool),
    _Spec("message.timestamp.difference.max.ms", None, INT64_MAX, _parse_int(0, INT64_MAX)),
)
_SPECS_BY_NAME = {spec.name: spec for spec in _SPECS}
# Kafka 4's internal.segment.bytes: smaller segments for tests and tools that call the log manager
# directly; never accepted from a client request, never described.
_INTERNAL_SPECS = {"internal.segment.bytes": _Spec("internal.segment.bytes", "segment_bytes", None, _parse_int(14, _INT32_MAX))}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of DescribeConfigs: source is "DEFAULT_CONFIG" or "DYNAMIC_TOPIC_CONFIG" (Kafka's names)."""

    name: str
    value: str
    is_default: bool
    source: str


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_DEFAULTS: dict[str, Any] = {spec.attr: spec.default for spec in _SPECS if spec.attr is not None}
# __consumer_offsets and __transaction_state, as Kafka makes them (offsets.topic.segment.bytes and
# transaction.state.log.segment.bytes are 100 MiB)
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}


def default_of(name: str) -> str:
    """A topic config's default, rendered as DescribeConfigs reports it."""
    return _render(_SPECS_BY_NAME[name].default)


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = _DEFAULTS["segment_bytes"]
    segment_ms: int = _DEFAULTS["segment_ms"]
    retention_ms: int = _DEFAULTS["retention_ms"]
    retention_bytes: int = _DEFAULTS["retention_bytes"]
    index_interval_bytes: int = _DEFAULTS["index_interval_bytes"]
    max_message_bytes: int = _DEFAULTS["max_message_bytes"]
    cleanup_policy: str = _DEFAULTS["cleanup_policy"]
    delete_retention_ms: int = _DEFAULTS["delete_retention_ms"]
    message_timestamp_type: str = _DEFAULTS["message_timestamp_type"]
    min_compaction_lag_ms: int = _DEFAULTS["min_compaction_lag_ms"]
    # the log cleaner's choice (cleaner.py): how dirty a log must be, how long a record may stay uncleaned
    max_compaction_lag_ms: int = _DEFAULTS["max_compaction_lag_ms"]
    min_cleanable_dirty_ratio: float = _DEFAULTS["min_cleanable_dirty_ratio"]
    # CreateTime bounds (Kafka 4 defaults, KIP-1030: an hour ahead of the broker's clock, any age)
    message_timestamp_before_max_ms: int = _DEFAULTS["message_timestamp_before_max_ms"]
    message_timestamp_after_max_ms: int = _DEFAULTS["message_timestamp_after_max_ms"]
    # acks=all needs this many in-sync replicas (enforced with several nodes; one node has one)
    min_insync_replicas: int = _DEFAULTS["min_insync_replicas"]
    # the raw topic-level overrides this config was built from (validated, canonical spelling)
    overrides: tuple[tuple[str, str], ...] = ()

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The age at which the active segment rolls: a compacted log's records must become cleanable
        within max.compaction.lag.ms (Kafka's LogConfig.maxSegmentMs)."""
        return min(self.max_compaction_lag_ms, self.segment_ms) if self.compact else self.segment_ms

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_configs(
        cls, configs: dict[str, str], base: LogConfig | None = None, *, allow_internal: bool = False
    ) -> LogConfig:
        """Apply Kafka topic-level overrides on top of `base` (the broker defaults); INVALID_CONFIG if wrong."""
        base = base if base is not None else cls()
        changes: dict[str, Any] = {}
        canonical: dict[str, str] = {}
        for name, raw in configs.items():
            spec = _SPECS_BY_NAME.get(name) or (_INTERNAL_SPECS.get(name) if allow_internal else None)
            if allow_internal and name == "segment.bytes":
                # stored by a broker from before the 1 MiB floor: it must still load what it wrote
                spec = _Spec(name, "segment_bytes", None, _INTERNAL_SPECS["internal.segment.bytes"].parse)
            if spec is None:
                raise InvalidConfigError(f"Unknown topic config name: {name}")
            if raw is None:
                raise InvalidConfigError(f"topic config {name!r} needs a value")
            try:
                value = spec.parse(str(raw))
            except ListValueError as exc:
                raise InvalidConfigError(exc.message(name)) from exc
            except ValueError as exc:
                raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: {exc}") from exc
            if spec.attr is not None:
                changes[spec.attr] = value
            canonical[name] = _render(value)
        merged = dict(base.overrides)
        merged.update(canonical)
        return replace(base, overrides=tuple(sorted(merged.items())), **changes)

    def override_dict(self) -> dict[str, str]:
        return dict(self.overrides)

    def describe(self) -> list[ConfigEntry]:
        overrides = dict(self.overrides)
        entries = []
        for spec in _SPECS:
            if spec.name in overrides:
                entries.append(ConfigEntry(spec.name, overrides[spec.name], False, "DYNAMIC_TOPIC_CONFIG"))
            else:
                value = getattr(self, spec.attr) if spec.attr is not None else spec.default
                entries.append(ConfigEntry(spec.name, _render(value), True, "DEFAULT_CONFIG"))
        return entries


def known_config_names() -> list[str]:
    return [spec.name for spec in _SPECS]


def log_config_fields() -> list[str]:
    return [f.name for f in fields(LogConfig) if f.name != "overrides"]


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """When appended bytes are fsynced: "always" (group commit), "interval:MS", or "never" (the OS decides)."""

    kind: str = "always"
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str | FlushPolicy) -> FlushPolicy:
        if isinstance(text, FlushPolicy):
            return text
        if text in ("always", "never"):
            return cls(text)
        if text.startswith("interval:"):
            try:
                interval = int(text.split(":", 1)[1])
            except ValueError:
                interval = -1
            if interval > 0:
                return cls("interval", interval)
        raise ValueError(f"flush policy must be always, never or interval:MS (MS > 0), not {text!r}")
