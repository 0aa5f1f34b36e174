"""Consumer group state (KIP-848; Kafka's ConsumerGroup and ConsumerGroupMember).

A consumer group changes only through `replay` of its records (coordinator/groups/consumer/consumer_records.py):
handlers compute records from the current state and the shell replays them once durable, so the
state after a restart is exactly what the log says. Nothing here does I/O or reads a clock.

Assignments are keyed by topic id, as on the wire and in the records: {topic_id: frozenset(partitions)}.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ....protocol.errors import ErrorCode
from ....protocol.records.consumer_records import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadataTombstone,
)
from .. import commands as c
from ..offset_store import OffsetAndMetadata
from ..results import ListedGroup

E = ErrorCode
CONSUMER_GROUP_TYPE = "consumer"

EMPTY_ASSIGNMENT: Assignment = {}

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState and its byte in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def replace(self, **changes: Any) -> ConsumerGroupMember:
        return dataclasses.replace(self, **changes)

    def subscription_equals(self, other: ConsumerGroupMember) -> bool:
        return (self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex)

    def metadata_equals(self, other: ConsumerGroupMember | None) -> bool:
        """The fields ConsumerGroupMemberMetadataValue carries."""
        if other is None:
            return False
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic) == (
            other.instance_id, other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names,
            other.subscribed_topic_regex, other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def assignment_equals(self, other: ConsumerGroupMember) -> bool:
        """The fields ConsumerGroupCurrentMemberAssignmentValue carries."""
        return (self.member_epoch, self.previous_member_epoch, self.state, _norm(self.assigned_partitions),
                _norm(self.partitions_pending_revocation)) == (
            other.member_epoch, other.previous_member_epoch, other.state, _norm(other.assigned_partitions),
            _norm(other.partitions_pending_revocation))


def _norm(assignment: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in pairs:
        ps = frozenset(partitions)
        if ps:
            out[topic_id] = out.get(topic_id, frozenset()) | ps
    return out


def count_partitions(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())


@dataclass(frozen=True, slots=True)
class TopicImage:
    """What the coordinator needs of a topic: Kafka's TopicsImage, reduced."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int


def no_topics() -> Mapping[str, TopicImage]:
    """The topics image of a coordinator that has none (unit tests, tools)."""
    return {}


