"""`__share_group_state`'s records (ShareSnapshot / ShareUpdate in Kafka's formats) and their replay:
a snapshot replaces a share-partition's state, an update of its snapshot epoch lays its batches over
it, and the coordinator key's partition is Kafka's."""

from __future__ import annotations

import uuid

from kbroker.broker.coordinators.share_state import kafka_uuid, partition_for
from kbroker.coordinator.share.persisted import PersistedStates, overlay
from kbroker.protocol.records.share_state_records import (SNAPSHOT, UPDATE, ShareStateRecord, decode_share_state,
                                                          encode_share_state)

TID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_snapshot_bytes_are_kafkas():
    r = ShareStateRecord(SNAPSHOT, "g", TID, 3, 1, 10, ((10, 12, 2, 1),), create_timestamp=5, write_timestamp=6)
    key, value = encode_share_state(r)
    # key: type 0, string "g", uuid, int32 partition (key v0 is not flexible)
    assert key == bytes.fromhex("0000" "0001") + b"g" + TID.bytes + bytes.fromhex("00000003")
    # value: version 0, epochs, start offset, timestamps, compact array of 1 batch, empty tagged fields
    assert value[:2] == b"\x00\x00" and value[-1] == 0
    assert decode_share_state(key, value) == r


def test_update_round_trip_and_a_foreign_record_type():
    u = ShareStateRecord(UPDATE, "g", TID, 0, 2, -1, ((14, 15, 4, 5),))
    assert decode_share_state(*encode_share_state(u)) == u
    key, value = encode_share_state(u)
    try:
        decode_share_state(b"\x00\x07" + key[2:], value)
    except ValueError:
        pass
    else:
        raise AssertionError("record type 7 accepted")


def test_replay_snapshot_then_updates():
    states = PersistedStates()
    key = ("g", TID, 0)
    states.replay(ShareStateRecord(SNAPSHOT, "g", TID, 0, 0, 5, ((5, 9, 0, 1),)))
    states.replay(ShareStateRecord(UPDATE, "g", TID, 0, 0, -1, ((6, 7, 2, 1),)))
    assert states.states[key].batches == [(5, 5, 0, 1), (6, 7, 2, 1), (8, 9, 0, 1)]
    states.replay(ShareStateRecord(UPDATE, "g", TID, 0, 0, 7, ((9, 9, 4, 2),)))
    assert states.states[key].start == 7 and states.states[key].batches == [(7, 7, 2, 1), (8, 8, 0, 1), (9, 9, 4, 2)]
    states.replay(ShareStateRecord(UPDATE, "g", TID, 0, 5, -1, ((8, 8, 2, 1),)))  # another snapshot's: ignored
    assert states.states[key].batches[1] == (8, 8, 0, 1)
    states.replay(ShareStateRecord(SNAPSHOT, "g", TID, 0, 1, 10, ()))
    assert states.states[key].start == 10 and states.states[key].batches == []


def test_overlay_splits_and_drops_below_start():
    assert overlay([(0, 9, 0, 1)], [(3, 4, 2, 1)], 2) == [(2, 2, 0, 1), (3, 4, 2, 1), (5, 9, 0, 1)]


def test_coordinator_key_partition_is_kafkas():
    # Kafka's Uuid.toString and SharePartitionKey.asCoordinatorKey: "group:topicId:partition"
    assert kafka_uuid(TID) == "EjRWeBI0VngSNFZ4EjRWeA"
    from kbroker.coordinator.partitioning import java_string_hash, kafka_abs
    assert partition_for("g", TID, 3, 50) == kafka_abs(java_string_hash("g:EjRWeBI0VngSNFZ4EjRWeA:3")) % 50
