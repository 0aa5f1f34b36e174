"""Dynamic group configs (KIP-848, KIP-932: Kafka's GroupConfig): the GROUP resource of DescribeConfigs
and IncrementalAlterConfigs. A group's override of a config wins over the broker's `group.*` default
(its synonym); every name, type, default synonym, check and message is Kafka 4.4's, as its reference
broker answers them. Pure: the broker keeps the overrides (broker/group_configs.py) and gives the
defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7  # DescribeConfigs' ConfigType


class GroupConfigError(ValueError):
    """A value Kafka refuses with INVALID_CONFIG; the text is Kafka's message."""


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    kind: int
    synonym: str  # the broker config that gives the default
    check: Callable[[str, str], None] | None = None
    # Kafka's defineInternal: accepted and described once a group sets it, never listed otherwise.
    internal: bool = False


def _number(name: str, value: str, kind: str = "INT", bits: int = 32) -> int:
    """ConfigDef's parse of an INT (or LONG) value; Kafka's message when it is not one."""
    try:
        number = int(value.strip())
    except ValueError:
        number = 1 << bits
    if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: Not a number of type {kind}")
    return number


def _int(name: str, value: str) -> int:
    return _number(name, value)


def _long(name: str, value: str) -> int:
    return _number(name, value, "LONG", 64)


def _at_least(low: int, parse: Callable[[str, str], int] = _int) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        if parse(name, value) < low:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
    return check


def _at_least_then(low: int, floor: int | None = None, ceiling: int | None = None) -> Callable[[str, str], None]:
    """ConfigDef's atLeast(low), then GroupConfig's validateIntMin / validateIntMax against the broker's
    bound (group.streams.min.task.offset.interval.ms, group.streams.max.warmup.replicas)."""
    def check(name: str, value: str) -> None:
        _at_least(low)(name, value)
        number = _int(name, value)
        if floor is not None and number < floor:
            raise GroupConfigError(f"{name} must be greater than or equal to {floor}")
        if ceiling is not None and number > ceiling:
            raise GroupConfigError(f"{name} must be less than or equal to {ceiling}")
    return check


def _in_range(low: int, high: int) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        number = _int(name, value)
        if not low <= number <= high:
            raise GroupConfigError(f"{name} must be in the range {low} to {high} inclusive.")
    return check


def _both(*checks: Callable[[str, str], None]) -> Callable[[str, str], None]:
    """ConfigDef's validator, then GroupConfig.validate's bound (group.streams.max.assignment.interval.ms)."""
    def check(name: str, value: str) -> None:
        for one in checks:
            one(name, value)
    return check


def _boolean(name: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: "
                               "Expected value to be either true or false")


# The streams task assignors a broker registers (group.streams.assignors): Kafka 4.4 ships one.
STREAMS_ASSIGNORS = ("sticky",)


def _streams_assignor(name: str, value: str) -> None:
    if value not in STREAMS_ASSIGNORS:
        raise GroupConfigError(f"{name} '{value}' is not a registered task assignor. Registered assignors are: "
                               f"[{', '.join(STREAMS_ASSIGNORS)}].")


def _one_of(*allowed: str) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        if value not in allowed:
            raise GroupConfigError(
                f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(allowed)}")
    return check


# ISO-8601 durations as Java's Duration.parse takes them: PnDTnHnMn.nS (a sign allowed).
_DURATION = re.compile(r"[-+]?P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
                       re.IGNORECASE)


def parse_duration_ms(text: str) -> int | None:
    """Java's Duration.parse in milliseconds; None when it does not parse."""
    m = _DURATION.fullmatch(text)
    if m is None or not any(m.group(i) for i in (1, 2, 3, 4)) or text.upper().endswith("T"):
        return None
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (1, 2, 3, 4))
    fraction = int((m.group(5) or "0").ljust(3, "0")[:3])
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + (fraction if seconds >= 0 else -fraction)
    return -ms if text.startswith("-") else ms