def new_member_id() -> str:
    """A member id the coordinator makes up: Kafka's Uuid.randomUuid().toString(), 16 random bytes in
    URL-safe base64 without padding (22 characters), never starting with "-"."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


class ConsumerGroup:
    group_type: ClassVar[str] = CONSUMER_GROUP_TYPE
    __slots__ = (
        "group_id", "group_epoch", "metadata_hash", "assignment_epoch", "members", "target_assignment",
        "partition_epochs", "static_members", "resolved_regexes", "deleted", "classic_join_timers",
        "revision", "steady_memo", "name_counts", "regex_counts", "assignor_counts",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # A new group starts at epoch 1 with an empty assignment of epoch 1, so the first member joining
        # reconciles to epoch 1 until the first computed assignment, epoch 2 (KAFKA-20268, Kafka 4.3+)
        self.group_epoch = 1
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # (topic id, partition) -> epoch of the member that holds it (assigned or pending revocation)
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.deleted = False
        # Soft state: classic members whose join timeout is armed (Kafka's scheduleIfAbsent).
        self.classic_join_timers: set[str] = set()
        # Bumped by every replayed record of the group (consumer_records.replay): what was derived from
        # its members, subscriptions and regexes stays true while it holds.
        self.revision = 0
        # (topics image, revision, the members' steady answers): a steady heartbeat found nothing to
        # write at them (regexes resolved as they are, the metadata hash current); see
        # consumer_heartbeat.steady_heartbeat.
        self.steady_memo: tuple[object, int, dict[str, Any]] | None = None
        # How many members subscribe to each topic name, each regex, and name each assignor (Kafka's
        # subscribedTopicNames counts): a heartbeat asks what the group subscribes to without
        # walking every member. Kept by put_member and remove_member, the only ways in and out.
        self.name_counts: dict[str, int] = {}
        self.regex_counts: dict[str, int] = {}
        self.assignor_counts: dict[str, int] = {}

    def all_use_classic_protocol_except(self, member_id: str) -> bool:
        return all(m.uses_classic_protocol for m in self.members.values() if m.member_id != member_id)

    # -- state -------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's maybeUpdateGroupState, computed on demand."""
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def target(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def subscriptions(self, leaving: Iterable[str] = (),
                      joining: ConsumerGroupMember | None = None) -> tuple[set[str], set[str]]:
        """The topic names subscribed by name and the regexes across the members, with the members
        whose ids are in `leaving` left out and `joining` counted in (Kafka's
        computeSubscribedTopicNames). Costs the group's distinct names, not its members."""
        names, regexes = self.name_counts, self.regex_counts
        gone = [self.members[member_id] for member_id in set(leaving) if member_id in self.members]
        if gone:
            names, regexes = dict(names), dict(regexes)
            for member in gone:
                for name in member.subscribed_topic_names:
                    _bump(names, name, -1)
                if member.subscribed_topic_regex:
                    _bump(regexes, member.subscribed_topic_regex, -1)
        subscribed, wanted = set(names), set(regexes)
        if joining is not None:
            subscribed.update(joining.subscribed_topic_names)
            if joining.subscribed_topic_regex:
                wanted.add(joining.subscribed_topic_regex)
        return subscribed, wanted

    def subscribed_topic_names(self) -> set[str]:
        """Every topic the group subscribes to, by name or through a regex as last resolved."""
        names, wanted = self.subscriptions()
        for regex in wanted:
            names.update(self.resolved_regexes.get(regex, ()))
        return names

    # -- what every group answers (group_types.Group; Kafka's ConsumerGroup.validateOffset*) --
    # The member epoch stands where the classic generation stood: a commit or fetch from a member
    # must carry its current epoch, else STALE_MEMBER_EPOCH; without a member (epoch -1) only an empty
    # group takes commits, and anyone may fetch.

    def validate_offset_commit(self, cmd: c.OffsetCommit) -> ErrorCode | None:
        if cmd.transactional:
            return None  # a committed transaction's offsets: checked when TxnOffsetCommit sent them
        if cmd.generation_id < 0 and not self.members:
            return None  # admin tools and consumers without group management
        member = self.members.get(cmd.member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member inside the group (migration): its generation is its member epoch.
            return None if cmd.generation_id == member.member_epoch else E.ILLEGAL_GENERATION
        if cmd.validate_only:
            # TxnOffsetCommit's check (KIP-447): any version, and a stale epoch is ILLEGAL_GENERATION,
            # the error a transactional producer knows (Kafka's validateTransactionalOffsetCommit).
            return None if cmd.generation_id == member.member_epoch else E.ILLEGAL_GENERATION
        if cmd.api_version < 9:
            return E.UNSUPPORTED_VERSION  # members of the new protocol commit with v9+
        if cmd.generation_id != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, cmd: c.OffsetFetch) -> ErrorCode | None:
        member_id, member_epoch = cmd.member_id, cmd.member_epoch
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.ILLEGAL_GENERATION if member.classic is not None else E.STALE_MEMBER_EPOCH
        return None

    def validate_offset_delete(self) -> ErrorCode | None:
        return None

    def validate_delete_group(self) -> ErrorCode | None:
        return None if self.state is ConsumerGroupState.EMPTY else E.NON_EMPTY_GROUP

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def offset_expiration(self) -> Callable[[OffsetAndMetadata], int] | None:
        return _commit_time  # offsets of topics nobody subscribes to expire after their commit

    def tombstones(self) -> list[Any]:
        """Kafka's createGroupTombstoneRecords: every member's records, then the group's."""
        gid = self.group_id
        records: list[Any] = []
        records += [ConsumerGroupCurrentMemberAssignmentTombstone(gid, m) for m in self.members]
        records += [ConsumerGroupTargetAssignmentMemberTombstone(gid, m) for m in self.members]
        records += [ConsumerGroupMemberMetadataTombstone(gid, m) for m in self.members]
        records += [ConsumerGroupRegularExpressionTombstone(gid, r) for r in self.resolved_regexes]
        records.append(ConsumerGroupTargetAssignmentMetadataTombstone(gid))
        records.append(ConsumerGroupMetadataTombstone(gid))
        return records

    def listed(self) -> ListedGroup | None:
        return ListedGroup(self.group_id, CONSUMER_GROUP_TYPE, str(self.state), CONSUMER_GROUP_TYPE)

    def preferred_server_assignor(self, old: ConsumerGroupMember | None = None,
                                  new: ConsumerGroupMember | None = None) -> str | None:
        """The assignor most members name (Kafka's computePreferredServerAssignor), with `old`'s
        member replaced by `new`; ties go to the name first in sort order, so every replica of the
        decision agrees."""
        counts = self.assignor_counts
        leaving = self.members.get(old.member_id) if old is not None else None
        if (leaving is not None and leaving.server_assignor) or (new is not None and new.server_assignor):
            counts = dict(counts)
            if leaving is not None and leaving.server_assignor:
                _bump(counts, leaving.server_assignor, -1)
            if new is not None and new.server_assignor:
                _bump(counts, new.server_assignor, 1)
        if not counts:
            return None
        return max(sorted(counts), key=lambda name: counts[name])

    # -- replay helpers (called by consumer_records.replay) ----------------------------------

    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._count(old, -1)
            self._release_partitions(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        self._count(member, 1)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold_partitions(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._count(old, -1)
        self._release_partitions(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _count(self, member: ConsumerGroupMember, step: int) -> None:
        for name in member.subscribed_topic_names:
            _bump(self.name_counts, name, step)
        if member.subscribed_topic_regex:
            _bump(self.regex_counts, member.subscribed_topic_regex, step)
        if member.server_assignor:
            _bump(self.assignor_counts, member.server_assignor, step)

    def _hold_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    def _release_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]


def _bump(counts: dict[str, int], key: str, step: int) -> None:
    n = counts.get(key, 0) + step
    if n:
        counts[key] = n
    else:
        del counts[key]


def _commit_time(o: OffsetAndMetadata) -> int:
    return o.commit_timestamp


GroupConfigLookup = Callable[[str, str], "str | None"]  # (group id, config name) -> the group's override


def no_overrides(_group_id: str, _name: str) -> str | None:
    return None


def session_timeout_ms(config: Any, overrides: GroupConfigLookup, group_id: str) -> int:
    """Kafka's consumerGroupSessionTimeoutMs: the group's consumer.session.timeout.ms (IncrementalAlterConfigs
    on the GROUP resource), else the broker's group.consumer.session.timeout.ms."""
    value = overrides(group_id, "consumer.session.timeout.ms")
    return int(value) if value is not None else config.group_consumer_session_timeout_ms


def heartbeat_interval_ms(config: Any, overrides: GroupConfigLookup, group_id: str) -> int:
    """Kafka's consumerGroupHeartbeatIntervalMs: the group's consumer.heartbeat.interval.ms, else the
    broker's group.consumer.heartbeat.interval.ms."""
    value = overrides(group_id, "consumer.heartbeat.interval.ms")
    return int(value) if value is not None else config.group_consumer_heartbeat_interval_ms
