"""One client connection as a protocol object, sans I/O: bytes in, requests out; answers in, bytes out.

`Connection` cuts the byte stream into frames (protocol/frames.py), decodes each request's header
(protocol/framing.py's decoder, the one the golden frames of real clients test), bounds its size, gates its version and, on a SASL listener, what may be asked before
authentication. It hands the shell (broker/network/server.py) one `Request` at a time to run. Answers may
arrive out of order (a Deferred waiting for an fsync, a handler that ran as a task), but leave in
request order: each request is a slot in a queue, and only completed slots at its head are sent.

As in Kafka, requests are *processed* in order: while a handler runs as a task, the next request
waits, so two Produce requests of one connection are applied in the order they were sent. A handler
that returns a `Deferred` has applied its effects, so the next request starts at once.

Back-pressure: the connection stops taking requests while one runs, while `max_pending` answers
are owed, or while the transport's write buffer is over its high-water mark; the shell stops
reading the socket once such a stall has `read_high_water` bytes buffered (`wants_read`).
Shutdown (`stop`): no further request starts; the connection closes once every answer owed is out.

Bad input ends only this connection, with one structured log event (`request_rejected`).
"""

from __future__ import annotations

from collections import deque
from struct import Struct
from typing import Any

import structlog

from . import error_answers
from .answers import CLOSE, Answer, ApiEntry, ApiTable, Close
from ...protocol import framing
from ...protocol.framing import peek_api, read_client_id
from ...protocol.frames import FrameReader, FrameSizeError
from ...protocol.wire import FrameIO, MalformedMessage

log = structlog.get_logger("kbroker.server")

_SIZE = Struct(">i")
# librdkafka keeps at most 5 requests in flight per connection with idempotence, 1M without.
MAX_PENDING = 128
READ_HIGH_WATER = 256 * 1024
AUTH_FAILED = "authentication failed"  # the close reason the shell holds back by Kafka's delay
_PENDING = object()  # a slot whose answer is not known yet


