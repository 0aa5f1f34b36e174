"""The topic records the segment engine keeps for the catalogue: `topics/<name>.json`, one per topic.

A record holds what the catalogue owns (broker/partitions/catalogue.py): the name, the topic id, the
partition count, the config overrides and the partitions' leader epochs (those not 0), and what the
engine notes of its own partitions: the last log end offset seen of each partition holding data, so
a partition directory that disappears is noticed, with the offsets it took (manager.py). Written
whole and durably with a checksum (broker/storage/checksummed.py); one without (an older kbroker's)
is read as before and gains one with its next write.

A record that fails its checksum or no longer parses is never trusted: the topic is fenced (its
partitions answer KAFKA_STORAGE_ERROR, its files are left as they are for an operator), with an
error event naming the file. What the damaged record still says is used only to describe the topic
(its partition count, else the partition directories found; its id, else none).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from ....protocol.topic_names import InvalidTopicError, validate_topic_name
from .. import checksummed
from .config import LogConfig

log = structlog.get_logger("kbroker.broker.storage.log.topic_files")

ZERO_ID = uuid.UUID(int=0)


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    config: LogConfig
    overrides: dict[str, str] = field(default_factory=dict)
    leader_epochs: dict[int, int] = field(default_factory=dict)  # partition -> epoch, where not 0
    log_ends: dict[int, int] = field(default_factory=dict)  # partition -> last log end seen, where not 0
    damaged: str | None = None  # why its record cannot be trusted: the topic is fenced
    # Several nodes in one process (issue 41): partition -> its replicas' node ids, the first the
    # preferred leader; and partition -> leader where that is not the first replica. Both empty on
    # one node, whose record is as it always was.
    replicas: dict[int, list[int]] = field(default_factory=dict)
    leaders: dict[int, int] = field(default_factory=dict)
    # A reassignment under way (AlterPartitionReassignments): partition -> the replicas it adds, and
    # those it removes (both among `replicas` until it completes). Empty on one node.
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        body: dict[str, object] = {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.num_partitions,
            "configs": self.overrides,
        }
        if self.leader_epochs:
            body["leader_epochs"] = {str(p): e for p, e in sorted(self.leader_epochs.items())}
        if self.log_ends:
            body["log_ends"] = {str(p): e for p, e in sorted(self.log_ends.items())}
        if self.replicas:
            body["replicas"] = {str(p): r for p, r in sorted(self.replicas.items())}
        if self.leaders:
            body["leaders"] = {str(p): n for p, n in sorted(self.leaders.items())}
        if self.adding:
            body["adding"] = {str(p): r for p, r in sorted(self.adding.items())}
        if self.removing:
            body["removing"] = {str(p): r for p, r in sorted(self.removing.items())}
        return checksummed.dumps(body, indent=1)


def _int_map(raw: object) -> dict[int, int]:
    if not isinstance(raw, dict):
        raise ValueError("expected an object of partition -> number")
    return {int(k): int(v) for k, v in raw.items()}


def _list_map(raw: object) -> dict[int, list[int]]:
    if not isinstance(raw, dict):
        raise ValueError("expected an object of partition -> node ids")
    return {int(k): [int(n) for n in v] for k, v in raw.items()}


def read_topic_record(path: Path, default_config: LogConfig, partition_dirs: int) -> TopicInfo:
    """The topic a record file holds; a damaged one comes back fenced (`damaged`), described as far
    as it can be (`partition_dirs`: how many `<name>-<n>` directories the data directory holds)."""
    name = path.stem
    body: dict[str, object] = {}
    try:
        body = checksummed.loads(path.read_bytes()).body
        overrides = {str(k): str(v) for k, v in dict(body.get("configs", {})).items()}  # type: ignore[call-overload]
        info = TopicInfo(
            str(body["name"]), uuid.UUID(str(body["topic_id"])), int(body["partitions"]),  # type: ignore[call-overload]
            LogConfig.from_topic_configs(overrides, default_config, allow_internal=True), overrides,
            _int_map(body.get("leader_epochs", {})), _int_map(body.get("log_ends", {})),
            replicas=_list_map(body.get("replicas", {})), leaders=_int_map(body.get("leaders", {})),
            adding=_list_map(body.get("adding", {})), removing=_list_map(body.get("removing", {})))
        validate_topic_name(info.name)
        if info.name != name or info.num_partitions < 1:
            raise ValueError(f"the record names topic {info.name!r} with {info.num_partitions} partitions")
        return info
    except (OSError, ValueError, KeyError, TypeError, AttributeError, InvalidTopicError) as exc:
        if isinstance(exc, checksummed.ChecksumMismatch):
            body = exc.body
        return _fenced(name, body, default_config, partition_dirs, str(exc), path)


def _fenced(name: str, body: dict[str, object], default_config: LogConfig, partition_dirs: int,
            reason: str, path: Path) -> TopicInfo:
    try:
        topic_id = uuid.UUID(str(body["topic_id"]))
    except (KeyError, ValueError, TypeError):
        topic_id = ZERO_ID
    try:
        count = max(int(body["partitions"]), partition_dirs)  # type: ignore[call-overload]
    except (KeyError, ValueError, TypeError):
        count = partition_dirs
    log.error("topic_record_damaged", topic=name, file=str(path), error=reason, partitions=count,
              action="topic fenced: its partitions answer KAFKA_STORAGE_ERROR, its files are kept")
    return TopicInfo(name, topic_id, max(count, 1), default_config, damaged=reason)

