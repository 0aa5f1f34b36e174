"""The consumer protocol embedded in JoinGroup and SyncGroup: ConsumerProtocolSubscription and
ConsumerProtocolAssignment bytes (`int16 version` + the struct at that version). The one owner of
reading and writing them: the coordinator (online migration and downgrade), the admin CLI, the
pipeline and the benchmarks all decode an assignment here.

A version past the newest we know is read as the newest: later versions only append fields, so
that version reads any newer one's prefix (Kafka's ConsumerProtocol does the same).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import codec
from .messages import consumer_protocol_assignment as cpa
from .messages import consumer_protocol_subscription as cps

MAX_VERSION = 3  # ConsumerProtocolSubscription and ConsumerProtocolAssignment, Kafka 4


def _version(data: bytes) -> int:
    return min(max(int.from_bytes(data[:2], "big", signed=True), 0), MAX_VERSION)


def decode_assignment(data: bytes) -> cpa.ConsumerProtocolAssignment:
    """An assignment; empty bytes are the empty assignment. Garbage raises (MalformedMessage, or
    ValueError for text that is not UTF-8): each caller says what an undecodable one means to it."""
    if not data:
        return cpa.ConsumerProtocolAssignment()
    return codec.decode(cpa.SPEC, _version(data), data[2:])


def assigned_partitions(data: bytes) -> list[tuple[str, list[int]]]:
    """(topic, partitions) of an assignment, in its order."""
    return [(tp.topic, list(tp.partitions)) for tp in decode_assignment(data).assigned_partitions]


def encode_assignment(partitions: Iterable[tuple[str, list[int]]], version: int) -> bytes:
    """(topic, partitions) pairs as assignment bytes of `version` (clamped to what we know)."""
    version = min(max(version, 0), MAX_VERSION)
    value = cpa.ConsumerProtocolAssignment(
        assigned_partitions=[cpa.TopicPartition(topic, parts) for topic, parts in partitions], user_data=None)
    return version.to_bytes(2, "big", signed=True) + codec.encode(cpa.SPEC, version, value)


def decode_subscription(metadata: bytes) -> cps.ConsumerProtocolSubscription:
    """Parsed at its version; a body too short for it is read as v0, the prefix of every version
    (some clients write a v1 header over a v0 body)."""
    try:
        return codec.decode(cps.SPEC, _version(metadata), metadata[2:])
    except Exception:  # noqa: BLE001 - retried as v0; a v0 failure propagates
        return codec.decode(cps.SPEC, 0, metadata[2:])
