"""Share group state (KIP-932; Kafka's ShareGroup and ShareGroupMember), changed only by replaying
its records (`replay`), so that the state after a restart is what the log says. Nothing here does
I/O or reads a clock.

A share group has no offsets of its own (its members' progress is the share-partitions' state): the
offset APIs find no consumer group here (GROUP_ID_NOT_FOUND, as Kafka's ShareGroup answers), and
retention never deletes it. Its states are Empty, Stable and Dead: a share member never revokes, so
there is no Assigning or Reconciling state to go through.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ....protocol.errors import ErrorCode
from ....protocol.records import share_records as sr
from .. import commands as c
from ..offset_store import OffsetAndMetadata
from ..results import ListedGroup
from .share_commands import SHARE_GROUP_TYPE

E = ErrorCode
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned_partitions: Assignment = field(default_factory=dict)

    def replace(self, **changes: Any) -> ShareGroupMember:
        return dataclasses.replace(self, **changes)

    def metadata_equals(self, other: ShareGroupMember) -> bool:
        """The fields ShareGroupMemberMetadataValue carries."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names) == (
            other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names)


class ShareGroup:
    group_type: ClassVar[str] = SHARE_GROUP_TYPE
    __slots__ = ("group_id", "group_epoch", "metadata_hash", "assignment_epoch", "members", "target_assignment",
                 "initialized", "deleted")

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # The share-partitions whose state is initialized (ShareGroupStatePartitionMetadata):
        # topic id -> (name, partitions).
        self.initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        self.deleted = False

    @property
    def state(self) -> str:
        if self.deleted:
            return "Dead"
        return "Stable" if self.members else "Empty"

    def subscribed_topic_names(self, leaving: str | None = None, joining: ShareGroupMember | None = None) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            if member.member_id != leaving and (joining is None or member.member_id != joining.member_id):
                names.update(member.subscribed_topic_names)
        if joining is not None:
            names.update(joining.subscribed_topic_names)
        return names

    def target(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    # -- what every group answers (group_types.Group) ----------------------------------------

    def validate_offset_commit(self, cmd: c.OffsetCommit) -> ErrorCode | None:
        return E.GROUP_ID_NOT_FOUND  # "Group g is not a consumer group."

    def validate_offset_fetch(self, cmd: c.OffsetFetch) -> ErrorCode | None:
        return E.GROUP_ID_NOT_FOUND

    def validate_offset_delete(self) -> ErrorCode | None:
        return E.GROUP_ID_NOT_FOUND

    def validate_delete_group(self) -> ErrorCode | None:
        return None if not self.members else E.NON_EMPTY_GROUP

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def offset_expiration(self) -> Callable[[OffsetAndMetadata], int] | None:
        return None  # share groups keep no committed offsets to expire (Kafka's shouldExpire: false)

    def is_empty(self) -> bool:
        return not self.members

    def tombstones(self) -> list[Any]:
        """Kafka's ShareGroup.createGroupTombstoneRecords, in its order."""
        gid = self.group_id
        records: list[Any] = [sr.ShareGroupTombstone(sr.CURRENT_MEMBER_ASSIGNMENT, gid, m) for m in self.members]
        records += [sr.ShareGroupTombstone(sr.TARGET_ASSIGNMENT_MEMBER, gid, m) for m in self.members]
        records.append(sr.ShareGroupTombstone(sr.TARGET_ASSIGNMENT_METADATA, gid))
        records += [sr.ShareGroupTombstone(sr.MEMBER_METADATA, gid, m) for m in self.members]
        records.append(sr.ShareGroupTombstone(sr.STATE_PARTITION_METADATA, gid))
        records.append(sr.ShareGroupTombstone(sr.GROUP_METADATA, gid))
        return records

    def listed(self) -> ListedGroup | None:
        if self.deleted:
            return None
        return ListedGroup(self.group_id, SHARE_GROUP_TYPE, self.state, SHARE_GROUP_TYPE)


def replay(groups: Any, record: Any, create: Callable[[str], ShareGroup]) -> None:
    """Apply one durable share group record (`groups`: the store's typed view of share groups)."""
    group: ShareGroup | None = groups.get(record.group)
    if isinstance(record, sr.ShareGroupTombstone):
        if group is None:
            return
        kind, member_id = record.record_type, record.member_id
        if kind == sr.MEMBER_METADATA and member_id is not None:
            group.members.pop(member_id, None)
        elif kind == sr.CURRENT_MEMBER_ASSIGNMENT and member_id in group.members:
            group.members[member_id] = group.members[member_id].replace(
                member_epoch=0, previous_member_epoch=0, assigned_partitions={})
        elif kind == sr.TARGET_ASSIGNMENT_MEMBER and member_id is not None:
            group.target_assignment.pop(member_id, None)
        elif kind == sr.STATE_PARTITION_METADATA:
            group.initialized = {}
        elif kind == sr.GROUP_METADATA:
            group.deleted = True
            del groups[record.group]
        return
    if group is None:
        group = create(record.group)
    match record:
        case sr.ShareGroupMetadataRecord():
            group.group_epoch, group.metadata_hash = record.epoch, record.metadata_hash
        case sr.ShareGroupMemberMetadataRecord():
            old = group.members.get(record.member_id) or ShareGroupMember(record.member_id)
            group.members[record.member_id] = old.replace(
                rack_id=record.rack_id, client_id=record.client_id, client_host=record.client_host,
                subscribed_topic_names=tuple(record.subscribed_topic_names))
        case sr.ShareGroupTargetAssignmentMetadataRecord():
            group.assignment_epoch = record.assignment_epoch
        case sr.ShareGroupTargetAssignmentMemberRecord():
            group.target_assignment[record.member_id] = sr.assignment_dict(record.assignment)
        case sr.ShareGroupCurrentMemberAssignmentRecord():
            old = group.members.get(record.member_id) or ShareGroupMember(record.member_id)
            group.members[record.member_id] = old.replace(
                member_epoch=record.member_epoch, previous_member_epoch=record.previous_member_epoch,
                assigned_partitions=sr.assignment_dict(record.assignment))
        case sr.ShareGroupStatePartitionMetadataRecord():
            group.initialized = {t: (name, frozenset(ps)) for t, name, ps in record.initialized}
