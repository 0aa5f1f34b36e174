"""Consumer group records <-> `__consumer_offsets` key and value bytes, in Kafka's formats.

Keys: int16 record type (3 group metadata, 5 member metadata, 6 target assignment metadata,
7 target assignment member, 8 current member assignment, 16 regular expression) + the key struct
v0. Values: int16 version 0 + the flexible value struct. Record type 4 (the subscription metadata
Kafka 4.0 wrote, replaced by the group's MetadataHash in 4.1) is read and ignored.
"""

from __future__ import annotations

import struct
from io import BytesIO

from .. import codec
from ..messages import consumer_group_current_member_assignment_key as cmak
from ..messages import consumer_group_current_member_assignment_value as cmav
from ..messages import consumer_group_member_metadata_key as mmk
from ..messages import consumer_group_member_metadata_value as mmv
from ..messages import consumer_group_metadata_key as gmk
from ..messages import consumer_group_metadata_value as gmv
from ..messages import consumer_group_regular_expression_key as rek
from ..messages import consumer_group_regular_expression_value as rev
from ..messages import consumer_group_target_assignment_member_key as tamk
from ..messages import consumer_group_target_assignment_member_value as tamv
from ..messages import consumer_group_target_assignment_metadata_key as tak
from ..messages import consumer_group_target_assignment_metadata_value as tav

from .consumer_records import ConsumerGroupCurrentMemberAssignmentRecord as CurrentAssignment
from .consumer_records import ConsumerGroupCurrentMemberAssignmentTombstone as CurrentAssignmentTombstone
from .consumer_records import ConsumerGroupMemberMetadataRecord as MemberMetadata
from .consumer_records import ConsumerGroupMemberMetadataTombstone as MemberMetadataTombstone
from .consumer_records import ConsumerGroupMetadataRecord as GroupMetadata
from .consumer_records import ConsumerGroupMetadataTombstone as GroupMetadataTombstone
from .consumer_records import ConsumerGroupRegularExpressionRecord as Regex
from .consumer_records import ConsumerGroupRegularExpressionTombstone as RegexTombstone
from .consumer_records import ConsumerGroupTargetAssignmentMemberRecord as TargetMember
from .consumer_records import ConsumerGroupTargetAssignmentMemberTombstone as TargetMemberTombstone
from .consumer_records import ConsumerGroupTargetAssignmentMetadataRecord as TargetMetadata
from .consumer_records import ConsumerGroupTargetAssignmentMetadataTombstone as TargetMetadataTombstone
from .consumer_records import ClassicMemberMetadata, ConsumerRecord, topic_ids_sorted

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
CONSUMER_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
_I16 = struct.Struct(">h")


class IgnoredRecord(ValueError):
    """A record type Kafka wrote that this coordinator keeps no state for."""


def _key(record_type: int, spec, obj) -> bytes:
    return _I16.pack(record_type) + codec.encode(spec, 0, obj)


def _value(spec, obj) -> bytes:
    return _I16.pack(0) + codec.encode(spec, 0, obj)


def _cmav_parts(assignment) -> list:
    return [cmav.TopicPartitions(topic_id=t, partitions=ps, assignment_epochs=None) for t, ps in topic_ids_sorted(assignment)]


