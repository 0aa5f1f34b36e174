"""The TCP server: size-prefixed frames in, responses out in request order.

Like Kafka, a connection has one request in progress at a time: the next frame is read only after
the previous response is written, so responses leave in request order without reordering logic.
Bad input closes that one connection with one structured log event; it never reaches other
connections or the process. A handler that raises, or a response that cannot be encoded, is a bug
of ours, not bad input: that request gets its API's error answer (UNKNOWN_SERVER_ERROR, see
router.py) and the connection stays open.

Connections are bounded as in Kafka's SocketServer: one with no traffic for
`connections.max.idle.ms` is closed; past `max.connections` (in all) or `max.connections.per.ip`
a new connection is closed at once with a `connection_refused` log event.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

import structlog

from .router import Deferred, RequestContext, Route, Router
from .security.service import ListenerSecurity, TlsAcceptor, TlsHandshakeFailed
from ..protocol import framing
from ..protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from ..protocol.errors import ErrorCode
from ..protocol.primitives import MalformedMessage

log = structlog.get_logger("kbroker.server")
_SIZE = struct.Struct(">i")
# What an int16-length string can hold; longer error messages are cut to fit (Kafka truncates too).
_MAX_INT16_STRING_BYTES = 32767


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


class KafkaServer:
    """One listener: the broker runs one server per configured listener, each stamping its name on
    the requests it reads. `sock` is the listening socket the start-up checks already bound."""

    def __init__(self, broker: Any, router: Router, host: str, port: int, max_request_bytes: int, *,
                 listener: str = "PLAINTEXT", sock: socket.socket | None = None,
                 security: ListenerSecurity | None = None) -> None:
        self.broker = broker
        self.security = security  # TLS and/or SASL for this listener; None is PLAINTEXT
        self.router = router
        self.host, self.port = host, port
        self.listener = listener
        self._sock = sock
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | TlsAcceptor | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._in_flight: set[asyncio.Task] = set()
        self._per_ip: dict[str, int] = {}
        self._closing = False
        config = getattr(broker, "config", None)
        self.max_idle_s = getattr(config, "connections_max_idle_ms", 600000) / 1000.0
        self.max_connections = getattr(config, "max_connections", 2147483647)
        self.max_connections_per_ip = getattr(config, "max_connections_per_ip", 2147483647)
        # Seeing into it (broker/observe.py): per-request counters, and each peer's client id so a
        # test control can drop one client's connections.
        self.observer: Any = None
        self.client_ids: dict[str, str] = {}
        # The broker-wide connection count against the file-descriptor budget (broker/fd_budget.py).
        self.slots: Any = None

    async def start(self) -> int:
        if self.security is not None and self.security.ssl_context is not None:
            self._server = TlsAcceptor(self.host, self.port, self._on_tls_connection, sock=self._sock)
        elif self._sock is not None:
            self._server = await asyncio.start_server(self._on_connection, sock=self._sock, limit=1 << 20)
        else:
            self._server = await asyncio.start_server(self._on_connection, self.host, self.port, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def shutdown(self, timeout: float) -> None:
        """Stop accepting, let in-flight requests finish (up to `timeout`), then close connections."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        if self._in_flight:
            await asyncio.wait(list(self._in_flight), timeout=timeout)
        for writer in list(self._connections.values()):
            writer.close()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=1.0)

    async def _on_tls_connection(self, sock: socket.socket) -> None:
        assert self.security is not None  # only a listener with security accepts TLS
        try:
            peername = sock.getpeername()
        except OSError:
            sock.close()
            return
        peer = f"{peername[0]}:{peername[1]}"
        reason = self._over_limit(peername[0])
        if reason is not None:  # before the handshake: refusing must not cost a TLS handshake
            log.warning("connection_refused", peer=peer, reason=reason)
            sock.close()
            return
        try:
            reader, writer, conn = await self.security.accept_tls(sock, peer)
        except TlsHandshakeFailed as e:
            log.warning("tls_handshake_failed", peer=peer, listener=self.security.listener, error=str(e))
            return
        await self._on_connection(reader, writer, conn)

    def _over_limit(self, ip: str) -> str | None:
        if len(self._connections) >= self.max_connections:
            return f"the broker already has max.connections={self.max_connections} connections"
        if self._per_ip.get(ip, 0) >= self.max_connections_per_ip:
            return f"{ip} already has max.connections.per.ip={self.max_connections_per_ip} connections"
        if self.slots is not None and self.slots.full():
            return (f"out of file descriptors: {self.slots.limit} connections is what ulimit -n leaves beside "
                    f"the segment-file cache (--log-max-open-files)")
        return None

    def _refused(self, writer: asyncio.StreamWriter) -> bool:
        """Close a connection over max.connections or max.connections.per.ip, saying so in the log."""
        reason = self._over_limit(_ip_of(writer))
        if reason is None:
            return False
        peername = writer.get_extra_info("peername")
        log.warning("connection_refused", peer=f"{peername[0]}:{peername[1]}" if peername else "?", reason=reason)
        writer.close()
        return True

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             conn: Any = None) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._refused(writer):
            return
        self._connections[task] = writer
        if self.slots is not None:
            self.slots.used += 1
        if self.observer is not None:
            self.observer.connections_opened += 1
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        log.info("connection_open", peer=peer, listener=self.listener)
        reason = "closed by client"
        ip = _ip_of(writer)
        try:
            self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
            if self.security is not None and conn is None:  # SASL_PLAINTEXT
                conn = await self.security.accept(writer, peer)
            reason = await self._serve(reader, writer, peer, conn)
        except TimeoutError:
            reason = f"idle for connections.max.idle.ms={int(self.max_idle_s * 1000)}"
        except (ConnectionError, asyncio.IncompleteReadError):
            reason = "closed by client"
        except asyncio.CancelledError:
            reason = "shutdown"
            raise
        except Exception:  # a bug of ours: keep the process, drop this connection
            log.exception("connection_error", peer=peer)
            reason = "internal error"
        finally:
            self._connections.pop(task, None)
            if self.slots is not None:
                self.slots.used -= 1
            left = self._per_ip.get(ip, 1) - 1
            if left > 0:
                self._per_ip[ip] = left
            else:
                self._per_ip.pop(ip, None)
            self.client_ids.pop(peer, None)
            writer.close()
            log.info("connection_close", peer=peer, reason=reason)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str, conn: Any) -> str:
        # Responses are written by one writer task in request order. A request is read only once
        # the previous one is answered, unless the previous handler returned a Deferred (its effects
        # are applied; it only waits for durability): then the next request starts at once.
        out = _ResponseWriter(writer)
        try:
            while not self._closing and not out.failed:
                # Idle means no byte from the client for max_idle_s (TimeoutError ends the
                # connection); responses still owed are written first by `out.close()`.
                try:
                    async with asyncio.timeout(self.max_idle_s):
                        head = await reader.readexactly(4)
                except asyncio.IncompleteReadError as e:
                    return "closed by client" if not e.partial else "truncated frame"
                (size,) = _SIZE.unpack(head)
                limit = self.max_request_bytes
                if conn is not None and self.security is not None:  # before authentication: sasl.server.max.receive.size
                    limit = conn.max_frame_bytes(limit, self.security.max_receive_before_auth)
                if size < 0 or size > limit:
                    log.warning("request_rejected", peer=peer, error="frame size out of bounds", size=size,
                                max_bytes=limit, authenticated=conn.authenticated if conn else None)
                    return "bad frame size"
                async with asyncio.timeout(self.max_idle_s):
                    frame = await reader.readexactly(size)
                if conn is not None and conn.raw_tokens:  # SaslHandshake v0: a bare token, no header
                    answer = conn.raw_token(frame)
                    if answer is None:
                        return "authentication failed"
                    await out.add(_resolved(_SIZE.pack(len(answer)) + answer))
                    await out.drained()
                    continue
                response = await self._dispatch_tracked(frame, peer, conn)
                if isinstance(response, asyncio.Future):
                    await out.add(response)  # deferred: go on reading
                    continue
                done = asyncio.get_running_loop().create_future()
                done.set_result(response)
                await out.add(done)
                await out.drained()
                if response is _CLOSE:
                    return "bad request"
                if conn is not None and conn.close_after_response:  # failed SASL: answered, now close
                    return "authentication failed"
            return "shutdown"
        finally:
            await out.close()

    async def _dispatch_tracked(self, frame: bytes, peer: str, conn: Any) -> Any:
        task = asyncio.ensure_future(self._dispatch(frame, peer, conn))
        self._track(task)
        # shield: on shutdown the connection task is cancelled, but the request finishes.
        if self.observer is None or len(frame) < 4:
            return await asyncio.shield(task)
        started = time.perf_counter()
        response = await asyncio.shield(task)
        api_key, version = int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big")
        if isinstance(response, asyncio.Future):  # deferred: its latency ends when it is answered
            response.add_done_callback(lambda f: self.observer.request(
                api_key, version, time.perf_counter() - started, f.cancelled() or f.exception() is not None
                or f.result() is _CLOSE))
        else:
            self.observer.request(api_key, version, time.perf_counter() - started, response is _CLOSE)
        return response

    def drop_connections(self, client_id: str | None) -> int:
        """Close every connection of `client_id` (every connection when None); a test control."""
        dropped = 0
        for writer in list(self._connections.values()):
            name = writer.get_extra_info("peername")
            peer = f"{name[0]}:{name[1]}" if name else "?"
            if client_id is None or self.client_ids.get(peer) == client_id:
                writer.transport.abort()
                dropped += 1
        return dropped

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _dispatch(self, frame: bytes, peer: str, conn: Any) -> bytes | None | object:
        try:
            api_key, api_version, correlation_id = framing.peek_api(frame)
        except MalformedMessage as e:
            log.warning("request_rejected", peer=peer, error=str(e))
            return _CLOSE
        fields = {"api": api_key, "version": api_version, "correlation_id": correlation_id, "peer": peer}
        route = self.router.route(api_key)
        try:
            req = framing.decode_request_header(frame)
        except framing.UnknownApiKey:
            log.warning("request_rejected", error="unknown api key", **fields)
            return _CLOSE
        except (MalformedMessage, ValueError) as e:
            log.warning("request_rejected", error=f"undecodable header: {e}", **fields)
            return _CLOSE
        fields["client_id"] = req.header.client_id
        self.client_ids[peer] = req.header.client_id or ""
        if conn is not None:
            refusal = conn.refusal(api_key)  # Kafka's SASL gate: only the handshake before authentication
            if refusal is not None:
                log.warning("request_rejected", error=refusal, principal=conn.principal, **fields)
                return _CLOSE
        if route is None or not (route.min_version <= api_version <= route.max_version):
            if api_key == framing.API_VERSIONS_KEY:
                # KIP-511: answer in v0 so any client can read the error and retry lower.
                return framing.encode_response(api_key, 0, correlation_id, self._unsupported_api_versions(route))
            answer = None if route is None else _unsupported_version_answer(api_key, api_version, correlation_id)
            log.warning("request_rejected", error="unsupported api" if route is None else "unsupported version",
                        answered=answer is not None, **fields)
            return _CLOSE if answer is None else answer
        try:
            body = framing.decode_body(req)
        except (MalformedMessage, ValueError, UnicodeDecodeError) as e:
            log.warning("request_rejected", error=f"undecodable body: {e}", **fields)
            return _CLOSE
        ctx = RequestContext(api_key, api_version, correlation_id, req.header.client_id, peer, self.broker,
                             self.listener, connection=conn)
        try:
            response = await route.handler(ctx, body)
        except CloseConnection as e:
            log.warning("request_rejected", error=str(e), **fields)
            return _CLOSE
        except Exception:
            log.exception("request_failed", **fields)
            return _failed_answer(route, ctx, body, fields)
        if isinstance(response, Deferred):
            task = asyncio.ensure_future(self._finish_deferred(response, route, ctx, body, fields))
            self._track(task)
            return task
        if response is None:
            return None
        if self.observer is not None:
            self.observer.answer(api_key, response)
        return _encode(route, ctx, body, response, fields)

    async def _finish_deferred(self, deferred: Deferred, route: Route, ctx: RequestContext, body: Any,
                               fields: dict) -> bytes | None | object:
        try:
            response = await deferred.response
        except Exception:
            log.exception("request_failed", **fields)
            return _failed_answer(route, ctx, body, fields)
        if response is None:
            return None
        if self.observer is not None:
            self.observer.answer(ctx.api_key, response)
        return _encode(route, ctx, body, response, fields)

    def _unsupported_api_versions(self, route: Any) -> ApiVersionsResponse:
        low, high = (route.min_version, route.max_version) if route else (0, 0)
        return ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersion(framing.API_VERSIONS_KEY, low, high)],
        )


