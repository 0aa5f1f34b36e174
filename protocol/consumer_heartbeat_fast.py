"""A hand-written fast path for the steady ConsumerGroupHeartbeat (v0 and v1, KIP-848).

Every member of a consumer group heartbeats every few seconds with only its group, member id and
epoch set and every other field null; the coordinator answers with no assignment. The generated
codec (codec.py) spends most of that decode and encode in one call per field. These functions read
and write exactly that shape at fixed offsets: every string shorter than 127 bytes (one varint
byte), every array null, no tagged fields. Anything else (an array, a long string, a null where the
schema has none, bad UTF-8, a short frame, an assignment in the answer) goes to the generated codec,
which stays the owner of correctness: the answer is then exactly its answer.
tests/unit/test_consumer_heartbeat_fast_codec.py checks both against it, byte for byte and object for object.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any, Callable

from .messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from .messages.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse

VERSIONS = (0, 1)
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ih")  # throttle time, error code
_TAIL = struct.Struct(">iiBB")  # member epoch, heartbeat interval, null assignment (-1), no tagged fields

Parse = Callable[[BytesIO, Any], Any]
Build = Callable[[Any, BytesIO, Any], Any]


class _Unusual(Exception):
    """Not the steady shape: the generated codec reads (or writes) it."""


def _string(buf: bytes, pos: int, nullable: bool) -> tuple[str | None, int]:
    n = buf[pos] - 1
    if n < 0:
        if nullable:
            return None, pos + 1
        raise _Unusual
    if n >= 127:  # a multi-byte varint
        raise _Unusual
    end = pos + 1 + n
    if end > len(buf):
        raise _Unusual
    return buf[pos + 1:end].decode(), end


def _request(buf: bytes, pos: int, version: int) -> tuple[ConsumerGroupHeartbeatRequest, int]:
    group_id, pos = _string(buf, pos, False)
    member_id, pos = _string(buf, pos, False)
    (member_epoch,) = _I32.unpack_from(buf, pos)
    instance_id, pos = _string(buf, pos + 4, True)
    rack_id, pos = _string(buf, pos, True)
    (rebalance_timeout_ms,) = _I32.unpack_from(buf, pos)
    pos += 4
    if buf[pos]:  # subscribed topic names: an array
        raise _Unusual
    pos += 1
    regex = None
    if version >= 1:
        regex, pos = _string(buf, pos, True)
    assignor, pos = _string(buf, pos, True)
    if buf[pos] or buf[pos + 1]:  # owned topic partitions: an array; then tagged fields
        raise _Unusual
    return ConsumerGroupHeartbeatRequest(group_id, member_id, member_epoch, instance_id, rack_id,  # type: ignore[arg-type]
                                         rebalance_timeout_ms, None, regex, assignor, None), pos + 2


def request_parser(version: int, generic: Callable[[], Parse]) -> Parse:
    """The parse function of a ConsumerGroupHeartbeat request body of `version`: the fast path,
    otherwise the parse function `generic()` gives (called only then: the generated codec compiles
    on first use)."""

    def parse(io: BytesIO, this: Any) -> Any:
        start = io.tell()
        try:
            request, end = _request(io.getvalue(), start, version)
        except (_Unusual, IndexError, struct.error, UnicodeDecodeError):
            io.seek(start)
            return generic()(io, this)
        io.seek(end)  # where the body ended, as the generic parse leaves it: bytes after it are seen
        return request

    return parse


def _response(obj: ConsumerGroupHeartbeatResponse) -> bytes:
    if obj.assignment is not None:
        raise _Unusual
    parts = [_HEAD.pack(obj.throttle_time_ms, obj.error_code)]
    for text in (obj.error_message, obj.member_id):
        if text is None:
            parts.append(b"\x00")
            continue
        data = text.encode()
        if len(data) >= 127:
            raise _Unusual
        parts.append(bytes((len(data) + 1,)))
        parts.append(data)
    parts.append(_TAIL.pack(obj.member_epoch, obj.heartbeat_interval_ms, 0xFF, 0))
    return b"".join(parts)


def response_builder(generic: Callable[[], Build]) -> Build:
    """The build function of a ConsumerGroupHeartbeat v0/v1 response: the fast path, otherwise `generic()`'s."""

    def build(obj: Any, io: BytesIO, this: Any) -> Any:
        try:
            data = _response(obj)
        except Exception:  # noqa: BLE001 - the generated codec writes it, or raises its own error
            return generic()(obj, io, this)
        io.write(data)
        return obj

    return build
