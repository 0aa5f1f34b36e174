"""The bytes of an answer: a handler's response encoded, or the error answer Kafka would give instead.

A handler that raises, or a response that cannot be encoded, is a bug of ours, not bad input: that
request gets its API's error answer (UNKNOWN_SERVER_ERROR, shaped as error_answers.py says) and the connection stays
open; only an API with no error shape at all closes it. What each (api key, version) needs to
encode is looked up once (`ApiTable`), so a response costs one codec call and one header pack.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any, Callable

import structlog

from .router import RequestContext, Route, Router
from ...protocol import codec, framing
from ...protocol.errors import ErrorCode
from ...protocol.messages import REQUEST_FLEXIBLE_FROM

log = structlog.get_logger("kbroker.server")

# What an int16-length string can hold; longer error messages are cut to fit (Kafka truncates too).
_MAX_INT16_STRING_BYTES = 32767
_HEADER_V0 = struct.Struct(">ii")    # size, correlation id
_HEADER_V1 = struct.Struct(">iiB")   # size, correlation id, empty tagged fields
# Below this a response is one bytes object (header + body); above, a list of buffers for
# `writelines`, so the body is not copied once more.
_JOIN_BELOW = 64 * 1024
_OFFSET_COMMIT_FAST_VERSIONS = (8, 9)  # protocol/offset_commit_fast.py VERSIONS (a test checks they agree)
_CONSUMER_HEARTBEAT_FAST_VERSIONS = (0, 1)  # protocol/consumer_heartbeat_fast.py VERSIONS (a test checks they agree)


class Close:
    """The answer that is no answer: close the connection once the responses before it are out."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CLOSE"


CLOSE = Close()
Encoded = bytes | list  # list[bytes | memoryview], written with transport.writelines
Answer = Encoded | Close | None  # None: the request gets no response (Produce with acks=0)


class ApiEntry:
    """What serving one (api key, version) needs, looked up once per broker."""

    __slots__ = ("api_key", "version", "route", "known", "served", "header_flexible", "parse", "build",
                 "response_header")

    def __init__(self, router: Router, api_key: int, version: int) -> None:
        self.api_key, self.version = api_key, version
        route = self.route = router.route(api_key)
        self.known = api_key in REQUEST_FLEXIBLE_FROM
        self.header_flexible = framing.request_header_flexible(api_key, version)
        self.served = route is not None and route.min_version <= version <= route.max_version
        self.parse: Callable[[BytesIO, None], Any] | None = None
        self.build: Callable[[Any, BytesIO, None], Any] | None = None
        self.response_header = _HEADER_V0
        if self.served:
            request, response = framing.request_spec(api_key), framing.response_spec(api_key)
            assert request is not None and response is not None
            if api_key == 8 and version in _OFFSET_COMMIT_FAST_VERSIONS:  # every consumer's commits
                from ...protocol import offset_commit_fast  # imported with the first OffsetCommit, not at start-up

                # The generated codec is compiled only when a message needs it (memory and start-up).
                self.parse = offset_commit_fast.request_parser(lambda: codec.compiled_message(request, version).parsefunc)
                self.build = offset_commit_fast.response_builder(lambda: codec.compiled_message(response, version).buildfunc)
            elif api_key == 68 and version in _CONSUMER_HEARTBEAT_FAST_VERSIONS:  # every KIP-848 member's heartbeats
                from ...protocol import consumer_heartbeat_fast

                self.parse = consumer_heartbeat_fast.request_parser(
                    version, lambda: codec.compiled_message(request, version).parsefunc)
                self.build = consumer_heartbeat_fast.response_builder(
                    lambda: codec.compiled_message(response, version).buildfunc)
            else:
                self.parse = codec.compiled_message(request, version).parsefunc
                self.build = codec.compiled_message(response, version).buildfunc
            if framing.response_header_version(response, version) == 1:
                self.response_header = _HEADER_V1


class ApiTable:
    """ApiEntry by (api key, version), filled on first use; the router must be complete by then."""

    __slots__ = ("router", "_entries")

    def __init__(self, router: Router) -> None:
        self.router = router
        self._entries: dict[int, ApiEntry] = {}

    def entry(self, api_key: int, version: int) -> ApiEntry:
        key = (api_key << 16) | (version & 0xFFFF)
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = ApiEntry(self.router, api_key, version)
        return found


_ENCODE_ERRORS = (struct.error, ValueError, OverflowError, TypeError, AttributeError, KeyError, IndexError)


def encode(entry: ApiEntry, correlation_id: int, body: Any) -> Encoded:
    """The response frame (size, header, body) of a served version."""
    if entry.api_key in framing.GATHERED_APIS:  # Fetch: record data by reference, never joined
        return framing.encode_response_parts(entry.api_key, entry.version, correlation_id, body)
    io = BytesIO()
    assert entry.build is not None
    entry.build(body, io, None)
    payload = io.getvalue()
    header = entry.response_header
    if header is _HEADER_V1:
        head = header.pack(len(payload) + 5, correlation_id, 0)
    else:
        head = header.pack(len(payload) + 4, correlation_id)
    if len(payload) < _JOIN_BELOW:
        return head + payload
    return [head, payload]


def request_fields(ctx: RequestContext) -> dict[str, Any]:
    """A request's identity, for the log event of its failure (a successful request logs nothing)."""
    return {"api": ctx.api_key, "version": ctx.api_version, "correlation_id": ctx.correlation_id,
            "peer": ctx.peer, "client_id": ctx.client_id}


def answer(entry: ApiEntry, ctx: RequestContext, request: Any, response: Any) -> Answer:
    """The response's frame; if it cannot be encoded, the request's error answer instead."""
    try:
        return encode(entry, ctx.correlation_id, response)
    except _ENCODE_ERRORS as e:
        first_error = e
    if _cut_error_messages(response):
        try:
            return encode(entry, ctx.correlation_id, response)
        except _ENCODE_ERRORS as e:
            first_error = e
    log.error("response_encode_failed", error=repr(first_error), **request_fields(ctx))
    return failed_answer(entry, ctx, request)


def failed_answer(entry: ApiEntry, ctx: RequestContext, request: Any) -> Answer:
    """UNKNOWN_SERVER_ERROR in the API's own error shape; closing is the last resort."""
    route: Route | None = entry.route
    try:
        body = None if route is None else route.failed_response(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if body is not None:
            return encode(entry, ctx.correlation_id, body)
    except Exception:  # noqa: BLE001 - even the error answer failed: fall back to closing
        log.exception("error_answer_failed", **request_fields(ctx))
        return CLOSE
    log.warning("request_rejected", error="no error answer for this api", **request_fields(ctx))
    return CLOSE


def _cut_error_messages(obj: Any, depth: int = 0) -> bool:
    """Shorten every over-long `error_message` in a response to what an int16 string holds."""
    cut = False
    if depth > 8 or not hasattr(obj, "__slots__"):
        return False
    for name in obj.__slots__:
        value = getattr(obj, name, None)
        if isinstance(value, str) and name.endswith("error_message"):
            raw = value.encode("utf-8")
            if len(raw) > _MAX_INT16_STRING_BYTES:
                setattr(obj, name, raw[:_MAX_INT16_STRING_BYTES].decode("utf-8", "ignore"))
                cut = True
        elif isinstance(value, list):
            for item in value:
                cut = _cut_error_messages(item, depth + 1) or cut
        elif hasattr(value, "__slots__"):
            cut = _cut_error_messages(value, depth + 1) or cut
    return cut
