"""Inputs and answers of the streams group protocol (KIP-1071): StreamsGroupHeartbeat,
StreamsGroupDescribe and the member's session timer."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ....protocol.errors import ErrorCode
from .topology import Subtopology, TaskSet, TopicInfo

E = ErrorCode
STREAMS_GROUP_TYPE = "streams"
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# The heartbeat answer's status codes (StreamsGroupHeartbeatResponse.json).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(slots=True)
class StreamsGroupHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active_tasks: TaskSet | None = None  # what the member owns now (None: unchanged since it last said)
    standby_tasks: TaskSet | None = None
    warmup_tasks: TaskSet | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    reply_to: object = None

    def error_result(self, code: ErrorCode) -> StreamsGroupHeartbeatResult:
        return StreamsGroupHeartbeatResult(code)


@dataclass(slots=True)
class StreamsGroupDescribe:
    group_id: str
    reply_to: object = None

    def error_result(self, code: ErrorCode) -> DescribedStreamsGroup:
        return DescribedStreamsGroup(self.group_id, code)


@dataclass(frozen=True, slots=True)
class StreamsSessionExpired:
    group_id: str
    member_id: str

    def error_result(self, code: ErrorCode) -> None:
        return None


@dataclass(frozen=True, slots=True)
class StreamsInitialDelayExpired:
    group_id: str

    def error_result(self, code: ErrorCode) -> None:
        return None


@dataclass(frozen=True, slots=True)
class StreamsRevocationExpired:
    """A member told to give up tasks at `member_epoch` did not within its rebalance timeout."""

    group_id: str
    member_id: str
    member_epoch: int

    def error_result(self, code: ErrorCode) -> None:
        return None


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"streams-rebalance-{group_id}-{member_id}"


def session_key(group_id: str, member_id: str) -> str:
    return f"streams-session-{group_id}-{member_id}"


def initial_delay_key(group_id: str) -> str:
    return f"streams-initial-rebalance-{group_id}"


@dataclass(frozen=True, slots=True)
class StreamsGroupHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = -1  # -1, 0 and None: the defaults of Kafka's answer to a leave
    task_offset_interval_ms: int = 0
    statuses: tuple[tuple[int, str], ...] | None = None
    active_tasks: TaskSet | None = None  # None: unchanged since the member's last answer
    standby_tasks: TaskSet | None = None
    warmup_tasks: TaskSet | None = None
    endpoint_information_epoch: int = 0
    # (host, port) -> (active (topic, partitions)..., standby ...), sent when the member's epoch is old
    partitions_by_endpoint: tuple[tuple[tuple[str, int], tuple[tuple[str, tuple[int, ...]], ...],
                                        tuple[tuple[str, tuple[int, ...]], ...]], ...] | None = None
    # Internal topics the broker is to create (Kafka's creatable topics of the answer); not on the wire.
    creatable_topics: tuple[TopicInfo, ...] = ()

    def failed(self, code: ErrorCode) -> StreamsGroupHeartbeatResult:
        return StreamsGroupHeartbeatResult(code)


@dataclass(frozen=True, slots=True)
class DescribedStreamsMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]
    assignment: tuple[TaskSet, TaskSet, TaskSet]  # active, standby, warm-up
    target_assignment: tuple[TaskSet, TaskSet, TaskSet]


@dataclass(frozen=True, slots=True)
class DescribedStreamsGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    members: tuple[DescribedStreamsMember, ...] = ()

    def failed(self, code: ErrorCode) -> DescribedStreamsGroup:
        return replace(self, error=code, members=())


STREAMS_REQUESTS = (StreamsGroupHeartbeat, StreamsGroupDescribe)
STREAMS_EXPIRIES = (StreamsSessionExpired, StreamsInitialDelayExpired, StreamsRevocationExpired)