_CLOSE = object()


def _resolved(data: bytes) -> asyncio.Future:
    done = asyncio.get_running_loop().create_future()
    done.set_result(data)
    return done


def _ip_of(writer: asyncio.StreamWriter) -> str:
    peername = writer.get_extra_info("peername")
    return peername[0] if peername else "?"


_ENCODE_ERRORS = (struct.error, ValueError, OverflowError, TypeError, AttributeError, KeyError, IndexError)


def _encode(route: Route, ctx: RequestContext, request: Any, response: Any, fields: dict) -> bytes | object:
    """The response frame; if it cannot be encoded, the request's error answer instead."""
    try:
        return framing.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)
    except _ENCODE_ERRORS as e:
        first_error = e
    if _cut_error_messages(response):
        try:
            return framing.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)
        except _ENCODE_ERRORS as e:
            first_error = e
    log.error("response_encode_failed", error=repr(first_error), **fields)
    return _failed_answer(route, ctx, request, fields)


def _failed_answer(route: Route, ctx: RequestContext, request: Any, fields: dict) -> bytes | object:
    """UNKNOWN_SERVER_ERROR in the API's own error shape; closing is the last resort."""
    try:
        body = route.failed_response(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if body is not None:
            return framing.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, body)
    except Exception:  # noqa: BLE001 - even the error answer failed: fall back to closing
        log.exception("error_answer_failed", **fields)
        return _CLOSE
    log.warning("request_rejected", error="no error answer for this api", **fields)
    return _CLOSE


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


