"""TransactionLogKey/Value encode/decode round trips, and the exact v0 bytes."""

from __future__ import annotations

import struct

import pytest

from kbroker.protocol.records.transaction_log import (
    TxnLogFormatError,
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_key_round_trip_and_bytes():
    raw = encode_key("my-txn")
    assert raw == b"\x00\x00\x00\x06my-txn"
    assert decode_key(raw) == "my-txn"


def test_value_v0_round_trip_and_bytes():
    value = TxnLogValue(7, 3, 60000, 1, {"b": [2, 0], "a": [1]}, 123, 100)
    raw = encode_value(value)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60000, 1) + struct.pack(">i", 2)
                + b"\x00\x01a" + struct.pack(">ii", 1, 1)
                + b"\x00\x01b" + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">qq", 123, 100))
    assert raw == expected
    back = decode_value(raw)
    assert back.partitions == {"a": [1], "b": [0, 2]}
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.status) == (7, 3, 60000, 1)
    assert (back.last_update_ms, back.start_ms) == (123, 100)


def test_value_null_partitions_and_tombstone():
    raw = encode_value(TxnLogValue(1, 0, 1000, 0, None, 5, -1))
    assert decode_value(raw).partitions is None
    assert decode_value(None) is None


def test_value_v1_flexible_with_tagged_fields():
    body = struct.pack(">hqhib", 1, 9, 2, 30000, 4)
    body += bytes([2]) + bytes([2]) + b"t" + bytes([2]) + struct.pack(">i", 5) + bytes([0])  # one topic, one partition
    body += struct.pack(">qq", 11, 10)
    body += bytes([1, 0, 8]) + struct.pack(">q", 4)  # tag 0: PreviousProducerId
    value = decode_value(body)
    assert value.partitions == {"t": [5]} and value.previous_producer_id == 4 and value.status == 4
    assert encode_value(value) == body  # written back byte for byte (Kafka's layout)


def test_value_v1_written_with_the_transactions_v2_fields():
    """transaction.version 1+ writes v1 (Kafka's transactionLogValueVersion): the client's transaction
    version (tag 2) and the next producer id (tag 1) survive a restart; defaults are not written."""
    value = TxnLogValue(9, 32767, 30000, 2, {"t": [5]}, 11, 10, previous_producer_id=-1, next_producer_id=12,
                        client_transaction_version=2, version=1)
    raw = encode_value(value)
    assert raw.endswith(bytes([2, 1, 8]) + struct.pack(">q", 12) + bytes([2, 2]) + struct.pack(">h", 2))
    back = decode_value(raw)
    assert (back.next_producer_id, back.client_transaction_version, back.previous_producer_id) == (12, 2, -1)
    assert encode_value(TxnLogValue(1, 0, 1000, 0, None, 5, -1, version=1))[17:18] == bytes([0])  # null partitions


def test_bad_input_raises_format_error():
    with pytest.raises(TxnLogFormatError):
        decode_value(b"\x00\x05")
    with pytest.raises(TxnLogFormatError):
        decode_value(b"\x00\x00\x00")
    with pytest.raises(TxnLogFormatError):
        decode_key(b"\x00\x01\x00\x01a")
