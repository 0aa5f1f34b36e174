"""The TCP server: size-prefixed frames in, responses out in request order.

Like Kafka, a connection has one request in progress at a time: the next frame is read only after
the previous response is written, so responses leave in request order without reordering logic.
Bad input closes that one connection with one structured log event; it never reaches other
connections or the process.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import structlog

from kbroker.broker.router import Deferred, RequestContext, Router
from kbroker.protocol import framing
from kbroker.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.primitives import MalformedMessage

log = structlog.get_logger("kbroker.server")
_SIZE = struct.Struct(">i")


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


class KafkaServer:
    def __init__(self, broker: Any, router: Router, host: str, port: int, max_request_bytes: int) -> None:
        self.broker = broker
        self.router = router
        self.host, self.port = host, port
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._in_flight: set[asyncio.Task] = set()
        self._closing = False
        # Seeing into it (broker/observe.py): per-request counters, and each peer's client id so a
        # test control can drop one client's connections.
        self.observer: Any = None
        self.client_ids: dict[str, str] = {}

    async def start(self) -> int:
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

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        if self.observer is not None:
            self.observer.connections_opened += 1
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        log.info("connection_open", peer=peer)
        reason = "closed by client"
        try:
            reason = await self._serve(reader, writer, peer)
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
            self.client_ids.pop(peer, None)
            writer.close()
            log.info("connection_close", peer=peer, reason=reason)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str) -> str:
        # Responses are written by one writer task in request order. A request is read only once
        # the previous one is answered, unless the previous handler returned a Deferred (its effects
        # are applied; it only waits for durability): then the next request starts at once.
        out = _ResponseWriter(writer)
        try:
            while not self._closing and not out.failed:
                try:
                    head = await reader.readexactly(4)
                except asyncio.IncompleteReadError as e:
                    return "closed by client" if not e.partial else "truncated frame"
                (size,) = _SIZE.unpack(head)
                if size < 0 or size > self.max_request_bytes:
                    log.warning("request_rejected", peer=peer, error="frame size out of bounds", size=size,
                                max_bytes=self.max_request_bytes)
                    return "bad frame size"
                frame = await reader.readexactly(size)
                response = await self._dispatch_tracked(frame, peer)
                if isinstance(response, asyncio.Future):
                    await out.add(response)  # deferred: go on reading
                    continue
                done = asyncio.get_running_loop().create_future()
                done.set_result(response)
                await out.add(done)
                await out.drained()
                if response is _CLOSE:
                    return "bad request"
            return "shutdown"
        finally:
            await out.close()

    async def _dispatch_tracked(self, frame: bytes, peer: str) -> Any:
        task = asyncio.ensure_future(self._dispatch(frame, peer))
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

    def _track(self, task: asyncio.Future) -> None:
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _dispatch(self, frame: bytes, peer: str) -> bytes | None | object:
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
        if route is None or not (route.min_version <= api_version <= route.max_version):
            if api_key == framing.API_VERSIONS_KEY:
                # KIP-511: answer in v0 so any client can read the error and retry lower.
                return framing.encode_response(api_key, 0, correlation_id, self._unsupported_api_versions(route))
            log.warning("request_rejected", error="unsupported api" if route is None else "unsupported version",
                        **fields)
            return _CLOSE
        try:
            body = framing.decode_body(req)
        except (MalformedMessage, ValueError, UnicodeDecodeError) as e:
            log.warning("request_rejected", error=f"undecodable body: {e}", **fields)
            return _CLOSE
        ctx = RequestContext(api_key, api_version, correlation_id, req.header.client_id, peer, self.broker)
        try:
            response = await route.handler(ctx, body)
        except CloseConnection as e:
            log.warning("request_rejected", error=str(e), **fields)
            return _CLOSE
        except Exception:
            log.exception("request_failed", **fields)
            return _CLOSE
        if isinstance(response, Deferred):
            task = asyncio.ensure_future(self._finish_deferred(response, ctx, fields))
            self._track(task)
            return task
        if response is None:
            return None
        if self.observer is not None and getattr(response, "error_code", 0):
            self.observer.error_answers[(api_key, int(response.error_code))] += 1
        return framing.encode_response(api_key, api_version, correlation_id, response)

    @staticmethod
    async def _finish_deferred(deferred: Deferred, ctx: RequestContext, fields: dict) -> bytes | None | object:
        try:
            response = await deferred.response
        except Exception:
            log.exception("request_failed", **fields)
            return _CLOSE
        if response is None:
            return None
        return framing.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)

    def _unsupported_api_versions(self, route: Any) -> ApiVersionsResponse:
        low, high = (route.min_version, route.max_version) if route else (0, 0)
        return ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersion(framing.API_VERSIONS_KEY, low, high)],
        )


_CLOSE = object()


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
