"""Streams group records (KIP-1071) <-> `__consumer_offsets` key and value bytes, in Kafka's formats.

Keys: int16 record type (17 group metadata, 19 member metadata, 20 target assignment metadata,
21 target assignment member, 22 current member assignment, 23 topology) + the key struct v0. Values:
int16 version 0 + the flexible value struct (the generated StreamsGroup*Value message); a null value
is a tombstone. One record class carries them all: its value is the generated message itself, so the
format is Kafka's JSON and nothing else. The codec registers itself with the `__consumer_offsets`
codec when this module is imported: the streams group type imports it, and codec.decode_record with the
first streams group record it meets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from .. import codec
from ..messages import streams_group_current_member_assignment_key as cmak
from ..messages import streams_group_current_member_assignment_value as cmav
from ..messages import streams_group_member_metadata_key as mmk
from ..messages import streams_group_member_metadata_value as mmv
from ..messages import streams_group_metadata_key as gmk
from ..messages import streams_group_metadata_value as gmv
from ..messages import streams_group_target_assignment_member_key as tamk
from ..messages import streams_group_target_assignment_member_value as tamv
from ..messages import streams_group_target_assignment_metadata_key as tak
from ..messages import streams_group_target_assignment_metadata_value as tav
from ..messages import streams_group_topology_key as tk
from ..messages import streams_group_topology_value as tv
from .codec import register_record_codec

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23
PER_MEMBER = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
_I16 = struct.Struct(">h")

# record type -> (key spec, key class, value spec, value class)
_FORMATS: dict[int, tuple[Any, type, Any, type]] = {
    GROUP_METADATA: (gmk.SPEC, gmk.StreamsGroupMetadataKey, gmv.SPEC, gmv.StreamsGroupMetadataValue),
    MEMBER_METADATA: (mmk.SPEC, mmk.StreamsGroupMemberMetadataKey, mmv.SPEC, mmv.StreamsGroupMemberMetadataValue),
    TARGET_ASSIGNMENT_METADATA: (tak.SPEC, tak.StreamsGroupTargetAssignmentMetadataKey, tav.SPEC,
                                 tav.StreamsGroupTargetAssignmentMetadataValue),
    TARGET_ASSIGNMENT_MEMBER: (tamk.SPEC, tamk.StreamsGroupTargetAssignmentMemberKey, tamv.SPEC,
                               tamv.StreamsGroupTargetAssignmentMemberValue),
    CURRENT_MEMBER_ASSIGNMENT: (cmak.SPEC, cmak.StreamsGroupCurrentMemberAssignmentKey, cmav.SPEC,
                                cmav.StreamsGroupCurrentMemberAssignmentValue),
    TOPOLOGY: (tk.SPEC, tk.StreamsGroupTopologyKey, tv.SPEC, tv.StreamsGroupTopologyValue),
}
STREAMS_RECORD_TYPES = frozenset(_FORMATS)


@dataclass(frozen=True, slots=True)
class StreamsRecord:
    """One streams group record: `member_id` set for the per-member types; `value` the generated
    StreamsGroup*Value of `record_type`, or None for a tombstone."""

    record_type: int
    group: str
    member_id: str | None
    value: Any


STREAMS_RECORD_CLASSES: tuple[type, ...] = (StreamsRecord,)


def encode_streams_record(r: StreamsRecord) -> tuple[bytes, bytes | None]:
    key_spec, key_cls, value_spec, value_cls = _FORMATS[r.record_type]
    key_obj = key_cls(r.group, r.member_id or "") if r.record_type in PER_MEMBER else key_cls(r.group)
    key = _I16.pack(r.record_type) + codec.encode(key_spec, 0, key_obj)
    if r.value is None:
        return key, None
    if not isinstance(r.value, value_cls):
        raise TypeError(f"record type {r.record_type} carries {value_cls.__name__}, not {type(r.value).__name__}")
    return key, _I16.pack(0) + codec.encode(value_spec, 0, r.value)


def decode_streams_record(key: bytes, value: bytes | None) -> StreamsRecord:
    (record_type,) = _I16.unpack_from(key)
    key_spec, _key_cls, value_spec, _value_cls = _FORMATS[record_type]
    key_io = BytesIO(key)
    key_io.seek(2)
    k = codec.decode(key_spec, 0, key_io)
    member_id = k.member_id if record_type in PER_MEMBER else None
    if value is None:
        return StreamsRecord(record_type, k.group_id, member_id, None)
    (version,) = _I16.unpack_from(value)
    return StreamsRecord(record_type, k.group_id, member_id, codec.decode(value_spec, version, value[2:]))


for _record_type in sorted(STREAMS_RECORD_TYPES):
    register_record_codec(_record_type, STREAMS_RECORD_CLASSES, encode_streams_record, decode_streams_record)
