"""Coordinator records <-> the key and value bytes of `__consumer_offsets`, in Kafka's formats.

A key is `int16 record type` + the key struct (version 0, non-flexible); a value is
`int16 value version` + the value struct; a null value is a tombstone. We write what Kafka 4
writes: OffsetCommitValue v4 (v1 when the commit carried an explicit expire timestamp) and
GroupMetadataValue v3. Every version Kafka ever wrote is read back.
"""

from __future__ import annotations

import importlib
import struct
from io import BytesIO
from typing import Any

from .classic_records import (
    GroupMetadataMember,
    GroupMetadataRecord,
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
    Record,
)
from .consumer_records import is_consumer_record
from .registered import _DECODERS, _ENCODERS, register_record_codec  # noqa: F401 (re-exported)
from .. import codec
from ..messages import group_metadata_key as gmk
from ..messages import group_metadata_value as gmv
from ..messages import offset_commit_key as ock
from ..messages import offset_commit_value as ocv

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
OFFSET_COMMIT_VALUE_VERSION = 4
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
_I16 = struct.Struct(">h")
# The record types whose codec registers itself when its module is first imported (share groups,
# KIP-932: share_records.SHARE_RECORD_TYPES; streams groups, KIP-1071: streams_records.STREAMS_RECORD_TYPES),
# named here without importing them: decode_record imports the module with the first such record it
# meets, so a reader that never built that group type (the pipeline, a tool) decodes them all the same.
_SELF_REGISTERING = {**dict.fromkeys(range(10, 16), "share_records"),
                     **dict.fromkeys((17, 19, 20, 21, 22, 23), "streams_records")}


class UnknownRecordType(ValueError):
    """A record type this coordinator does not manage (KIP-848, share or streams groups)."""


def _encode(spec, version: int, obj) -> bytes:
    return _I16.pack(version) + codec.encode(spec, version, obj)


def _key(record_type: int, spec, obj) -> bytes:
    # The key's leading int16 is the record type; the key struct itself is always version 0.
    return _I16.pack(record_type) + codec.encode(spec, 0, obj)


def encode_offset_commit_generic(record: OffsetCommitRecord) -> tuple[bytes, bytes]:
    """A commit's key and value through the generated codec (the owner of the format)."""
    key = _key(OFFSET_COMMIT, ock.SPEC, ock.OffsetCommitKey(record.group, record.topic, record.partition))
    if record.expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        value = ocv.OffsetCommitValue(offset=record.offset, metadata=record.metadata,
                                      commit_timestamp=record.commit_timestamp,
                                      expire_timestamp=record.expire_timestamp)
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
        value = ocv.OffsetCommitValue(offset=record.offset, leader_epoch=record.leader_epoch,
                                      metadata=record.metadata, commit_timestamp=record.commit_timestamp)
    return key, _encode(ocv.SPEC, version, value)


def _encode_offset_commit(record: OffsetCommitRecord) -> tuple[bytes, bytes] | None:
    """The common commit (no expire timestamp, metadata under 127 bytes, names that fit an int16
    string) packed at fixed offsets: the same bytes the generic codec writes (a test compares them),
    without building its message objects. None for anything else, which the generic codec writes."""
    metadata = record.metadata
    if record.expire_timestamp is not None or metadata is None:
        return None
    group, topic, raw = record.group.encode(), record.topic.encode(), metadata.encode()
    if len(group) > 0x7FFF or len(topic) > 0x7FFF or len(raw) >= 127:
        return None
    try:
        key = b"".join((_KEY_HEAD.pack(OFFSET_COMMIT, len(group)), group, _I16.pack(len(topic)), topic,
                        _I32_AT.pack(record.partition)))
        value = b"".join((_VALUE_HEAD_V4.pack(OFFSET_COMMIT_VALUE_VERSION, record.offset, record.leader_epoch,
                                              len(raw) + 1), raw, _VALUE_TAIL_V4.pack(record.commit_timestamp, 0)))
    except struct.error:
        return None  # out of range: the generic codec reports it
    return key, value


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """(key, value) bytes for one record; value None is a tombstone."""
    if isinstance(record, OffsetCommitRecord):
        return _encode_offset_commit(record) or encode_offset_commit_generic(record)
    if isinstance(record, OffsetCommitTombstone):
        return _key(OFFSET_COMMIT, ock.SPEC, ock.OffsetCommitKey(record.group, record.topic, record.partition)), None
    if isinstance(record, GroupMetadataRecord):
        key = _key(GROUP_METADATA, gmk.SPEC, gmk.GroupMetadataKey(record.group))
        group_value = gmv.GroupMetadataValue(
            protocol_type=record.protocol_type,
            generation=record.generation,
            protocol=record.protocol,
            leader=record.leader,
            current_state_timestamp=record.current_state_timestamp,
            members=[
                gmv.MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, rebalance_timeout=m.rebalance_timeout,
                    session_timeout=m.session_timeout, subscription=m.subscription, assignment=m.assignment,
                )
                for m in record.members
            ],
        )
        return key, _encode(gmv.SPEC, GROUP_METADATA_VALUE_VERSION, group_value)
    if isinstance(record, GroupMetadataTombstone):
        return _key(GROUP_METADATA, gmk.SPEC, gmk.GroupMetadataKey(record.group)), None
    if is_consumer_record(record):
        # imported with the first consumer-group (KIP-848) record: a classic-only broker never needs it
        from .consumer_codec import encode_consumer_record

        return encode_consumer_record(record)
    encode = _ENCODERS.get(type(record))
    if encode is not None:
        return encode(record)
    raise TypeError(f"not a coordinator record: {record!r}")


