"""Inputs and answers of the share group protocol (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe
and the member's session timer."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from ....protocol.errors import ErrorCode

E = ErrorCode
SHARE_GROUP_TYPE = "share"
LEAVE_GROUP_MEMBER_EPOCH = -1
WireAssignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(slots=True)
class ShareGroupHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""
    reply_to: object = None

    def error_result(self, code: ErrorCode) -> ShareGroupHeartbeatResult:
        return ShareGroupHeartbeatResult(code)


@dataclass(slots=True)
class ShareGroupDescribe:
    group_id: str
    reply_to: object = None

    def error_result(self, code: ErrorCode) -> DescribedShareGroup:
        return DescribedShareGroup(self.group_id, code)


@dataclass(frozen=True, slots=True)
class ShareSessionExpired:
    group_id: str
    member_id: str

    def error_result(self, code: ErrorCode) -> None:
        return None


def session_key(group_id: str, member_id: str) -> str:
    return f"share-session-{group_id}-{member_id}"


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: WireAssignment | None = None  # None: unchanged since the member's last answer

    def failed(self, code: ErrorCode) -> ShareGroupHeartbeatResult:
        return ShareGroupHeartbeatResult(code)


@dataclass(frozen=True, slots=True)
class DescribedSharePartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedSharePartitions, ...]


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()
    other_type: bool = False  # GROUP_ID_NOT_FOUND because the group is of another type (classic, consumer)
    # the share-partitions whose state is initialized (ShareGroupStatePartitionMetadata): (topic id, partitions)
    initialized: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] = ()

    def failed(self, code: ErrorCode) -> DescribedShareGroup:
        return replace(self, error=code, members=())


SHARE_REQUESTS = (ShareGroupHeartbeat, ShareGroupDescribe)
SHARE_EXPIRIES = (ShareSessionExpired,)
