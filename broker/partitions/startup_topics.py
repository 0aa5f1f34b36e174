"""`--create-topics orders:3,payments:6:compact`: topics a compose file or CI job wants at start-up.

Idempotent across restarts: a topic that exists is left as it is, and if its partition count or
cleanup policy differ from the request that is logged (`startup_topic_differs`, with the command that
makes it so), never altered, because changing a live topic behind its users' backs is worse than a
warning. A topic listed without a policy gets the broker's (log.cleanup.policy, delete by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from .internal_topics import made_by_the_broker_only
from ...protocol.topic_names import InvalidTopicError, validate_topic_name

if TYPE_CHECKING:
    from .catalogue import TopicCatalogue

log = structlog.get_logger("kbroker.broker")
POLICIES = ("delete", "compact")


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    cleanup_policy: str | None  # "delete" or "compact"; None: the broker's log.cleanup.policy


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
        if made_by_the_broker_only(name):
            raise ValueError(f"{option}: {name} is an internal topic the broker creates itself")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"{option}: {item!r}: partitions must be a positive integer, not {count!r}")
        policy = parts[2].strip().lower() if len(parts) == 3 else None
        if policy is not None and policy not in POLICIES:
            raise ValueError(f"{option}: {item!r}: cleanup policy must be compact or delete, not {policy!r}")
        if any(s.name == name for s in out):
            raise ValueError(f"{option}: topic {name} is listed twice")
        out.append(TopicSpec(name, int(count), policy))
    return out


def ensure_topics(catalogue: TopicCatalogue, specs: list[TopicSpec]) -> None:
    existing = catalogue.topics()
    for spec in specs:
        info = existing.get(spec.name)
        if info is None:
            configs = {"cleanup.policy": spec.cleanup_policy} if spec.cleanup_policy else {}
            catalogue.create_topic(spec.name, spec.partitions, configs)
            continue
        policy = info.config.cleanup_policy
        policy_differs = spec.cleanup_policy is not None and policy != spec.cleanup_policy
        if info.num_partitions != spec.partitions or policy_differs:
            log.warning("startup_topic_differs", topic=spec.name, partitions=info.num_partitions,
                        cleanup_policy=policy, requested_partitions=spec.partitions,
                        requested_cleanup_policy=spec.cleanup_policy or policy,
                        what_to_do=_what_to_do(spec, info.num_partitions, policy_differs))
        else:
            log.info("startup_topic_exists", topic=spec.name, partitions=info.num_partitions, cleanup_policy=policy)


def _what_to_do(spec: TopicSpec, partitions: int, policy_differs: bool) -> str:
    """The command that makes the topic what --create-topics asks for (left to the user: keys move
    to other partitions when partitions are added)."""
    steps = []
    if spec.partitions > partitions:
        steps.append(f"kbroker topic alter {spec.name} -p {spec.partitions} (keys then map to other partitions)")
    if policy_differs:
        steps.append(f"kbroker topic alter {spec.name} -c cleanup.policy={spec.cleanup_policy}")
    if spec.partitions < partitions:
        steps.append(f"partitions cannot be removed: kbroker topic delete {spec.name} and restart to create it anew")
    return "; ".join(steps)
