"""The internal topics' policy: what their configs must keep, and every change the broker refuses.

`__consumer_offsets` and `__transaction_state` hold the coordinators' state as compacted logs: a
record goes only when a later one with its key supersedes it. Retention would delete the records of
every group and transactional id that has been quiet for retention.ms, and the replay after the next
restart would find them gone (issue 38: AlterConfigs then IncrementalAlterConfigs DELETE of
cleanup.policy left the topic on the broker default `delete`, and 20 groups' committed offsets read
-1 after a restart). Kafka's share coordinator deletes its own records (`__share_group_state` is
`delete` with no retention limit), so there it is the limits that must stay off.

What Apache Kafka 4.4 does (asked of it: tests/reference/test_internal_topics.py; its
ControllerConfigurationValidator and ReplicationControlManager have no internal-topic rule): it
accepts every config change on these topics, CreatePartitions and DeleteTopics of them, and
CreateTopics of one that does not exist yet, with any partition count and configs; it refuses only
DeleteRecords (INVALID_TOPIC_EXCEPTION, ReplicaManager.deleteRecords) and CreateTopics of
`__cluster_metadata` (INVALID_REQUEST). kbroker refuses, besides, whatever would let anyone but the
coordinator remove these records or re-shape the topic under it, whichever API asks:

- a config change (AlterConfigs, IncrementalAlterConfigs' SET, DELETE, APPEND, SUBTRACT) whose
  *result* drops or changes a required config, or lets retention delete records:
  POLICY_VIOLATION, Kafka's answer when its alter-config policy refuses (values that are invalid in
  themselves are INVALID_CONFIG first, as Kafka validates before its policy runs);
- CreatePartitions: POLICY_VIOLATION (a group's partition is its id's hash modulo the count);
- CreateTopics of one that does not exist: INVALID_REQUEST with Kafka's own words for
  `__cluster_metadata` (the broker creates these itself, with REQUIRED_CONFIGS); `__cluster_metadata`
  itself is refused as Kafka refuses it, and never auto-created;
- DeleteTopics and DeleteRecords: INVALID_TOPIC_EXCEPTION, Kafka's answer to DeleteRecords.

The checks sit in the topic catalogue (catalogue.py), the one place topics change: whatever asks it
(a handler, a test control, a start-up step) gets the same refusal, and the internal topics' own
coordinators make them through `create_internal_topic`, with configs that keep this policy. A
handler wraps its call in `reported`, so each refusal is an `internal_topic_change_refused` warning
naming the client and principal. A data directory where an internal topic lacks its required
configs (left so by a kbroker before this policy) has them put back at start-up, before retention
first runs, with an `internal_topic_config_repaired` error event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import structlog

from ..storage.log.config import LogConfig
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.topic_names import INTERNAL_TOPICS, is_internal_topic

if TYPE_CHECKING:
    from .catalogue import TopicCatalogue

log = structlog.get_logger("kbroker.internal_topics")

# What each internal topic's configs must hold, whatever else changes (Kafka's creation configs for
# them: GroupCoordinatorService.groupMetadataTopicConfigs, TransactionCoordinator's, and
# ShareCoordinatorService.shareGroupStateTopicConfigs).
REQUIRED_CONFIGS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact"},
    "__transaction_state": {"cleanup.policy": "compact"},
    "__share_group_state": {"cleanup.policy": "delete", "retention.ms": "-1"},
}
assert set(REQUIRED_CONFIGS) == INTERNAL_TOPICS
# KRaft's metadata log: not a topic, and Kafka's CreateTopics refuses the name (ControllerApis.createTopics).
CLUSTER_METADATA = "__cluster_metadata"


class Refused(KafkaError):
    """A change of an internal topic this policy refuses (its code: the answer the client gets)."""


class PolicyViolation(Refused):
    code = ErrorCode.POLICY_VIOLATION


def _deletes_by_retention(config: LogConfig) -> bool:
    return config.delete and (config.retention_ms >= 0 or config.retention_bytes >= 0)


def _what_is_wrong(name: str, overrides: dict[str, str], config: LogConfig) -> str | None:
    """Why `overrides` (over the broker's defaults, giving `config`) break the topic's policy; None if not."""
    for key, value in REQUIRED_CONFIGS[name].items():
        if key not in overrides:
            effective = {e.name: e.value for e in config.describe()}.get(key)
            return (f"the change would remove {key}, leaving the broker default {effective}, and {key}="
                    f"{value} is required")
        if overrides[key] != value:
            return f"{key}={overrides[key]} was asked, and {key}={value} is required"
    if _deletes_by_retention(config):
        return (f"retention.ms={config.retention_ms} and retention.bytes={config.retention_bytes} would let "
                f"retention delete records; both must be -1")
    return None


def check_configs(name: str, overrides: dict[str, str], defaults: LogConfig) -> None:
    """Raise if `overrides` (an internal topic's whole set after a change) are invalid (INVALID_CONFIG)
    or break its policy (POLICY_VIOLATION); nothing for any other topic."""
    if not is_internal_topic(name):
        return
    # INVALID_CONFIG before the policy, as in Kafka (internal.segment.bytes: a tool's topic; the write refuses
    # it unless the topic has it already)
    config = LogConfig.from_topic_configs(overrides, defaults, allow_internal="internal.segment.bytes" in overrides)
    canonical = {k: v for k, v in config.override_dict().items() if k in overrides}  # "delete,compact" and all
    wrong = _what_is_wrong(name, canonical, config)
    if wrong is not None:
        raise PolicyViolation(f"Internal topic {name} must keep its records until its coordinator removes them: "
                              f"{wrong}.")


def check_new_partitions(name: str) -> None:
    if is_internal_topic(name):
        raise PolicyViolation(f"Internal topic {name} keeps its partition count: a coordinator's partition is its "
                              f"key's hash modulo that count, so changing it would orphan every group or "
                              f"transactional id stored there.")


def made_by_the_broker_only(name: str) -> bool:
    """An internal topic, or the name of Kafka's metadata log (which Kafka never lets a client create)."""
    return is_internal_topic(name) or name == CLUSTER_METADATA


def check_creation(name: str) -> None:
    """Creation of an internal topic by anyone but its coordinator (CreateTopics, auto-creation, the
    start-up topics), or of `__cluster_metadata`, refused in Kafka's words (CreateTopics answers
    TOPIC_ALREADY_EXISTS for one that exists before it asks, as Kafka does)."""
    if name == CLUSTER_METADATA:
        raise Refused(f"Creation of internal topic {name} is prohibited.", ErrorCode.INVALID_REQUEST)
    if is_internal_topic(name):
        raise Refused(f"Creation of internal topic {name} is prohibited. The broker creates it itself, "
                      f"with the partition count and configs its coordinator needs.", ErrorCode.INVALID_REQUEST)


def check_own_creation(name: str, configs: dict[str, str], defaults: LogConfig) -> None:
    """A coordinator making its own internal topic: only those names, and only with configs that keep
    the policy (a coordinator's constant changed by mistake would otherwise go unseen until records went)."""
    if not is_internal_topic(name):
        raise ValueError(f"{name} is not an internal topic")
    check_configs(name, configs, defaults)


def check_deletion(name: str) -> None:
    if is_internal_topic(name):
        raise Refused(f"Internal topic {name} cannot be deleted.", ErrorCode.INVALID_TOPIC_EXCEPTION)


def check_records_deletion(name: str) -> None:
    if is_internal_topic(name):
        raise Refused(f"Cannot delete records of internal topic {name}", ErrorCode.INVALID_TOPIC_EXCEPTION)


def refused(ctx: Any, topic: str, operation: str, error: KafkaError, **fields: Any) -> None:
    """The event every refusal leaves: `ctx` is the handler's RequestContext (who asked, from where),
    `operation` names the handler."""
    connection = getattr(ctx, "connection", None)  # None on a PLAINTEXT listener: Kafka's User:ANONYMOUS
    log.warning("internal_topic_change_refused", topic=topic, operation=operation, error=ErrorCode(error.code).name,
                reason=str(error), principal=getattr(connection, "principal", "User:ANONYMOUS"), **ctx.log_fields(),
                **fields)


@contextmanager
def reported(ctx: Any, topic: str, operation: str, **fields: Any) -> Iterator[None]:
    """Around a handler's call of the catalogue: a refusal of this policy leaves its event, then goes on."""
    try:
        yield
    except Refused as e:
        refused(ctx, topic, operation, e, **fields)
        raise


def _repaired(name: str, overrides: dict[str, str], defaults: LogConfig) -> dict[str, str]:
    fixed = {**overrides, **REQUIRED_CONFIGS[name]}
    # a broker-wide retention limit (allow_internal: what the topic was loaded with, as the engine loads it)
    if _deletes_by_retention(LogConfig.from_topic_configs(fixed, defaults, allow_internal=True)):
        fixed.update({"retention.ms": "-1", "retention.bytes": "-1"})
    return fixed


def repair_configs(catalogue: TopicCatalogue) -> None:
    """At start-up, before retention first runs: put back the required configs an internal topic lacks."""
    for name in REQUIRED_CONFIGS:
        info = catalogue.topic(name)
        if info is None or info.damaged is not None:  # a fenced topic serves nothing until an operator acts
            continue
        fixed = _repaired(name, dict(info.overrides), catalogue.default_config)
        changed = [key for key, value in fixed.items() if info.overrides.get(key) != value]
        if not changed:
            continue
        effective = {e.name: e.value for e in info.config.describe()}
        try:
            catalogue.alter_topic_configs(name, fixed)
        except Exception as exc:  # noqa: BLE001 - a full disk: say so and serve (a crash loop helps nobody)
            log.error("internal_topic_config_repair_failed", topic=name, was={k: effective.get(k) for k in changed},
                      error=repr(exc), detail=f"{name} still lacks the configs that keep its records; retention "
                                              f"may delete them: free the disk and restart")
            continue
        log.error("internal_topic_config_repaired", topic=name, was={k: effective.get(k) for k in changed},
                  now={k: fixed[k] for k in changed},
                  detail=f"{name} lacked the configs that keep its records until its coordinator removes them "
                         f"(a kbroker before issue 38 accepted changes that removed them); they are back. Records "
                         f"that retention deleted before this start are gone, and their groups or transactional "
                         f"ids start over")
