"""Answers from the coordinator, with Kafka error codes.

A failed command gets its answer here, in one of two ways that clients can tell apart (as in Kafka):
- `error_result_for(cmd, code)`: the command was refused before any group state was read (not
  the coordinator, loading, a bug in the machine): e.g. JoinGroup echoes the member id it was sent;
- `result.failed(code)`: an answer prepared before a `__consumer_offsets` append is downgraded
  because the append failed: e.g. JoinGroup forgets the member id, OffsetCommit keeps the errors of
  partitions that were not to be written.
The broker turns these answers into responses like any other; the wire shape of a whole-request
error is the API module's `failed_response` (broker/network/router.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...protocol.fast_init import fast_init
from ...protocol.errors import ErrorCode

from . import commands as c
from .consumer.consumer_commands import ConsumerGroupHeartbeatResult, DescribedConsumerGroup, consumer_error_result

E = ErrorCode


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = c.UNKNOWN_MEMBER_ID
    generation_id: int = c.NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()  # only the leader gets them

    def failed(self, code: ErrorCode) -> JoinGroupResult:
        return replace(self, error=code, member_id=c.UNKNOWN_MEMBER_ID, members=(), skip_assignment=False)


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""

    def failed(self, code: ErrorCode) -> SyncGroupResult:
        return SyncGroupResult(code)


@fast_init
@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode

    def failed(self, code: ErrorCode) -> HeartbeatResult:
        return HeartbeatResult(code)


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()

    def failed(self, code: ErrorCode) -> LeaveGroupResult:
        return LeaveGroupResult(code, ())


@fast_init
@dataclass(frozen=True, slots=True)
class PartitionError:
    partition: int
    error: ErrorCode


@fast_init
@dataclass(frozen=True, slots=True)
class TopicErrors:
    name: str
    partitions: tuple[PartitionError, ...]


def _replace_none(topics: tuple[TopicErrors, ...], code: ErrorCode) -> tuple[TopicErrors, ...]:
    return tuple(
        TopicErrors(t.name, tuple(
            PartitionError(p.partition, code if p.error is E.NONE else p.error) for p in t.partitions
        ))
        for t in topics
    )


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    topics: tuple[TopicErrors, ...]

    def failed(self, code: ErrorCode) -> OffsetCommitResult:
        """Partitions that were to be written take the append error; others keep theirs."""
        return OffsetCommitResult(_replace_none(self.topics, code))

    @staticmethod
    def all_failed(cmd: c.OffsetCommit, code: ErrorCode) -> OffsetCommitResult:
        return OffsetCommitResult(tuple(
            TopicErrors(t.name, tuple(PartitionError(p.partition, code) for p in t.partitions))
            for t in cmd.topics
        ))


@dataclass(frozen=True, slots=True)
class OffsetFetchPartition:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = E.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchTopic:
    name: str
    partitions: tuple[OffsetFetchPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    topics: tuple[OffsetFetchTopic, ...] = ()

    def failed(self, code: ErrorCode) -> OffsetFetchResult:
        return OffsetFetchResult(code)


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    topics: tuple[TopicErrors, ...] = ()

    def failed(self, code: ErrorCode) -> OffsetDeleteResult:
        return OffsetDeleteResult(code)


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()

    def failed(self, code: ErrorCode) -> DescribedGroup:
        return DescribedGroup(self.group_id, code)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeletedGroup:
    group_id: str
    error: ErrorCode

    def failed(self, code: ErrorCode) -> DeletedGroup:
        return DeletedGroup(self.group_id, code)


@dataclass(frozen=True, slots=True)
class ControlResult:
    """What a test control (controls.py) answers."""

    error: ErrorCode
    detail: str = ""

    def failed(self, code: ErrorCode) -> ControlResult:
        return ControlResult(code, self.detail)


Result = (
    JoinGroupResult | SyncGroupResult | HeartbeatResult | LeaveGroupResult | OffsetCommitResult
    | OffsetFetchResult | OffsetDeleteResult | DescribedGroup | DeletedGroup | ControlResult
    | ConsumerGroupHeartbeatResult | DescribedConsumerGroup
)


def error_result_for(cmd: object, code: ErrorCode) -> Result:
    """The whole-request error answer for `cmd` (coordinator unavailable, loading, ...)."""
    match cmd:
        case c.JoinGroup():
            return JoinGroupResult(code, member_id=cmd.member_id)
        case c.SyncGroup():
            return SyncGroupResult(code)
        case c.Heartbeat():
            return HeartbeatResult(code)
        case c.LeaveGroup():
            return LeaveGroupResult(code)
        case c.OffsetCommit():
            return OffsetCommitResult.all_failed(cmd, code)
        case c.OffsetFetch():
            return OffsetFetchResult(code)
        case c.OffsetDelete() | c.DeleteTopicOffsets():
            return OffsetDeleteResult(code)
        case c.DescribeGroup():
            return DescribedGroup(cmd.group_id, code)
        case c.DeleteGroup():
            return DeletedGroup(cmd.group_id, code)
    if getattr(cmd, "is_control", False):
        return ControlResult(code, f"group {getattr(cmd, 'group_id')}: {code.name}")
    result = consumer_error_result(cmd, code)
    if result is not None:
        return result
    own = getattr(cmd, "error_result", None)  # a group type's command brings its own (share, streams)
    if own is not None:
        return own(code)
    raise TypeError(f"no result type for {type(cmd).__name__}")
