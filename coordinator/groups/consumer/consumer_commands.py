"""Inputs and answers of the consumer group protocol (KIP-848): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and the two per-member timers (session, revocation within the rebalance
timeout)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ....protocol.errors import ErrorCode

from ..classic.member import Handle

E = ErrorCode
OwnedTopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(slots=True)
class ConsumerGroupHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_topic_partitions: OwnedTopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    reply_to: Handle | None = None
    # The member's DESCRIBE permission on a topic name, under an authorizer (None: none configured):
    # a regular expression resolves only to topics it allows, as Kafka's TopicRegexResolver filters
    # them with the authorizer and the context of the member whose heartbeat resolved them.
    topic_filter: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if self.subscribed_topic_names is not None:
            self.subscribed_topic_names = tuple(self.subscribed_topic_names)
        if self.owned_topic_partitions is not None:
            self.owned_topic_partitions = tuple((t, tuple(ps)) for t, ps in self.owned_topic_partitions)


@dataclass(slots=True)
class ConsumerGroupDescribe:
    group_id: str
    reply_to: Handle | None = None


@dataclass(frozen=True, slots=True)
class ConsumerSessionExpired:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerRebalanceExpired:
    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerRegexResolve:
    """Resolve a regular expression of the group that no heartbeat has resolved yet (Kafka's
    asynchronous maybeUpdateRegularExpressions): scheduled by the heartbeat that brought it, with that
    member's topic filter (the topics it may DESCRIBE; None without an authorizer)."""

    group_id: str
    regex: str
    topic_filter: Callable[[str], bool] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ConsumerClassicTimeout:
    """A classic member inside a consumer group did not join or sync in time."""

    group_id: str
    member_id: str
    reason: str


def regex_key(group_id: str, regex: str) -> str:
    return f"consumer-regex-{group_id}-{regex}"


def join_key(group_id: str, member_id: str) -> str:
    return f"consumer-join-{group_id}-{member_id}"


def sync_key(group_id: str, member_id: str) -> str:
    return f"consumer-sync-{group_id}-{member_id}"


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


@dataclass(frozen=True, slots=True)
class ExpireSessionsNext:
    """A follow-up: the ExpireSessions test control goes on once the previous fence is durable, with
    the members still to fence (consumer_controls.py)."""

    group_id: str
    remaining: tuple[str, ...]
    expired: int
    reply_to: object
    # The fence made the group a classic group (its last member of the new protocol went): the
    # downgrade's own follow-up, and the rest are the classic group's members to expire.
    downgraded: object = None


# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: unchanged since the last answer; else the member's whole assignment, by topic id
    assignment: OwnedTopicPartitions | None = None

    def failed(self, code: ErrorCode) -> ConsumerGroupHeartbeatResult:
        return ConsumerGroupHeartbeatResult(code)


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1  # v1+: 0 classic, 1 consumer


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()

    def failed(self, code: ErrorCode) -> DescribedConsumerGroup:
        return replace(self, error=code, members=())


ConsumerRequest = ConsumerGroupHeartbeat | ConsumerGroupDescribe
ConsumerExpiry = ConsumerSessionExpired | ConsumerRebalanceExpired | ConsumerClassicTimeout


def consumer_error_result(
    cmd: object, code: ErrorCode,
) -> ConsumerGroupHeartbeatResult | DescribedConsumerGroup | None:
    """The whole-request error answer for a consumer group command, or None if not one."""
    if isinstance(cmd, ConsumerGroupHeartbeat):
        return ConsumerGroupHeartbeatResult(code)
    if isinstance(cmd, ConsumerGroupDescribe):
        return DescribedConsumerGroup(cmd.group_id, code)
    return None


CONSUMER_REQUESTS = (ConsumerGroupHeartbeat, ConsumerGroupDescribe)
CONSUMER_EXPIRIES = (ConsumerSessionExpired, ConsumerRebalanceExpired, ConsumerClassicTimeout, ConsumerRegexResolve)