class Request:
    """One decoded request, and its slot in the connection's answer queue."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "entry", "body", "answer",
                 "close_after", "queue_s", "started", "answered", "errors")
    # Set only with the request log on (broker/operations/request_log.py): its times and error codes.
    queue_s: float
    started: float
    answered: float
    errors: dict[str, int] | None

    def __init__(self, entry: ApiEntry | None, correlation_id: int, client_id: str, body: Any) -> None:
        self.entry = entry
        if entry is not None:
            self.api_key, self.api_version = entry.api_key, entry.version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body = body
        self.answer: Answer | object = _PENDING
        self.close_after: str | None = None  # close once this answer is out (a failed SASL exchange)


class Connection:
    """See the module docstring. `auth` is the connection's ConnectionAuth on a SASL or TLS
    listener (broker/security/session.py), None on PLAINTEXT."""

    def __init__(self, table: ApiTable, peer: str, max_request_bytes: int, *, auth: Any = None,
                 max_receive_before_auth: int = 0, max_pending: int = MAX_PENDING,
                 read_high_water: int = READ_HIGH_WATER) -> None:
        self.table = table
        self.peer = peer
        self.auth = auth
        self.max_request_bytes = max_request_bytes
        self.max_receive_before_auth = max_receive_before_auth
        self.max_pending = max_pending
        self.read_high_water = read_high_water
        self.client_id = ""  # the last request's; a test control drops a client's connections by it
        self.running: Request | None = None  # the request whose handler runs as a task
        self.writing_paused = False  # the transport's write buffer is over its high-water mark
        self.close_reason: str | None = None  # set: close once `data_to_send()` is written
        # (api key, version) of requests refused here without an answer: the shell counts them as failed
        self.refused: list[tuple[int, int]] = []
        # With the request log on (broker/operations/request_log.py): the requests whose answers left
        # since the shell last wrote (it logs and clears them); None when off.
        self.sent: list[Request] | None = None
        self._reader = FrameReader(max_request_bytes)
        self._slots: deque[Request] = deque()
        self._out: list[bytes | memoryview] = []
        self._stopped: str | None = None  # why no further request starts
        self._eof = False
        self._trailing_logged = False  # `request_trailing_bytes` is logged once per connection

    # -- bytes in, requests out -------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        self._reader.feed(data)

    def end_of_input(self) -> None:
        """The client half-closed: serve the whole frames it sent, answer them, then close."""
        self._eof = True

    def next_request(self) -> Request | None:
        """The next request to run, or None: no whole frame yet, or none may start now. Frames that
        are answered here (bad input, unsupported versions, raw SASL tokens) never come out."""
        while (self.running is None and self._stopped is None and not self.writing_paused
               and len(self._slots) < self.max_pending):
            reader = self._reader
            auth = self.auth
            if auth is not None:  # before authentication: sasl.server.max.receive.size
                reader.max_frame_bytes = auth.max_frame_bytes(self.max_request_bytes, self.max_receive_before_auth)
            try:
                frame = reader.next_frame()
            except FrameSizeError as e:
                log.warning("request_rejected", peer=self.peer, error="frame size out of bounds", size=e.size,
                            max_bytes=e.max_bytes, authenticated=auth.authenticated if auth else None)
                self._stop("bad frame size")
                return None
            if frame is None:
                if self._eof:  # the client sent all it will: close once the answers owed are out
                    self._stop("truncated frame" if reader.buffered else "closed by client")
                return None
            if auth is not None and auth.raw_tokens:  # SaslHandshake v0: a bare token, no header
                answer = auth.raw_token(frame)
                if answer is None:
                    self._stop(AUTH_FAILED)
                    return None
                self._answered(_SIZE.pack(len(answer)) + answer)
                continue
            request = self._decode(frame)
            if request is not None:
                self._slots.append(request)
                return request
        return None

    def _decode(self, frame: bytes) -> Request | None:
        """The request of a frame; None when it was answered or rejected here."""
        if len(frame) < 8:
            return self._reject(f"request of {len(frame)} bytes is shorter than a header", {"peer": self.peer})
        api_key, api_version, correlation_id = peek_api(frame)
        entry = self.table.entry(api_key, api_version)
        if not entry.known:
            return self._reject("unknown api key", self._fields(api_key, api_version, correlation_id))
        try:
            client_id, position = read_client_id(frame, entry.header_flexible)
        except (MalformedMessage, ValueError) as e:
            return self._reject(f"undecodable header: {e}", self._fields(api_key, api_version, correlation_id))
        self.client_id = client_id
        if self.auth is not None:
            refusal = self.auth.refusal(api_key)  # Kafka's SASL gate: only the handshake before authentication
            if refusal is not None:
                return self._reject(refusal, self._fields(api_key, api_version, correlation_id, client_id),
                                    principal=self.auth.principal)
        if not entry.served:
            self._unserved(entry, correlation_id, client_id)
            return None
        io = FrameIO(frame)  # big Produce records come out as views of the frame, not copies
        io.seek(position)
        try:
            assert entry.parse is not None
            body = entry.parse(io, None)
        except (MalformedMessage, ValueError, UnicodeDecodeError) as e:
            return self._reject(f"undecodable body: {e}", self._fields(api_key, api_version, correlation_id, client_id))
        if io.tell() < len(frame) and not self._trailing_logged:
            # Kafka 4.4 parses the body and ignores what follows it: the request is answered (a test
            # sends the same frame to Kafka). Said once per connection, so a client cannot flood the log.
            self._trailing_logged = True
            log.warning("request_trailing_bytes", trailing_bytes=len(frame) - io.tell(), answered=True,
                        **self._fields(api_key, api_version, correlation_id, client_id))
        return Request(entry, correlation_id, client_id, body)

    def _unserved(self, entry: ApiEntry, correlation_id: int, client_id: str) -> None:
        """A version (or an API) we do not serve: answered when Kafka's clients can read the answer."""
        api_key, api_version = entry.api_key, entry.version
        if api_key == framing.API_VERSIONS_KEY:
            route = entry.route
            served = (route.min_version, route.max_version) if route else (0, 0)
            self._answered(error_answers.unsupported_api_versions(served, correlation_id))
            return
        # Kafka closes the connection; kbroker answers the versions whose error it can shape, unless it
        # answers as one Kafka release (--kafka-version: that release's refusal, a close).
        answer = None if entry.route is None or self.table.router.strict else \
            error_answers.unsupported_version_answer(api_key, api_version, correlation_id)
        log.warning("request_rejected", error="unsupported api" if entry.route is None else "unsupported version",
                    answered=answer is not None, **self._fields(api_key, api_version, correlation_id, client_id))
        if answer is None:
            self.refused.append((api_key, api_version))
            self._stop("bad request")
        else:
            self._answered(answer)

    def _fields(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None = None
                ) -> dict[str, Any]:
        """The identity of a request, for its log event (only bad input is logged)."""
        fields: dict[str, Any] = {"api": api_key, "version": api_version, "correlation_id": correlation_id,
                                  "peer": self.peer}
        if client_id is not None:
            fields["client_id"] = client_id
        return fields

    def _reject(self, error: str, fields: dict, **more: Any) -> Request | None:
        """Bad input: one log event, and the connection closes after the answers owed (returns None)."""
        log.warning("request_rejected", error=error, **fields, **more)
        if "api" in fields:
            self.refused.append((fields["api"], fields["version"]))
        self._stop("bad request")
        return None

    # -- answers in, bytes out ------------------------------------------------------------------

    def complete(self, request: Request, answer: Answer) -> None:
        """The answer of a request handed out by `next_request` (its frame, None for no response, or
        CLOSE); it leaves once every answer before it has."""
        request.answer = answer
        if answer is CLOSE:
            self._stop("bad request")
        if self.auth is not None and self.auth.close_after_response and request.close_after is None:
            self.auth.close_after_response = False
            request.close_after = AUTH_FAILED  # failed SASL: answered, then closed
            self._stopped = self._stopped or AUTH_FAILED
        slots = self._slots
        while slots and slots[0].answer is not _PENDING:
            done = slots.popleft()
            if self.close_reason is not None:
                continue  # closing: nothing more is sent
            if self.sent is not None and done.entry is not None:
                self.sent.append(done)
            data = done.answer
            if data is None:
                pass
            elif type(data) is bytes:
                self._out.append(data)
            elif isinstance(data, Close):
                self.close_reason = self._stopped or "bad request"
            else:
                self._out.extend(data)  # type: ignore[arg-type]
            if done.close_after is not None:
                self.close_reason = done.close_after
        if not slots and self._stopped is not None and self.close_reason is None:
            self.close_reason = self._stopped

    def data_to_send(self) -> list[bytes | memoryview]:
        """The answers ready to write, in request order; then close if `close_reason` is set."""
        out = self._out
        if out:
            self._out = []
        return out

    # -- state -----------------------------------------------------------------------------------

    @property
    def wants_read(self) -> bool:
        """False when the shell should stop reading the socket (back-pressure, or closing)."""
        if self._stopped is not None or self.close_reason is not None:
            return False
        if self.running is None and not self.writing_paused and len(self._slots) < self.max_pending:
            return True
        return self._reader.buffered < self.read_high_water

    @property
    def pending(self) -> int:
        """Requests started whose answers are not out yet."""
        return len(self._slots)

    @property
    def buffered(self) -> int:
        """Bytes received and not yet cut into a request (a frame still arriving, or waiting)."""
        return self._reader.buffered

    def stop(self, reason: str = "shutdown") -> None:
        """Start no further request; close once the answers owed are out (graceful shutdown)."""
        self._stop(reason)
        if not self._slots and self.close_reason is None:
            self.close_reason = reason

    def _stop(self, reason: str) -> None:
        if self._stopped is None:
            self._stopped = reason
        if not self._slots and self.close_reason is None:
            self.close_reason = self._stopped

    def _answered(self, data: bytes) -> None:
        """A frame answered here, in its turn behind the requests still running."""
        request = Request(None, 0, self.client_id, None)
        self._slots.append(request)
        self.complete(request, data)


__all__ = ["AUTH_FAILED", "CLOSE", "Connection", "Request", "MAX_PENDING"]
