"""Share group records (KIP-932) <-> `__consumer_offsets` key and value bytes, in Kafka's formats.

Keys: int16 record type (10 member metadata, 11 group metadata, 12 target assignment metadata,
13 target assignment member, 14 current member assignment, 15 state partition metadata) + the key
struct v0. Values: int16 version 0 + the flexible value struct; a null value is a tombstone. The codec
registers itself with the `__consumer_offsets` codec (registered.register_record_codec) when this module
is imported; codec.decode_record imports it with the first share group record it meets.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from io import BytesIO

from .. import codec
from ..messages import share_group_current_member_assignment_key as cmak
from ..messages import share_group_current_member_assignment_value as cmav
from ..messages import share_group_member_metadata_key as mmk
from ..messages import share_group_member_metadata_value as mmv
from ..messages import share_group_metadata_key as gmk
from ..messages import share_group_metadata_value as gmv
from ..messages import share_group_state_partition_metadata_key as spk
from ..messages import share_group_state_partition_metadata_value as spv
from ..messages import share_group_target_assignment_member_key as tamk
from ..messages import share_group_target_assignment_member_value as tamv
from ..messages import share_group_target_assignment_metadata_key as tak
from ..messages import share_group_target_assignment_metadata_value as tav
from .registered import register_record_codec

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
SHARE_RECORD_TYPES = frozenset({10, 11, 12, 13, 14, 15})
_I16 = struct.Struct(">h")

# An assignment as records carry it: (topic id, sorted partitions), topics in a stable order.
WireAssignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
# Initialized (or initializing) share partitions: (topic id, topic name, sorted partitions).
TopicPartitionsInfo = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataRecord:
    group: str
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataRecord:
    group: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataRecord:
    group: str
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberRecord:
    group: str
    member_id: str
    assignment: WireAssignment


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentRecord:
    group: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 stable (a share member never has partitions to revoke)
    assignment: WireAssignment


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataRecord:
    group: str
    initialized: TopicPartitionsInfo
    initializing: TopicPartitionsInfo = ()
    deleting: tuple[tuple[uuid.UUID, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTombstone:
    """A null value for one of the share group's keys: `record_type` says which; `member_id` is set
    for the per-member keys (10, 13, 14)."""

    record_type: int
    group: str
    member_id: str | None = None


ShareRecord = (
    ShareGroupMetadataRecord | ShareGroupMemberMetadataRecord | ShareGroupTargetAssignmentMetadataRecord
    | ShareGroupTargetAssignmentMemberRecord | ShareGroupCurrentMemberAssignmentRecord
    | ShareGroupStatePartitionMetadataRecord | ShareGroupTombstone
)
SHARE_RECORD_CLASSES: tuple[type, ...] = ShareRecord.__args__


def wire_assignment(assignment: dict[uuid.UUID, frozenset[int]]) -> WireAssignment:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps)


def assignment_dict(wire: WireAssignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in wire if ps}


def _member_key(record_type: int, group: str, member_id: str) -> bytes:
    spec, cls = {MEMBER_METADATA: (mmk.SPEC, mmk.ShareGroupMemberMetadataKey),
                 TARGET_ASSIGNMENT_MEMBER: (tamk.SPEC, tamk.ShareGroupTargetAssignmentMemberKey),
                 CURRENT_MEMBER_ASSIGNMENT: (cmak.SPEC, cmak.ShareGroupCurrentMemberAssignmentKey)}[record_type]
    return _I16.pack(record_type) + codec.encode(spec, 0, cls(group, member_id))


def _group_key(record_type: int, group: str) -> bytes:
    spec, cls = {GROUP_METADATA: (gmk.SPEC, gmk.ShareGroupMetadataKey),
                 TARGET_ASSIGNMENT_METADATA: (tak.SPEC, tak.ShareGroupTargetAssignmentMetadataKey),
                 STATE_PARTITION_METADATA: (spk.SPEC, spk.ShareGroupStatePartitionMetadataKey)}[record_type]
    return _I16.pack(record_type) + codec.encode(spec, 0, cls(group))


def _key_of(record_type: int, group: str, member_id: str | None) -> bytes:
    if record_type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        return _member_key(record_type, group, member_id or "")
    return _group_key(record_type, group)


def _value(spec, obj) -> bytes:
    return _I16.pack(0) + codec.encode(spec, 0, obj)


def _infos(infos: TopicPartitionsInfo) -> list[spv.TopicPartitionsInfo]:
    return [spv.TopicPartitionsInfo(topic_id=t, topic_name=n, partitions=list(ps)) for t, n, ps in infos]


def encode_share_record(r: ShareRecord) -> tuple[bytes, bytes | None]:
    match r:
        case ShareGroupTombstone():
            return _key_of(r.record_type, r.group, r.member_id), None
        case ShareGroupMetadataRecord():
            return (_group_key(GROUP_METADATA, r.group),
                    _value(gmv.SPEC, gmv.ShareGroupMetadataValue(epoch=r.epoch, metadata_hash=r.metadata_hash)))
        case ShareGroupMemberMetadataRecord():
            return (_member_key(MEMBER_METADATA, r.group, r.member_id),
                    _value(mmv.SPEC, mmv.ShareGroupMemberMetadataValue(
                        rack_id=r.rack_id, client_id=r.client_id, client_host=r.client_host,
                        subscribed_topic_names=list(r.subscribed_topic_names))))
        case ShareGroupTargetAssignmentMetadataRecord():
            return (_group_key(TARGET_ASSIGNMENT_METADATA, r.group),
                    _value(tav.SPEC, tav.ShareGroupTargetAssignmentMetadataValue(
                        assignment_epoch=r.assignment_epoch, assignment_timestamp=r.assignment_timestamp)))
        case ShareGroupTargetAssignmentMemberRecord():
            return (_member_key(TARGET_ASSIGNMENT_MEMBER, r.group, r.member_id),
                    _value(tamv.SPEC, tamv.ShareGroupTargetAssignmentMemberValue(topic_partitions=[
                        tamv.TopicPartition(topic_id=t, partitions=list(ps)) for t, ps in r.assignment])))
        case ShareGroupCurrentMemberAssignmentRecord():
            return (_member_key(CURRENT_MEMBER_ASSIGNMENT, r.group, r.member_id),
                    _value(cmav.SPEC, cmav.ShareGroupCurrentMemberAssignmentValue(
                        member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch, state=r.state,
                        assigned_partitions=[cmav.TopicPartitions(topic_id=t, partitions=list(ps))
                                             for t, ps in r.assignment])))
        case ShareGroupStatePartitionMetadataRecord():
            return (_group_key(STATE_PARTITION_METADATA, r.group),
                    _value(spv.SPEC, spv.ShareGroupStatePartitionMetadataValue(
                        initializing_topics=_infos(r.initializing), initialized_topics=_infos(r.initialized),
                        deleting_topics=[spv.TopicInfo(topic_id=t, topic_name=n) for t, n in r.deleting])))
    raise TypeError(f"not a share group record: {r!r}")


def _decode_value(spec, value: bytes):
    (version,) = _I16.unpack_from(value)
    return codec.decode(spec, version, value[2:])


def decode_share_record(key: bytes, value: bytes | None) -> ShareRecord:
    (record_type,) = _I16.unpack_from(key)
    key_io = BytesIO(key)
    key_io.seek(2)
    if record_type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        key_spec = {MEMBER_METADATA: mmk.SPEC, TARGET_ASSIGNMENT_MEMBER: tamk.SPEC,
                    CURRENT_MEMBER_ASSIGNMENT: cmak.SPEC}[record_type]
        k = codec.decode(key_spec, 0, key_io)
        group, member_id = k.group_id, k.member_id
    else:
        key_spec = {GROUP_METADATA: gmk.SPEC, TARGET_ASSIGNMENT_METADATA: tak.SPEC,
                    STATE_PARTITION_METADATA: spk.SPEC}[record_type]
        group, member_id = codec.decode(key_spec, 0, key_io).group_id, None
    if value is None:
        return ShareGroupTombstone(record_type, group, member_id)
    assert member_id is not None or record_type not in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER,
                                                         CURRENT_MEMBER_ASSIGNMENT)
    if record_type == GROUP_METADATA:
        v = _decode_value(gmv.SPEC, value)
        return ShareGroupMetadataRecord(group, v.epoch, v.metadata_hash)
    if record_type == MEMBER_METADATA:
        v = _decode_value(mmv.SPEC, value)
        return ShareGroupMemberMetadataRecord(group, member_id or "", v.rack_id, v.client_id, v.client_host,
                                              tuple(v.subscribed_topic_names))
    if record_type == TARGET_ASSIGNMENT_METADATA:
        v = _decode_value(tav.SPEC, value)
        return ShareGroupTargetAssignmentMetadataRecord(group, v.assignment_epoch, v.assignment_timestamp)
    if record_type == TARGET_ASSIGNMENT_MEMBER:
        v = _decode_value(tamv.SPEC, value)
        return ShareGroupTargetAssignmentMemberRecord(group, member_id or "", tuple(
            (tp.topic_id, tuple(sorted(tp.partitions))) for tp in v.topic_partitions))
    if record_type == CURRENT_MEMBER_ASSIGNMENT:
        v = _decode_value(cmav.SPEC, value)
        return ShareGroupCurrentMemberAssignmentRecord(group, member_id or "", v.member_epoch, v.previous_member_epoch,
                                                       v.state, tuple((tp.topic_id, tuple(sorted(tp.partitions)))
                                                                      for tp in v.assigned_partitions))
    v = _decode_value(spv.SPEC, value)

    def infos(items) -> TopicPartitionsInfo:
        return tuple((i.topic_id, i.topic_name, tuple(sorted(i.partitions))) for i in items)

    return ShareGroupStatePartitionMetadataRecord(group, infos(v.initialized_topics), infos(v.initializing_topics),
                                                  tuple((i.topic_id, i.topic_name) for i in v.deleting_topics))


for _record_type in sorted(SHARE_RECORD_TYPES):
    register_record_codec(_record_type, SHARE_RECORD_CLASSES, encode_share_record, decode_share_record)