_KEY_HEAD = struct.Struct(">hh")  # record type, group length
_VALUE_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length (v3)
_VALUE_HEAD_V4 = struct.Struct(">hqiB")  # version, offset, leader epoch, metadata compact length (< 128)
_I16_AT = struct.Struct(">h")
_I32_AT = struct.Struct(">i")
_I64_AT = struct.Struct(">q")
_VALUE_TAIL_V4 = struct.Struct(">qB")  # commit timestamp, no tagged fields


def _decode_offset_commit(key: bytes, value: bytes | None) -> OffsetCommitRecord | OffsetCommitTombstone | None:
    """The common layouts (what we and Kafka 2.1+ write: value v3, or v4 without tagged fields),
    unpacked at fixed offsets; None for anything else, which the generic codec then reads."""
    n = len(key)
    if n < 10:
        return None
    _, glen = _KEY_HEAD.unpack_from(key)
    tat = 4 + glen
    if glen < 0 or tat + 2 > n:
        return None
    (tlen,) = _I16_AT.unpack_from(key, tat)
    if tlen < 0 or tat + 2 + tlen + 4 != n:
        return None
    group = key[4:tat].decode()
    topic = key[tat + 2 : tat + 2 + tlen].decode()
    (partition,) = _I32_AT.unpack_from(key, n - 4)
    if value is None:
        return OffsetCommitTombstone(group, topic, partition)
    m = len(value)
    if m < 24:
        return None
    version = value[1] if value[0] == 0 else -1
    if version == 4:
        _, offset, epoch, mlen = _VALUE_HEAD_V4.unpack_from(value)
        mlen -= 1  # compact string: length + 1, below 128 in one byte
        if mlen < 0 or mlen >= 127 or 15 + mlen + 9 != m or value[m - 1] != 0:  # no tagged fields
            return None
        metadata = value[15 : 15 + mlen].decode()
    elif version == 3:
        _, offset, epoch, mlen = _VALUE_HEAD.unpack_from(value)
        if mlen < 0 or 16 + mlen + 8 != m:
            return None
        metadata = value[16 : 16 + mlen].decode()
    else:
        return None
    (commit_timestamp,) = _I64_AT.unpack_from(value, m - 9 if version == 4 else m - 8)
    return OffsetCommitRecord(group, topic, partition, offset, epoch, metadata, commit_timestamp, None)


def decode_record(key: bytes | None, value: bytes | None) -> Record:
    """The coordinator record for one `__consumer_offsets` record's key and value."""
    if key is None or len(key) < 2:
        raise ValueError("__consumer_offsets record without a key")
    (record_type,) = _I16.unpack_from(key)
    if record_type == OFFSET_COMMIT:
        fast = _decode_offset_commit(key, value)
        if fast is not None:
            return fast
    key_io = BytesIO(key)
    key_io.seek(2)
    if record_type in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        k = codec.decode(ock.SPEC, 0, key_io)
        if value is None:
            return OffsetCommitTombstone(k.group, k.topic, k.partition)
        (version,) = _I16.unpack_from(value)
        v = codec.decode(ocv.SPEC, version, value[2:])
        expire = v.expire_timestamp if version == OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY else None
        return OffsetCommitRecord(k.group, k.topic, k.partition, v.offset, v.leader_epoch, v.metadata,
                                  v.commit_timestamp, expire if expire is not None and expire >= 0 else None)
    if record_type == GROUP_METADATA:
        k = codec.decode(gmk.SPEC, 0, key_io)
        if value is None:
            return GroupMetadataTombstone(k.group)
        (version,) = _I16.unpack_from(value)
        v = codec.decode(gmv.SPEC, version, value[2:])
        return GroupMetadataRecord(
            group=k.group,
            protocol_type=v.protocol_type,
            generation=v.generation,
            protocol=v.protocol,
            leader=v.leader,
            current_state_timestamp=v.current_state_timestamp,
            members=tuple(
                GroupMetadataMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout if version >= 1 else m.session_timeout,
                                    m.session_timeout, m.subscription, m.assignment)
                for m in v.members
            ),
        )
    decode = _DECODERS.get(record_type)
    if decode is None and record_type in _SELF_REGISTERING:
        importlib.import_module(f"{__package__}.{_SELF_REGISTERING[record_type]}")
        decode = _DECODERS.get(record_type)
    if decode is not None:
        return decode(key, value)
    from .consumer_codec import CONSUMER_RECORD_TYPES, IgnoredRecord, decode_consumer_record

    if record_type in CONSUMER_RECORD_TYPES:
        try:
            return decode_consumer_record(record_type, key, value)
        except IgnoredRecord:
            pass
    raise UnknownRecordType(f"record type {record_type}")