def encode_consumer_record(r: ConsumerRecord) -> tuple[bytes, bytes | None]:
    match r:
        case GroupMetadata():
            return (_key(GROUP_METADATA, gmk.SPEC, gmk.ConsumerGroupMetadataKey(r.group)),
                    _value(gmv.SPEC, gmv.ConsumerGroupMetadataValue(epoch=r.epoch, metadata_hash=r.metadata_hash)))
        case GroupMetadataTombstone():
            return _key(GROUP_METADATA, gmk.SPEC, gmk.ConsumerGroupMetadataKey(r.group)), None
        case MemberMetadata():
            return (_key(MEMBER_METADATA, mmk.SPEC, mmk.ConsumerGroupMemberMetadataKey(r.group, r.member_id)),
                    _value(mmv.SPEC, mmv.ConsumerGroupMemberMetadataValue(
                        instance_id=r.instance_id, rack_id=r.rack_id, client_id=r.client_id,
                        client_host=r.client_host, subscribed_topic_names=list(r.subscribed_topic_names),
                        subscribed_topic_regex=r.subscribed_topic_regex,
                        rebalance_timeout_ms=r.rebalance_timeout_ms, server_assignor=r.server_assignor,
                        classic_member_metadata=None if r.classic is None else mmv.ClassicMemberMetadata(
                            session_timeout_ms=r.classic.session_timeout_ms,
                            supported_protocols=[mmv.ClassicProtocol(n, m) for n, m in r.classic.supported_protocols],
                        ))))
        case MemberMetadataTombstone():
            return _key(MEMBER_METADATA, mmk.SPEC, mmk.ConsumerGroupMemberMetadataKey(r.group, r.member_id)), None
        case TargetMetadata():
            return (_key(TARGET_ASSIGNMENT_METADATA, tak.SPEC, tak.ConsumerGroupTargetAssignmentMetadataKey(r.group)),
                    _value(tav.SPEC, tav.ConsumerGroupTargetAssignmentMetadataValue(
                        assignment_epoch=r.assignment_epoch, assignment_timestamp=r.assignment_timestamp)))
        case TargetMetadataTombstone():
            return _key(TARGET_ASSIGNMENT_METADATA, tak.SPEC, tak.ConsumerGroupTargetAssignmentMetadataKey(r.group)), None
        case TargetMember():
            return (_key(TARGET_ASSIGNMENT_MEMBER, tamk.SPEC,
                         tamk.ConsumerGroupTargetAssignmentMemberKey(r.group, r.member_id)),
                    _value(tamv.SPEC, tamv.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=[
                        tamv.TopicPartition(topic_id=t, partitions=ps) for t, ps in topic_ids_sorted(r.partitions)])))
        case TargetMemberTombstone():
            return _key(TARGET_ASSIGNMENT_MEMBER, tamk.SPEC,
                        tamk.ConsumerGroupTargetAssignmentMemberKey(r.group, r.member_id)), None
        case CurrentAssignment():
            return (_key(CURRENT_MEMBER_ASSIGNMENT, cmak.SPEC,
                         cmak.ConsumerGroupCurrentMemberAssignmentKey(r.group, r.member_id)),
                    _value(cmav.SPEC, cmav.ConsumerGroupCurrentMemberAssignmentValue(
                        member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch, state=r.state,
                        assigned_partitions=_cmav_parts(r.assigned_partitions),
                        partitions_pending_revocation=_cmav_parts(r.partitions_pending_revocation))))
        case CurrentAssignmentTombstone():
            return _key(CURRENT_MEMBER_ASSIGNMENT, cmak.SPEC,
                        cmak.ConsumerGroupCurrentMemberAssignmentKey(r.group, r.member_id)), None
        case Regex():
            return (_key(REGULAR_EXPRESSION, rek.SPEC, rek.ConsumerGroupRegularExpressionKey(r.group, r.regex)),
                    _value(rev.SPEC, rev.ConsumerGroupRegularExpressionValue(
                        topics=list(r.topics), version=r.version, timestamp=r.timestamp)))
        case RegexTombstone():
            return _key(REGULAR_EXPRESSION, rek.SPEC, rek.ConsumerGroupRegularExpressionKey(r.group, r.regex)), None
    raise TypeError(f"not a consumer group record: {r!r}")


def _assignment(parts) -> dict:
    return {p.topic_id: frozenset(p.partitions) for p in parts if p.partitions}


def decode_consumer_record(record_type: int, key: bytes, value: bytes | None) -> ConsumerRecord:
    k_io = BytesIO(key)
    k_io.seek(2)
    v = None if value is None else value[2:]
    if record_type == GROUP_METADATA:
        k = codec.decode(gmk.SPEC, 0, k_io)
        if v is None:
            return GroupMetadataTombstone(k.group_id)
        d = codec.decode(gmv.SPEC, 0, v)
        return GroupMetadata(k.group_id, d.epoch, d.metadata_hash)
    if record_type == MEMBER_METADATA:
        k = codec.decode(mmk.SPEC, 0, k_io)
        if v is None:
            return MemberMetadataTombstone(k.group_id, k.member_id)
        d = codec.decode(mmv.SPEC, 0, v)
        cm = d.classic_member_metadata
        classic = None if cm is None else ClassicMemberMetadata(
            cm.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in cm.supported_protocols))
        return MemberMetadata(k.group_id, k.member_id, d.instance_id, d.rack_id, d.client_id, d.client_host,
                              tuple(d.subscribed_topic_names), d.subscribed_topic_regex, d.rebalance_timeout_ms,
                              d.server_assignor, classic)
    if record_type == TARGET_ASSIGNMENT_METADATA:
        k = codec.decode(tak.SPEC, 0, k_io)
        if v is None:
            return TargetMetadataTombstone(k.group_id)
        d = codec.decode(tav.SPEC, 0, v)
        return TargetMetadata(k.group_id, d.assignment_epoch, d.assignment_timestamp)
    if record_type == TARGET_ASSIGNMENT_MEMBER:
        k = codec.decode(tamk.SPEC, 0, k_io)
        if v is None:
            return TargetMemberTombstone(k.group_id, k.member_id)
        d = codec.decode(tamv.SPEC, 0, v)
        return TargetMember(k.group_id, k.member_id, _assignment(d.topic_partitions))
    if record_type == CURRENT_MEMBER_ASSIGNMENT:
        k = codec.decode(cmak.SPEC, 0, k_io)
        if v is None:
            return CurrentAssignmentTombstone(k.group_id, k.member_id)
        d = codec.decode(cmav.SPEC, 0, v)
        return CurrentAssignment(k.group_id, k.member_id, d.member_epoch, d.previous_member_epoch, d.state,
                                 _assignment(d.assigned_partitions), _assignment(d.partitions_pending_revocation))
    if record_type == REGULAR_EXPRESSION:
        k = codec.decode(rek.SPEC, 0, k_io)
        if v is None:
            return RegexTombstone(k.group_id, k.regular_expression)
        d = codec.decode(rev.SPEC, 0, v)
        return Regex(k.group_id, k.regular_expression, tuple(d.topics), d.version, d.timestamp)
    raise IgnoredRecord(f"record type {record_type}")
