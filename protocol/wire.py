"""What the compiled codec calls at run time: readers and writers of Kafka's wire primitives.

The parse and build functions in `protocol/compiled/` (generated ahead of time with construct by
`make codegen`) and any codec compiled at run time call these and nothing else, so serving needs no
construct. Readers raise `MalformedMessage` on anything a well-behaved peer would not send.
"""

from __future__ import annotations

from io import BytesIO
from struct import Struct, error as StructError
from uuid import UUID

ZERO_UUID = UUID(int=0)


class MalformedMessage(ValueError):
    """The bytes do not decode as the message they claim to be."""


# -- fixed-width -------------------------------------------------------------------------
_S_i8, _S_i16, _S_u16, _S_i32, _S_i64, _S_f64 = (Struct(f) for f in (">b", ">h", ">H", ">i", ">q", ">d"))
U_I8, U_I16, U_U16, U_I32, U_I64, U_F64 = (s.unpack for s in (_S_i8, _S_i16, _S_u16, _S_i32, _S_i64, _S_f64))
P_I8, P_I16, P_U16, P_I32, P_I64, P_F64 = (s.pack for s in (_S_i8, _S_i16, _S_u16, _S_i32, _S_i64, _S_f64))


def _short(n: int, got: bytes) -> MalformedMessage:
    return MalformedMessage(f"needed {n} bytes, {len(got)} left")


def read_exact(io: BytesIO, n: int) -> bytes:
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    return b


def read_bool(io: BytesIO) -> bool:
    b = io.read(1)
    if not b:
        raise MalformedMessage("needed 1 byte for a bool")
    return b != b"\x00"


# -- unsigned varints (flexible versions) ------------------------------------------------
# The readers below take a one-byte varint, and a length's bytes, inline: a field is one Python call,
# not four (they are most of the codec's decode time for small requests).
def read_uvarint(io: BytesIO) -> int:
    b = io.read(1)
    if b and b[0] < 0x80:
        return b[0]
    return uvarint_from(io, b)


def uvarint_from(io: BytesIO, b: bytes) -> int:
    """The rest of a varint whose first byte `b` (empty at the end of the input) was just read."""
    if not b:
        raise MalformedMessage("truncated varint")
    v = b[0]
    if v < 0x80:
        return v
    result, shift = v & 0x7F, 7
    while True:
        b = io.read(1)
        if not b:
            raise MalformedMessage("truncated varint")
        v = b[0]
        result |= (v & 0x7F) << shift
        if v < 0x80:
            return result
        shift += 7
        if shift > 28:  # Kafka's unsigned varints carry at most 32 bits (5 bytes)
            raise MalformedMessage("varint longer than 5 bytes")


_SMALL_UVARINTS = tuple(bytes([i]) for i in range(128))


def encode_uvarint(v: int) -> bytes:
    if 0 <= v < 128:
        return _SMALL_UVARINTS[v]
    v &= 0xFFFFFFFF  # Kafka writes int32 as unsigned 32-bit: -1 -> ff ff ff ff 0f
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# -- strings and bytes -------------------------------------------------------------------
def _text(io: BytesIO, n: int) -> str:
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedMessage(f"invalid UTF-8 in string: {e}") from None


def read_string(io: BytesIO) -> str:
    b = io.read(2)
    if len(b) != 2:
        raise _short(2, b)
    n = U_I16(b)[0]
    if n < 0:
        raise MalformedMessage("null in a non-nullable string")
    return _text(io, n)


def read_nullable_string(io: BytesIO) -> str | None:
    b = io.read(2)
    if len(b) != 2:
        raise _short(2, b)
    n = U_I16(b)[0]
    if n < 0:
        return None
    return _text(io, n)


def read_compact_string(io: BytesIO) -> str:
    b = io.read(1)
    n = (b[0] if b and b[0] < 0x80 else uvarint_from(io, b)) - 1
    if n < 0:
        raise MalformedMessage("null in a non-nullable compact string")
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedMessage(f"invalid UTF-8 in string: {e}") from None


def read_nullable_compact_string(io: BytesIO) -> str | None:
    b = io.read(1)
    n = (b[0] if b and b[0] < 0x80 else uvarint_from(io, b)) - 1
    if n < 0:
        return None
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedMessage(f"invalid UTF-8 in string: {e}") from None


def read_bytes(io: BytesIO) -> bytes:
    b = io.read(4)
    if len(b) != 4:
        raise _short(4, b)
    n = U_I32(b)[0]
    if n < 0:
        raise MalformedMessage("null in non-nullable bytes")
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    return b


def read_nullable_bytes(io: BytesIO) -> bytes | None:
    b = io.read(4)
    if len(b) != 4:
        raise _short(4, b)
    n = U_I32(b)[0]
    if n < 0:
        return None
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    return b