def _share_auto_offset_reset(name: str, value: str) -> None:
    if value in ("earliest", "latest"):
        return
    if value.startswith("by_duration:"):
        ms = parse_duration_ms(value[len("by_duration:"):])
        if ms is not None and ms >= 0:
            return
    raise GroupConfigError(
        f"Invalid value {value} for configuration {name}: Invalid value `{value}` for configuration {name}. "
        "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _dlq_topic_name(name: str, value: str) -> None:
    """GroupConfig.validate (KIP-1191): a DLQ topic is never an internal one. The broker's
    errors.deadletterqueue.topic.name.prefix is checked when a record is written, not here, as in Kafka."""
    if value.startswith("__"):
        raise GroupConfigError(f"{name}: DLQ topic name must not start with '__'")


# In the order Kafka 4.4 lists them.
GROUP_CONFIGS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("consumer.session.timeout.ms", INT, "group.consumer.session.timeout.ms", _in_range(45000, 60000)),
    GroupConfigDef("streams.assignor.name", STRING, "group.streams.assignors", _streams_assignor),
    GroupConfigDef("consumer.assignment.interval.ms", INT, "group.consumer.assignment.interval.ms", _at_least(0)),
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", BOOLEAN, "errors.deadletterqueue.copy.record.enable",
                   _boolean),
    GroupConfigDef("share.auto.offset.reset", STRING, "share.auto.offset.reset", _share_auto_offset_reset),
    GroupConfigDef("streams.rack.aware.assignment.tags", LIST, "group.streams.rack.aware.assignment.tags"),
    GroupConfigDef("share.renew.acknowledge.enable", BOOLEAN, "share.renew.acknowledge.enable",
                   _one_of("true", "false")),
    GroupConfigDef("streams.initial.rebalance.delay.ms", INT, "group.streams.initial.rebalance.delay.ms",
                   _at_least(0)),
    GroupConfigDef("share.session.timeout.ms", INT, "group.share.session.timeout.ms", _in_range(45000, 60000)),
    GroupConfigDef("streams.assignment.interval.ms", INT, "group.streams.assignment.interval.ms",
                   _both(_at_least(0), _in_range(0, 15000))),
    GroupConfigDef("share.heartbeat.interval.ms", INT, "group.share.heartbeat.interval.ms", _in_range(5000, 15000)),
    GroupConfigDef("streams.heartbeat.interval.ms", INT, "group.streams.heartbeat.interval.ms",
                   _in_range(5000, 15000)),
    GroupConfigDef("share.delivery.count.limit", INT, "group.share.delivery.count.limit", _at_least(2)),
    GroupConfigDef("errors.deadletterqueue.topic.name", STRING, "errors.deadletterqueue.topic.name", _dlq_topic_name),
    GroupConfigDef("consumer.heartbeat.interval.ms", INT, "group.consumer.heartbeat.interval.ms",
                   _in_range(5000, 15000)),
    GroupConfigDef("share.record.lock.duration.ms", INT, "group.share.record.lock.duration.ms", _at_least(1000)),
    GroupConfigDef("share.assignment.interval.ms", INT, "group.share.assignment.interval.ms", _at_least(0)),
    GroupConfigDef("share.isolation.level", STRING, "share.isolation.level",
                   _one_of("read_committed", "read_uncommitted")),
    GroupConfigDef("streams.session.timeout.ms", INT, "group.streams.session.timeout.ms", _in_range(45000, 60000)),
    GroupConfigDef("share.partition.max.record.locks", INT, "group.share.partition.max.record.locks",
                   _at_least(100)),
    GroupConfigDef("streams.num.standby.replicas", INT, "group.streams.num.standby.replicas", _at_least(0)),
    # Kafka 4.4's internal ones (warm-up tasks, KIP-1071; in the order its describe answered them when set).
    GroupConfigDef("streams.num.warmup.replicas", INT, "group.streams.num.warmup.replicas",
                   _at_least_then(0, ceiling=20), internal=True),
    GroupConfigDef("streams.acceptable.recovery.lag", LONG, "group.streams.acceptable.recovery.lag",
                   _at_least(0, _long), internal=True),
    GroupConfigDef("streams.assignor.offload.enable", BOOLEAN, "group.streams.assignor.offload.enable", _boolean,
                   internal=True),
    GroupConfigDef("streams.task.offset.interval.ms", INT, "group.streams.task.offset.interval.ms",
                   _at_least_then(1, floor=15000), internal=True),
)
BY_NAME = {d.name: d for d in GROUP_CONFIGS}


def validate(name: str, value: str) -> None:
    """Raise GroupConfigError (Kafka's message) unless `value` is one Kafka takes for `name`."""
    definition = BY_NAME.get(name)
    if definition is None:
        raise GroupConfigError(f"Unknown group config name: {name}")
    if definition.check is not None:
        definition.check(name, value)


def validate_group_name(name: str) -> str | None:
    """The INVALID_REQUEST message for a GROUP resource name Kafka refuses, else None."""
    return "Group name must not be empty" if name == "" else None
