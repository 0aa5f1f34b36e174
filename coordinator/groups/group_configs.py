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

BOOLEAN, STRING, INT, LIST = 1, 2, 3, 7  # DescribeConfigs' ConfigType


class GroupConfigError(ValueError):
    """A value Kafka refuses with INVALID_CONFIG; the text is Kafka's message."""


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    kind: int
    synonym: str  # the broker config that gives the default
    check: Callable[[str, str], None] | None = None


def _int(name: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
    if not -(1 << 31) <= number < (1 << 31):
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT")
    return number


def _at_least(low: int) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        if _int(name, value) < low:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
    return check


def _in_range(low: int, high: int) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        number = _int(name, value)
        if not low <= number <= high:
            raise GroupConfigError(f"{name} must be in the range {low} to {high} inclusive.")
    return check


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


# In the order Kafka 4.4 lists them.
GROUP_CONFIGS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("consumer.session.timeout.ms", INT, "group.consumer.session.timeout.ms", _in_range(45000, 60000)),
    GroupConfigDef("streams.assignor.name", STRING, "group.streams.assignors"),
    GroupConfigDef("consumer.assignment.interval.ms", INT, "group.consumer.assignment.interval.ms", _at_least(0)),
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", BOOLEAN, "errors.deadletterqueue.copy.record.enable",
                   _one_of("true", "false")),
    GroupConfigDef("share.auto.offset.reset", STRING, "share.auto.offset.reset", _share_auto_offset_reset),
    GroupConfigDef("streams.rack.aware.assignment.tags", LIST, "group.streams.rack.aware.assignment.tags"),
    GroupConfigDef("share.renew.acknowledge.enable", BOOLEAN, "share.renew.acknowledge.enable",
                   _one_of("true", "false")),
    GroupConfigDef("streams.initial.rebalance.delay.ms", INT, "group.streams.initial.rebalance.delay.ms",
                   _at_least(0)),
    GroupConfigDef("share.session.timeout.ms", INT, "group.share.session.timeout.ms", _in_range(45000, 60000)),
    GroupConfigDef("streams.assignment.interval.ms", INT, "group.streams.assignment.interval.ms", _at_least(0)),
    GroupConfigDef("share.heartbeat.interval.ms", INT, "group.share.heartbeat.interval.ms", _in_range(5000, 15000)),
    GroupConfigDef("streams.heartbeat.interval.ms", INT, "group.streams.heartbeat.interval.ms",
                   _in_range(5000, 15000)),
    GroupConfigDef("share.delivery.count.limit", INT, "group.share.delivery.count.limit", _at_least(2)),
    GroupConfigDef("errors.deadletterqueue.topic.name", STRING, "errors.deadletterqueue.topic.name"),
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
