"""Request and response framing: headers, API lookup, and the bytes of a whole frame.

A frame on the wire is `int32 size` + header + body. The server hands this module the bytes after
the size; this module never touches sockets.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from io import BytesIO
from struct import Struct
from typing import Any

from . import codec
from .messages import MODULES, REQUEST_FLEXIBLE_FROM
from .messages import request_header as _rh
from .messages import response_header as _rsh
from .wire import MalformedMessage
from .spec import MessageSpec

API_VERSIONS_KEY = 18
_HEAD = Struct(">hhi")  # api key, api version, correlation id: every request header starts so
_ID_LENGTH = Struct(">h")  # then the client id's length (null: -1)
_SIZE = Struct(">i")

RequestHeader = _rh.RequestHeader
ResponseHeader = _rsh.ResponseHeader

# api key -> module name, for requests and responses, from the generated index.
_REQUEST_MODULES = {key: mod for mod, _, kind, key in MODULES if kind == "request"}
_RESPONSE_MODULES = {key: mod for mod, _, kind, key in MODULES if kind == "response"}
_SPECS: dict[str, MessageSpec] = {}


def _spec(module: str) -> MessageSpec:
    found = _SPECS.get(module)
    if found is None:
        found = _SPECS[module] = importlib.import_module(f".messages.{module}", __package__).SPEC
    return found


def known_api_keys() -> list[int]:
    """Every API key Kafka defines, served here or not."""
    return sorted(REQUEST_FLEXIBLE_FROM)


def request_spec(api_key: int) -> MessageSpec | None:
    mod = _REQUEST_MODULES.get(api_key)
    return None if mod is None else _spec(mod)


def response_spec(api_key: int) -> MessageSpec | None:
    mod = _RESPONSE_MODULES.get(api_key)
    return None if mod is None else _spec(mod)


def request_header_version(spec: MessageSpec, version: int) -> int:
    # Versions beyond the JSON's range follow its "N+" flexible range, like Kafka's extrapolation.
    return 2 if spec.is_flexible(version) else 1


def response_header_version(spec: MessageSpec, version: int) -> int:
    if spec.api_key == API_VERSIONS_KEY:
        return 0  # KIP-511: so a client can always read the error of an unsupported version
    return 1 if spec.is_flexible(version) else 0


class UnknownApiKey(MalformedMessage):
    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key


@dataclass(slots=True)
class RequestFrame:
    header: Any            # RequestHeader
    spec: MessageSpec | None  # None for an API Kafka defines but we do not serve
    body_io: BytesIO       # positioned at the start of the body

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version


def peek_api(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) from the fixed start of any request header."""
    if len(frame) < 8:
        raise MalformedMessage(f"request of {len(frame)} bytes is shorter than a header")
    return _HEAD.unpack_from(frame)


def request_header_flexible(api_key: int, api_version: int) -> bool:
    """Whether the request's header is v2 (tagged fields), from its API's flexible versions. Versions
    beyond the JSON's range follow its "N+" flexible range, like Kafka's extrapolation."""
    flexible_from = REQUEST_FLEXIBLE_FROM.get(api_key)
    return flexible_from is not None and api_version >= flexible_from


def read_client_id(frame: bytes, flexible: bool) -> tuple[str, int]:
    """The rest of a request header after `peek_api`'s fixed start: the client id (null reads as "",
    as in Kafka) and where the body starts. The one header decoder: the server's connection
    (broker/network/connection.py) reads every request with it, and `decode_request_header` too."""
    if len(frame) < 10:
        raise MalformedMessage(f"request of {len(frame)} bytes ends inside its client id")
    (length,) = _ID_LENGTH.unpack_from(frame, 8)
    position = 10
    if length < 0:
        if length != -1:
            raise MalformedMessage(f"client id length {length}")
        client_id = ""
    else:
        position += length
        if position > len(frame):
            raise MalformedMessage(f"client id of {length} bytes in a {len(frame)}-byte request")
        try:
            client_id = frame[10:position].decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedMessage(f"client id is not UTF-8: {e}") from None
    if flexible:  # request header v2: tagged fields, none of which we know
        count, position = _varint(frame, position)
        for _ in range(count):
            _, position = _varint(frame, position)
            size, position = _varint(frame, position)
            position += size
        if position > len(frame):
            raise MalformedMessage("tagged fields past the end of the request")
    return client_id, position