def read_compact_bytes(io: BytesIO) -> bytes:
    b = io.read(1)
    n = (b[0] if b and b[0] < 0x80 else uvarint_from(io, b)) - 1
    if n < 0:
        raise MalformedMessage("null in non-nullable compact bytes")
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    return b


def read_nullable_compact_bytes(io: BytesIO) -> bytes | None:
    b = io.read(1)
    n = (b[0] if b and b[0] < 0x80 else uvarint_from(io, b)) - 1
    if n < 0:
        return None
    b = io.read(n)
    if len(b) != n:
        raise _short(n, b)
    return b


class FrameIO(BytesIO):
    """A request frame the broker decodes: `records` of RECORDS_VIEW_FROM bytes or more come out as
    read-only views of the frame instead of copies (a 1 MB Produce batch was copied once more here
    only to be written to the log). Anyone else's BytesIO gets bytes, as before."""

    __slots__ = ()


RECORDS_VIEW_FROM = 64 * 1024


def _read_records(io: BytesIO, n: int) -> bytes | memoryview:
    if n >= RECORDS_VIEW_FROM and type(io) is FrameIO:
        frame = io.getvalue()  # the frame itself, not a copy: the buffer is shared until written to
        pos = io.tell()
        if pos + n > len(frame):
            raise MalformedMessage(f"needed {n} bytes, {len(frame) - pos} left")
        io.seek(pos + n)
        return memoryview(frame)[pos:pos + n]
    return read_exact(io, n)


def read_nullable_records(io: BytesIO) -> bytes | memoryview | None:
    n = U_I32(read_exact(io, 4))[0]
    return None if n < 0 else _read_records(io, n)


def read_nullable_compact_records(io: BytesIO) -> bytes | memoryview | None:
    n = read_uvarint(io) - 1
    return None if n < 0 else _read_records(io, n)


def read_uuid(io: BytesIO) -> UUID:
    return UUID(bytes=read_exact(io, 16))


def write_string(w, v: str) -> None:
    b = v.encode("utf-8")
    w(P_I16(len(b)))
    w(b)


def write_nullable_string(w, v: str | None) -> None:
    if v is None:
        w(b"\xff\xff")
    else:
        write_string(w, v)


def write_compact_string(w, v: str) -> None:
    b = v.encode("utf-8")
    w(encode_uvarint(len(b) + 1))
    w(b)


def write_nullable_compact_string(w, v: str | None) -> None:
    if v is None:
        w(b"\x00")
    else:
        write_compact_string(w, v)


def write_bytes(w, v: bytes) -> None:
    w(P_I32(len(v)))
    w(v)


def write_nullable_bytes(w, v: bytes | None) -> None:
    if v is None:
        w(b"\xff\xff\xff\xff")
    else:
        write_bytes(w, v)


def write_compact_bytes(w, v: bytes) -> None:
    w(encode_uvarint(len(v) + 1))
    w(v)


def write_nullable_compact_bytes(w, v: bytes | None) -> None:
    if v is None:
        w(b"\x00")
    else:
        write_compact_bytes(w, v)


# -- array headers -------------------------------------------------------------------------
def read_array_count(io: BytesIO, nullable: bool) -> int:
    n = U_I32(read_exact(io, 4))[0]
    if n < 0 and not (nullable and n == -1):
        raise MalformedMessage(f"invalid array length {n}")
    return n


def read_compact_array_count(io: BytesIO, nullable: bool) -> int:
    n = read_uvarint(io) - 1
    if n < 0 and not nullable:
        raise MalformedMessage("null in a non-nullable compact array")
    return n


def skip_tagged_field(io: BytesIO) -> None:
    read_exact(io, read_uvarint(io))


__all__ = [
    "MalformedMessage", "ZERO_UUID", "BytesIO", "UUID", "StructError",
    "U_I8", "U_I16", "U_U16", "U_I32", "U_I64", "U_F64",
    "P_I8", "P_I16", "P_U16", "P_I32", "P_I64", "P_F64",
    "read_exact", "read_bool", "read_uvarint", "uvarint_from", "encode_uvarint",
    "read_string", "read_nullable_string", "read_compact_string", "read_nullable_compact_string",
    "read_bytes", "read_nullable_bytes", "read_compact_bytes", "read_nullable_compact_bytes", "read_uuid",
    "FrameIO", "RECORDS_VIEW_FROM", "read_nullable_records", "read_nullable_compact_records",
    "write_string", "write_nullable_string", "write_compact_string", "write_nullable_compact_string",
    "write_bytes", "write_nullable_bytes", "write_compact_bytes", "write_nullable_compact_bytes",
    "read_array_count", "read_compact_array_count", "skip_tagged_field",
]
