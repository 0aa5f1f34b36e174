"""Just enough of ConsumerProtocolSubscription to learn a consumer's topics.

Every version starts with `int16 version`, then `Topics: []string` (non-flexible: int32 count,
then int16-length UTF-8 strings). Later fields are ignored, which is how Kafka itself reads it
("parsed with V0 which is the prefix of all versions").
"""

from __future__ import annotations

import struct


class SubscriptionDecodeError(ValueError):
    pass


def decode_subscription_topics(data: bytes) -> frozenset[str]:
    try:
        (_version,) = struct.unpack_from(">h", data, 0)
        (count,) = struct.unpack_from(">i", data, 2)
        if count < 0:
            raise SubscriptionDecodeError("null topic array")
        pos = 6
        topics: list[str] = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            if length < 0 or pos + length > len(data):
                raise SubscriptionDecodeError("bad topic length")
            topics.append(data[pos : pos + length].decode("utf-8"))
            pos += length
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionDecodeError(str(exc)) from exc


def encode_subscription_topics(topics: list[str], version: int = 0, user_data: bytes | None = None) -> bytes:
    """The v0 layout; used by tests and tools, not by the coordinator's decisions."""
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for topic in topics:
        raw = topic.encode("utf-8")
        out += struct.pack(">h", len(raw)) + raw
    if user_data is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(user_data)) + user_data
    return bytes(out)
