"""`--create-topics orders:3,payments:6:compact`: topics a compose file or CI job wants at start-up.

Idempotent across restarts: a topic that exists is left as it is, and if its partition count or
cleanup policy differ from the request that is logged (`startup_topic_differs`), never altered,
because changing a live topic behind its users' backs is worse than a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from ..storage.log.manager import InvalidTopicError, is_internal_topic, validate_topic_name

log = structlog.get_logger("kbroker.broker")
POLICIES = ("delete", "compact")


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    cleanup_policy: str  # "delete" (Kafka's default) or "compact"


def parse_create_topics(text: str, option: str) -> list[TopicSpec]:
    """NAME:PARTITIONS[:compact|delete], comma-separated; errors name `option` and the item."""
    out: list[TopicSpec] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"{option}: {item!r} is not NAME:PARTITIONS[:compact|delete]")
        name, count = parts[0].strip(), parts[1].strip()
        try:
            validate_topic_name(name)
        except InvalidTopicError as e:
            raise ValueError(f"{option}: {item!r}: {e}") from None
        if is_internal_topic(name):
            raise ValueError(f"{option}: {name} is an internal topic the broker creates itself")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"{option}: {item!r}: partitions must be a positive integer, not {count!r}")
        policy = parts[2].strip().lower() if len(parts) == 3 else "delete"
        if policy not in POLICIES:
            raise ValueError(f"{option}: {item!r}: cleanup policy must be compact or delete, not {policy!r}")
        if any(s.name == name for s in out):
            raise ValueError(f"{option}: topic {name} is listed twice")
        out.append(TopicSpec(name, int(count), policy))
    return out


def ensure_topics(logs, specs: list[TopicSpec]) -> None:
    existing = logs.topics()
    for spec in specs:
        info = existing.get(spec.name)
        if info is None:
            configs = {"cleanup.policy": spec.cleanup_policy} if spec.cleanup_policy != "delete" else {}
            logs.create_topic(spec.name, spec.partitions, configs)
            continue
        policy = info.config.cleanup_policy
        if info.num_partitions != spec.partitions or policy != spec.cleanup_policy:
            log.warning("startup_topic_differs", topic=spec.name, partitions=info.num_partitions,
                        cleanup_policy=policy, requested_partitions=spec.partitions,
                        requested_cleanup_policy=spec.cleanup_policy)
        else:
            log.info("startup_topic_exists", topic=spec.name, partitions=info.num_partitions, cleanup_policy=policy)