def _varint(frame: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(frame) or shift > 28:
            raise MalformedMessage("truncated or over-long varint in the request header")
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def decode_request_header(frame: bytes) -> RequestFrame:
    """Decode the header (with the server's decoder); the body is decoded separately once the
    version is known to be served."""
    api_key, api_version, correlation_id = peek_api(frame)
    if api_key not in REQUEST_FLEXIBLE_FROM:
        raise UnknownApiKey(api_key)
    client_id, position = read_client_id(frame, request_header_flexible(api_key, api_version))
    io = BytesIO(frame)
    io.seek(position)
    return RequestFrame(RequestHeader(api_key, api_version, correlation_id, client_id), request_spec(api_key), io)


def decode_body(frame: RequestFrame) -> Any:
    if frame.spec is None:
        raise UnknownApiKey(frame.api_key)
    return codec.decode(frame.spec, frame.api_version, frame.body_io)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame: size, header, body."""
    spec = response_spec(api_key)
    assert spec is not None
    io = BytesIO()
    io.write(b"\x00\x00\x00\x00")
    io.write(_SIZE.pack(correlation_id))
    if response_header_version(spec, version) == 1:
        io.write(b"\x00")  # response header v1: an empty tagged-field section
    codec.encode_into(spec, version, body, io)
    buf = io.getbuffer()
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    del buf
    return io.getvalue()


# Responses whose payload is record data read from the log (Fetch). Encoding one into a single
# bytes object would copy every record byte twice (into the BytesIO, then out of it) on top of the
# read from the segment file; gathered, the stored bytes go to the socket as they are.
GATHERED_APIS = frozenset({1})
# A field this big is kept as its own buffer; smaller writes are joined (a buffer per field would
# cost more in the transport than copying a few bytes).
GATHER_MIN_BYTES = 16 * 1024


class _Gatherer:
    """A write-only sink for the compiled encoders: small writes into one bytearray, big ones by reference."""

    __slots__ = ("parts", "small")

    def __init__(self, first: bytearray) -> None:
        self.parts: list[bytes | bytearray | memoryview] = []
        self.small = first

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if len(data) < GATHER_MIN_BYTES:
            self.small += data
        else:
            self.parts.append(self.small)
            self.parts.append(data)
            self.small = bytearray()


def encode_response_parts(api_key: int, version: int, correlation_id: int,
                          body: Any) -> bytes | list[bytes | bytearray | memoryview]:
    """`encode_response`, except that a Fetch response comes back as a list of buffers (record data
    by reference, never joined) for `transport.writelines`; every other response is one bytes object."""
    if api_key not in GATHERED_APIS:
        return encode_response(api_key, version, correlation_id, body)
    spec = response_spec(api_key)
    assert spec is not None
    head = bytearray(8)
    _SIZE.pack_into(head, 4, correlation_id)
    if response_header_version(spec, version) == 1:
        head += b"\x00"  # response header v1: an empty tagged-field section
    sink = _Gatherer(head)
    codec.encode_into(spec, version, body, sink)  # type: ignore[arg-type]  # the encoders only call .write
    parts = sink.parts
    if sink.small:
        parts.append(sink.small)
    _SIZE.pack_into(head, 0, sum(len(p) for p in parts) - 4)
    return parts


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """A whole request frame; used by `kbroker probe`, tests and the benchmarks' load generator."""
    spec = request_spec(api_key)
    assert spec is not None
    io = BytesIO()
    io.write(b"\x00\x00\x00\x00")
    header = RequestHeader(api_key, version, correlation_id, client_id)
    codec.encode_into(_rh.SPEC, request_header_version(spec, version), header, io)
    codec.encode_into(spec, version, body, io)
    buf = io.getbuffer()
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    del buf
    return io.getvalue()


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix."""
    spec = response_spec(api_key)
    assert spec is not None
    io = BytesIO(frame)
    header = codec.decode(_rsh.SPEC, response_header_version(spec, version), io)
    return header.correlation_id, codec.decode(spec, version, io)
