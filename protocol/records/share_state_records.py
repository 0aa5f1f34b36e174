"""`__share_group_state` records (KIP-932; Kafka's share coordinator) <-> key and value bytes.

Keys: int16 record type (0 ShareSnapshot, 1 ShareUpdate) + the key struct v0 (group id, topic id,
partition). Values: int16 version 0 + the flexible value struct. A snapshot is a share-partition's
whole state; an update carries the batches that changed since the snapshot it follows.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from io import BytesIO

from .. import codec
from ..messages import share_snapshot_key as snk
from ..messages import share_snapshot_value as snv
from ..messages import share_update_key as upk
from ..messages import share_update_value as upv

SNAPSHOT, UPDATE = 0, 1
_I16 = struct.Struct(">h")

StateBatches = tuple[tuple[int, int, int, int], ...]  # (first, last, delivery state, delivery count)


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One record of `__share_group_state`: a snapshot (the whole state) or an update (changed batches;
    `start_offset` -1 when the start did not move)."""

    record_type: int
    group: str
    topic_id: uuid.UUID
    partition: int
    snapshot_epoch: int
    start_offset: int
    batches: StateBatches
    state_epoch: int = 0
    leader_epoch: int = 0
    create_timestamp: int = 0
    write_timestamp: int = 0
    tombstone: bool = False  # the share-partition's state deleted (DeleteShareGroupState)

    @property
    def key(self) -> tuple[str, uuid.UUID, int]:
        return self.group, self.topic_id, self.partition


def encode_share_state(r: ShareStateRecord) -> tuple[bytes, bytes | None]:
    if r.record_type == SNAPSHOT:
        key = _I16.pack(SNAPSHOT) + codec.encode(snk.SPEC, 0, snk.ShareSnapshotKey(
            group_id=r.group, topic_id=r.topic_id, partition=r.partition))
        if r.tombstone:
            return key, None
        value = snv.ShareSnapshotValue(
            snapshot_epoch=r.snapshot_epoch, state_epoch=r.state_epoch, leader_epoch=r.leader_epoch,
            start_offset=r.start_offset, create_timestamp=r.create_timestamp, write_timestamp=r.write_timestamp,
            state_batches=[snv.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                           for f, last, s, c in r.batches])
        return key, _I16.pack(0) + codec.encode(snv.SPEC, 0, value)
    key = _I16.pack(UPDATE) + codec.encode(upk.SPEC, 0, upk.ShareUpdateKey(
        group_id=r.group, topic_id=r.topic_id, partition=r.partition))
    update = upv.ShareUpdateValue(
        snapshot_epoch=r.snapshot_epoch, leader_epoch=r.leader_epoch, start_offset=r.start_offset,
        state_batches=[upv.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                       for f, last, s, c in r.batches])
    return key, _I16.pack(0) + codec.encode(upv.SPEC, 0, update)


def decode_share_state(key: bytes, value: bytes | None) -> ShareStateRecord:
    """The record (a tombstone: the share-partition's state deleted). Raises ValueError for a record
    type this topic does not hold."""
    (record_type,) = _I16.unpack_from(key)
    if record_type not in (SNAPSHOT, UPDATE):
        raise ValueError(f"not a __share_group_state record type: {record_type}")
    key_io = BytesIO(key)
    key_io.seek(2)
    k = codec.decode(snk.SPEC if record_type == SNAPSHOT else upk.SPEC, 0, key_io)
    if value is None:
        return ShareStateRecord(record_type, k.group_id, k.topic_id, k.partition, -1, -1, (), tombstone=True)
    (version,) = _I16.unpack_from(value)
    v = codec.decode(snv.SPEC if record_type == SNAPSHOT else upv.SPEC, version, value[2:])
    batches = tuple((b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches)
    if record_type == SNAPSHOT:
        return ShareStateRecord(SNAPSHOT, k.group_id, k.topic_id, k.partition, v.snapshot_epoch, v.start_offset,
                                batches, v.state_epoch, v.leader_epoch, v.create_timestamp, v.write_timestamp)
    return ShareStateRecord(UPDATE, k.group_id, k.topic_id, k.partition, v.snapshot_epoch, v.start_offset,
                            batches, leader_epoch=v.leader_epoch)