def _unsupported_version_answer(api_key: int, version: int, correlation_id: int) -> bytes | None:
    """UNSUPPORTED_VERSION in the response of the version the client sent, when we know that
    version's layout and it has a top-level error code; None when only closing is left (a version
    newer than our definitions, or a response whose errors live only per partition or per group,
    where an empty answer would read as success)."""
    spec = framing.response_spec(api_key)
    if spec is None or version not in spec.versions:
        return None
    error = next((f for f in spec.struct.fields if f.name == "error_code" and f.present(version)), None)
    if error is None:
        return None
    body = spec.struct.cls()
    body.error_code = ErrorCode.UNSUPPORTED_VERSION
    return framing.encode_response(api_key, version, correlation_id, body)


class _ResponseWriter:
    """One connection's responses, written in request order by one task."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=_MAX_DEFERRED)
        self.idle = asyncio.Event()
        self.idle.set()
        self.failed = False
        self.task = asyncio.ensure_future(self._run())

    async def add(self, response: asyncio.Future) -> None:
        self.idle.clear()
        await self.queue.put(response)  # blocks once _MAX_DEFERRED responses are waiting

    async def drained(self) -> None:
        await self.idle.wait()

    async def close(self) -> None:
        if not self.task.done():
            if self.queue.full():
                self.task.cancel()
            else:
                self.queue.put_nowait(None)
            await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> None:
        try:
            while True:
                item = await self.queue.get()
                if item is None:
                    return
                data = await item
                if data is _CLOSE:
                    self.writer.close()  # wakes the reader too
                    return
                if data is not None:
                    self.writer.write(data)
                    await self.writer.drain()
                if self.queue.empty():
                    self.idle.set()
        except (ConnectionError, OSError):
            pass
        finally:
            self.failed = True
            self.idle.set()  # nobody may wait on a writer that is gone
# How many deferred responses one connection may have waiting before it stops reading; librdkafka
# keeps at most 5 requests in flight per connection with idempotence, 1M without.
_MAX_DEFERRED = 128
