"""A hand-written fast path for the hottest group message: OffsetCommit v8 and v9 requests and responses.

Every consumer commits its offsets over and over, and the generated codec (codec.py) spends most of
a commit's decode and encode in one call per field. These functions read and write the common shape
at fixed offsets instead: every length and count in one varint byte, no tagged fields. Anything else
(a tagged field, a long string, a null where the schema has none, bad UTF-8, a short frame) goes to
the generated codec, which stays the owner of correctness: the answer is then exactly its answer.
tests/unit/test_offsets_fast_codec.py checks both against it, byte for byte and object for object.

v8 and v9 share one layout (v9 changed only what an unknown group answers); v10 names topics by id.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any, Callable

from .messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from .messages.offset_commit_response import OffsetCommitResponse
from .wire import ZERO_UUID

VERSIONS = (8, 9)
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">iqi")  # partition index, committed offset, committed leader epoch
_PARTITION_ANSWER = struct.Struct(">ihB")  # partition index, error code, no tagged fields

Parse = Callable[[BytesIO, Any], Any]
Build = Callable[[Any, BytesIO, Any], Any]


class _Unusual(Exception):
    """Not the common shape: the generated codec reads it."""


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


def _count(buf: bytes, pos: int) -> int:
    n = buf[pos] - 1
    if not 0 <= n < 127:
        raise _Unusual
    return n


def _request(buf: bytes, pos: int) -> tuple[OffsetCommitRequest, int]:
    group_id, pos = _string(buf, pos, False)
    (generation,) = _I32.unpack_from(buf, pos)
    member_id, pos = _string(buf, pos + 4, False)
    instance_id, pos = _string(buf, pos, True)
    topics = []
    n_topics = _count(buf, pos)
    pos += 1
    for _ in range(n_topics):
        name, pos = _string(buf, pos, False)
        partitions = []
        n_partitions = _count(buf, pos)
        pos += 1
        for _ in range(n_partitions):
            index, offset, epoch = _PARTITION.unpack_from(buf, pos)
            metadata, pos = _string(buf, pos + 16, True)
            if buf[pos]:
                raise _Unusual  # tagged fields
            pos += 1
            partitions.append(OffsetCommitRequestPartition(index, offset, epoch, metadata, -1))
        if buf[pos]:
            raise _Unusual
        pos += 1
        topics.append(OffsetCommitRequestTopic(name, ZERO_UUID, partitions))  # type: ignore[arg-type]
    if buf[pos]:
        raise _Unusual
    return OffsetCommitRequest(group_id, generation, member_id, instance_id, -1, topics), pos + 1  # type: ignore[arg-type]


def request_parser(generic: Callable[[], Parse]) -> Parse:
    """The parse function of an OffsetCommit v8/v9 request body: the fast path, otherwise the parse
    function `generic()` gives (called only then: the generated codec compiles on first use)."""

    def parse(io: BytesIO, this: Any) -> Any:
        start = io.tell()
        try:
            request, end = _request(io.getvalue(), start)
        except (_Unusual, IndexError, struct.error, UnicodeDecodeError):
            io.seek(start)
            return generic()(io, this)
        io.seek(end)  # where the body ended, as the generic parse leaves it: bytes after it are seen
        return request

    return parse


def _response(obj: OffsetCommitResponse) -> bytes:
    topics = obj.topics
    if len(topics) >= 127:
        raise _Unusual
    parts = [_I32.pack(obj.throttle_time_ms), bytes((len(topics) + 1,))]
    for topic in topics:
        name = topic.name.encode()
        partitions = topic.partitions
        if len(name) >= 127 or len(partitions) >= 127:
            raise _Unusual
        parts.append(bytes((len(name) + 1,)))
        parts.append(name)
        parts.append(bytes((len(partitions) + 1,)))
        for p in partitions:
            parts.append(_PARTITION_ANSWER.pack(p.partition_index, p.error_code, 0))
        parts.append(b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)


def response_builder(generic: Callable[[], Build]) -> Build:
    """The build function of an OffsetCommit v8/v9 response: the fast path, otherwise `generic()`'s."""

    def build(obj: Any, io: BytesIO, this: Any) -> Any:
        try:
            data = _response(obj)
        except Exception:  # noqa: BLE001 - the generated codec writes it, or raises its own error
            return generic()(obj, io, this)
        io.write(data)
        return obj

    return build
