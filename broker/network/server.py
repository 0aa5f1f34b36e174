"""The TCP server: one asyncio.Protocol per connection, a thin shell around broker/network/connection.py.

The protocol object (`Connection`) does the framing, header decoding, version gating, in-order
answers and back-pressure without I/O; this module moves bytes between it and the transport, runs
handlers, and owns the connection limits. A handler is a plain `def` (run inline, no task: the hot
path) or an `async def` (run as a task; the connection starts no other request meanwhile); either
may return a `Deferred`, whose answer leaves in its turn once it resolves.

Bad input closes that one connection with one structured log event; it never reaches other
connections or the process. A handler that raises, or a response that cannot be encoded, gets its
API's error answer (broker/network/answers.py) and the connection stays open. No log event is written for a
request that succeeds: the counters in broker/operations/observe.py see every request.

Connections are bounded as in Kafka's SocketServer: one with no traffic and no answer owed for
`connections.max.idle.ms` is closed, and aborted if it holds answers its client took nothing of
for that long again; past `max.connections` (in all) or `max.connections.per.ip` a new connection is
closed at once with a `connection_refused` log event.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from functools import partial
from itertools import count
from types import CoroutineType
from typing import TYPE_CHECKING, Any, cast

import structlog

from .answers import CLOSE, Answer, ApiTable, answer, failed_answer, request_fields
from .error_answers import unsupported_version_answer
from .connection import AUTH_FAILED, Connection, Request
from .router import Deferred, RequestContext, Router

if TYPE_CHECKING:  # a listener with TLS or SASL imports broker/security/ (service.py); PLAINTEXT never does
    from ..security.service import ListenerSecurity, TlsAcceptor

log = structlog.get_logger("kbroker.server")
_unsupported_version_answer = unsupported_version_answer  # the name tests and older callers use


_connection_ids = count()  # each connection's id (Kafka's connectionId): what disconnect listeners are told
# Closes logged at debug: the client's own, and the broker's stop (one `broker_stopping` says it).
_ROUTINE_CLOSES = frozenset({"closed by client", "shutdown"})
# TLS: answers are handed to the encryption layer this much at a time (see `KafkaProtocol._write_tls`).
TLS_WRITE_PIECE = 256 * 1024


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
        self.table = ApiTable(router)
        self.host, self.port = host, port
        self.listener = listener
        self._sock = sock
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | TlsAcceptor | None = None
        self._connections: dict[KafkaProtocol, None] = {}
        self._per_ip: dict[str, int] = {}
        self._closing = False
        config = getattr(broker, "config", None)
        self.max_idle_s = getattr(config, "connections_max_idle_ms", 600000) / 1000.0
        self.max_connections = getattr(config, "max_connections", 2147483647)
        self.max_connections_per_ip = getattr(config, "max_connections_per_ip", 2147483647)
        self.failed_auth_delay_s = getattr(config, "connection_failed_authentication_delay_ms", 100) / 1000.0
        # Seeing into it (broker/operations/observe.py): per-request counters.
        self.observer: Any = None
        # The broker-wide connection count against the file-descriptor budget (broker/network/fd_budget.py).
        self.slots: Any = None
        self.unread: Any = None  # broker/network/unread_answers.py, shared by every listener
        # A node of several (broker/cluster.py): counts its requests and says whether a client is cut off
        # from it (then the connection closes, as a network partition would). None on one node.
        self.node_watch: Any = None
        self.disconnect_listeners: list[Any] = []  # called with a closed connection's id (the broker's list)

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        if self.security is not None and self.security.ssl_context is not None:
            from ..security.service import TlsAcceptor

            self._server = TlsAcceptor(self.host, self.port, self._on_tls_connection, sock=self._sock)
        elif self._sock is not None:
            self._server = await loop.create_server(lambda: KafkaProtocol(self), sock=self._sock)
        else:
            self._server = await loop.create_server(lambda: KafkaProtocol(self), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def restart(self) -> int:
        """Listen again on the same address after a shutdown (a stopped node of several started
        again, broker/cluster.py)."""
        self._closing = False
        self._sock = None  # closed with the server
        self._server = None
        return await self.start()

    async def shutdown(self, timeout: float) -> None:
        """Stop accepting, let in-flight requests finish (up to `timeout`), then close connections."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for protocol in list(self._connections):
            protocol.stop("shutdown")
        waits = [p.closed for p in self._connections]
        if waits:
            await asyncio.wait(waits, timeout=timeout)
        for protocol in list(self._connections):
            protocol.close_now("shutdown")
        waits = [p.closed for p in self._connections]
        if waits:
            await asyncio.wait(waits, timeout=1.0)

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
        security = self.security
        assert security is not None
        from ..security.service import TlsHandshakeFailed

        protocol = KafkaProtocol(self, tls=True)
        try:
            # (uvloop hands back its TLS layer, not our protocol: keep ours)
            _, _, auth = await security.accept_tls(sock, peer, lambda: protocol)
        except TlsHandshakeFailed as e:
            log.warning("tls_handshake_failed", peer=peer, listener=security.listener, error=str(e))
            return
        protocol.authenticated_tls(auth)

    def _over_limit(self, ip: str) -> str | None:
        dynamic = getattr(self.broker, "dynamic_configs", None)  # a change applies to the next connection
        most, per_ip = (dynamic.connection_limits(self.listener, ip) if dynamic is not None
                        else (self.max_connections, self.max_connections_per_ip))
        if len(self._connections) >= most:
            return f"the broker already has max.connections={most} connections"
        if self._per_ip.get(ip, 0) >= per_ip:
            return f"{ip} already has max.connections.per.ip={per_ip} connections"
        if self.slots is not None and self.slots.full():
            return (f"out of file descriptors: {self.slots.limit} connections is what ulimit -n leaves beside "
                    f"the segment-file cache (--log-max-open-files)")
        return None

    def _opened(self, protocol: KafkaProtocol) -> None:
        self._connections[protocol] = None
        self._per_ip[protocol.ip] = self._per_ip.get(protocol.ip, 0) + 1
        if self.slots is not None:
            self.slots.used += 1
        if self.observer is not None:
            self.observer.connection_opened(self.listener, protocol.ip)

    def _closed(self, protocol: KafkaProtocol) -> None:
        del self._connections[protocol]
        if self.observer is not None:
            self.observer.connection_closed()
        if self.slots is not None:
            self.slots.used -= 1
        left = self._per_ip.get(protocol.ip, 1) - 1
        if left > 0:
            self._per_ip[protocol.ip] = left
        else:
            self._per_ip.pop(protocol.ip, None)

    def open_connections(self) -> int:
        return len(self._connections)

    def drop_connections(self, client_id: str | None) -> int:
        """Close every connection of `client_id` (every connection when None); a test control."""
        dropped = 0
        for protocol in list(self._connections):
            if client_id is None or protocol.client_id == client_id:
                protocol.abort()
                dropped += 1
        return dropped


class KafkaProtocol(asyncio.Protocol):
    """The asyncio shell of one connection: bytes to and from its `Connection`, handlers run."""

    def __init__(self, server: KafkaServer, *, tls: bool = False) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None  # None until accepted (and, on TLS, authenticated)
        self.peer, self.ip, self.connection_id = "?", "?", str(next(_connection_ids))
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self._tls = tls
        self._held: list[bytes] = []  # TLS: bytes that came before the principal was known
        # TLS: answers not yet handed to the encryption layer (`_write_tls`), and their size
        self._tls_owed: deque[bytes | memoryview] = deque()
        self._tls_owed_bytes = 0
        self._transport_paused = False  # the transport's last flow-control word: pause_writing
        self._reading = True
        self._flush_soon = False
        self._close_reason: str | None = None
        self._last_read = self.loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._unsent_at_check = 0  # the transport's unsent bytes at the last idle check
        # A failed authentication's answer and close wait connection.failed.authentication.delay.ms
        self._auth_failure_timer: asyncio.TimerHandle | None = None
        self._auth_failure_delayed = False

    @property
    def client_id(self) -> str:
        return self.conn.client_id if self.conn is not None else ""

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        peername = transport.get_extra_info("peername")
        if peername:
            self.peer, self.ip = f"{peername[0]}:{peername[1]}", peername[0]
        if self._tls:
            return  # limits were checked before the handshake; `authenticated_tls` opens it
        reason = self.server._over_limit(self.ip)
        if reason is not None:
            log.warning("connection_refused", peer=self.peer, reason=reason)
            self.transport.abort()
            return
        security = self.server.security
        self._open(security.connection_auth(self.peer) if security is not None else None)

    def authenticated_tls(self, auth: Any) -> None:
        """The TLS handshake is done and the client's principal known: start serving."""
        if self.transport is None or self.transport.is_closing():
            return
        # Paused as soon as the TLS layer keeps anything back, resumed once it holds nothing: what it
        # has not handed to the socket's transport waits in `_tls_owed`, counted (`_write_tls`).
        self.transport.set_write_buffer_limits(high=1, low=0)
        self._open(auth)
        if self.conn is not None:  # the layer may hold the handshake's session tickets still
            self.conn.writing_paused = self._transport_paused
        held, self._held = self._held, []
        for data in held:
            self.data_received(data)

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None:
            self._held.append(data)
            return
        self._last_read = self.loop.time()
        conn.receive(data)
        self._pump()

    def eof_received(self) -> bool | None:
        if self.conn is None:
            return None  # close
        self.conn.end_of_input()
        self._pump()
        if self._tls:  # TLS cannot half-close: the layer shuts down now, after what it holds
            self._write_tls(everything=True)
            return None
        return True  # keep our side open until the answers owed are written

    def pause_writing(self) -> None:
        self._transport_paused = True
        if self.conn is not None:
            self.conn.writing_paused = True

    def resume_writing(self) -> None:
        self._transport_paused = False
        if self._tls_owed:
            self._write_tls()
            if self._tls_owed or self._transport_paused:
                return  # answers still owed: they stay counted, and the connection waits
        if self.server.unread is not None:
            self.server.unread.taken(self.peer)  # drained below the low-water mark: the client reads
        if self.conn is not None:
            self.conn.writing_paused = False
            self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._auth_failure_timer is not None:
            self._auth_failure_timer.cancel()
        self._tls_owed.clear()
        self._tls_owed_bytes = 0
        if self.server.unread is not None:
            self.server.unread.taken(self.peer)
        conn = self.conn
        if conn is not None:
            self.conn = None
            conn.stop("closed")
            self.server._closed(self)
            reason = self._close_reason
            if reason is None:
                reason = "truncated frame" if conn.buffered else "closed by client"
            # A client's own close is routine (a minute's summary counts it); one the broker made is not.
            (log.debug if reason in _ROUTINE_CLOSES else log.info)("connection_close", peer=self.peer, reason=reason)
            for listener in self.server.disconnect_listeners:  # Kafka's ConnectionDisconnectListeners
                listener(self.connection_id)
        if not self.closed.done():
            self.closed.set_result(None)

    # -- the connection's life ----------------------------------------------------------------------

    def _open(self, auth: Any) -> None:
        server = self.server
        security = server.security
        self.conn = Connection(server.table, self.peer, server.max_request_bytes, auth=auth,
                               max_receive_before_auth=security.max_receive_before_auth if security else 0)
        server._opened(self)
        log.debug("connection_open", peer=self.peer, listener=server.listener)
        if server._closing:
            self.stop("shutdown")
        self._idle_timer = self.loop.call_at(self._last_read + server.max_idle_s, self._check_idle)

    def _check_idle(self) -> None:
        conn = self.conn
        if conn is None:
            return
        idle_s = self.server.max_idle_s
        now = self.loop.time()
        transport = self.transport
        unsent = (transport.get_write_buffer_size() if transport is not None else 0) + self._tls_owed_bytes
        if conn.pending:  # an answer is owed (a JoinGroup waiting for its rebalance): not idle
            self._last_read = now
        elif unsent and (not self._unsent_at_check or unsent < self._unsent_at_check):
            # bytes wait for the client, first seen now or fewer than at the last check: it is
            # taking them (Kafka's idle expiry counts a send that progresses as activity too)
            self._last_read = now
        elif now - self._last_read >= idle_s:
            reason = f"idle for connections.max.idle.ms={int(idle_s * 1000)}"
            if unsent and transport is not None:
                # It took nothing for a whole interval: closing would wait for it forever, holding
                # the bytes (a half-closed connection, or one that stopped reading, is closing already).
                self._close_reason = f"{reason}, {unsent} bytes written to it never taken"
                transport.abort()
            else:
                self.close_now(reason)
            return
        self._unsent_at_check = unsent
        self._idle_timer = self.loop.call_at(self._last_read + idle_s, self._check_idle)

    def stop(self, reason: str) -> None:
        """Start no further request; close once the answers owed are written."""
        if self.conn is None:
            if self.transport is not None:
                self.transport.abort()  # a TLS connection not yet serving
            return
        self.conn.stop(reason)
        self._flush()

    def close_now(self, reason: str) -> None:
        """Close after writing what is ready; answers still owed are dropped."""
        if self.transport is not None and not self.transport.is_closing():
            self._close_reason = self._close_reason or reason
            self._write_tls(everything=True)
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self._close_reason = self._close_reason or "dropped by a test control"
            self.transport.abort()

    def _pump(self) -> None:
        """Run every request the connection has ready, then write what is ready."""
        conn = self.conn
        if conn is None:
            return
        try:
            while True:
                request = conn.next_request()
                if request is None:
                    break
                self._run(conn, request)
        except Exception:
            self._internal_error()
            return
        if conn.refused:
            observer = self.server.observer
            if observer is not None:
                for api_key, api_version in conn.refused:
                    observer.request(api_key, api_version, 0.0, True)
            conn.refused.clear()
        self._flush()

    def _internal_error(self) -> None:
        """A bug of ours: keep the process, drop this connection (an answer would be missing)."""
        log.exception("connection_error", peer=self.peer)
        self.close_now("internal error")

    def _flush(self) -> None:
        self._flush_soon = False
        conn, transport = self.conn, self.transport
        if conn is None or transport is None:
            return
        if conn.close_reason == AUTH_FAILED and not self._auth_failure_delayed:
            self._delay_auth_failure(transport)
            return
        out = conn.data_to_send()
        if out:
            if self._tls:
                self._tls_owed.extend(out)
                self._tls_owed_bytes += sum(map(len, out))
                self._write_tls()
                if self._tls_owed:
                    conn.writing_paused = True  # no further answers until these are handed on
            elif len(out) == 1:
                transport.write(out[0])
            else:
                transport.writelines(out)
            unread = self.server.unread
            if unread is not None and unread.held and not conn.writing_paused:
                unread.taken(self.peer)  # the transport took it all (below its high-water mark)
        if conn.close_reason is not None:
            self.close_now(conn.close_reason)
            return
        wants = conn.wants_read
        if wants != self._reading:
            self._reading = wants
            if wants:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _delay_auth_failure(self, transport: asyncio.Transport) -> None:
        """As Kafka's Selector does with `connection.failed.authentication.delay.ms`: a failed SASL
        exchange (a wrong password, an unsupported mechanism, a bad state) is answered and closed only
        after the delay, on a timer: the loop and other connections go on meanwhile, this one reads
        nothing more. (Kafka closes a failed v0 exchange at once; here it waits too, so that the old
        framing is no faster way to guess passwords.)"""
        if self._auth_failure_timer is not None:
            return
        delay = self.server.failed_auth_delay_s
        if delay <= 0:
            self._auth_failure_delayed = True
            self._flush()
            return
        self._reading = False
        transport.pause_reading()
        self._auth_failure_timer = self.loop.call_later(delay, self._auth_failure_delay_over)

    def _auth_failure_delay_over(self) -> None:
        self._auth_failure_delayed = True
        self._flush()

    def _write_tls(self, everything: bool = False) -> None:
        """Hand owed answers to the TLS layer a piece at a time while it passes them on.

        The layer (uvloop's, as asyncio's) encrypts what it is given and hands all of it to the
        socket's transport unless that one has paused it (over its 64 KiB high-water mark); this
        protocol's own pause comes from what the layer keeps back (`authenticated_tls` sets that
        mark to a byte). One write of a 16 MiB Fetch answer went whole into the socket's transport,
        no pause came, and the unread-answers bound (broker/network/unread_answers.py) counted the answer
        taken while the client had read nothing; on a resume the layer hands on everything it kept
        back at once. So answers wait here until the layer takes them, at most a piece past the
        socket's mark at a time, and the bound counts them until the last piece is handed on.
        `everything`: at a close, all of it at once, for the layer to flush before it shuts down."""
        owed, transport = self._tls_owed, self.transport
        if transport is None or transport.is_closing():
            owed.clear()  # closing (or aborted) already: nothing more reaches the client
            self._tls_owed_bytes = 0
            return
        if everything:
            if owed:
                rest = list(owed)
                owed.clear()  # first: a resume the write may call back must find nothing owed
                self._tls_owed_bytes = 0
                transport.writelines(rest)
            return
        while owed and not self._transport_paused:
            piece: list[bytes | memoryview] = []
            size = 0
            while owed and size < TLS_WRITE_PIECE:
                data = owed[0]
                room = TLS_WRITE_PIECE - size
                if len(data) <= room:
                    piece.append(owed.popleft())
                    size += len(data)
                else:
                    view = memoryview(data)
                    piece.append(view[:room])
                    owed[0] = view[room:]
                    size += room
            self._tls_owed_bytes -= size
            transport.writelines(piece)  # may pause us (pause_writing) before it returns

    def _flush_later(self) -> None:
        """Answers that completed outside `_pump` (tasks, deferred waits): written together once
        this turn of the event loop is over, so an fsync's worth of acknowledgements is one write."""
        if not self._flush_soon:
            self._flush_soon = True
            self.loop.call_soon(self._pump)

    # -- running a handler ------------------------------------------------------------------------

    def _run(self, conn: Connection, request: Request) -> None:
        entry = request.entry
        assert entry is not None and entry.route is not None
        ctx = RequestContext(request.api_key, request.api_version, request.correlation_id, request.client_id,
                             self.peer, self.server.broker, self.server.listener, conn.auth, self.connection_id)
        started = time.perf_counter()
        if (watch := self.server.node_watch) is not None and watch(request.api_key, request.client_id):
            log.info("client_cut_off", **request_fields(ctx))
            self._answer(conn, request, CLOSE, started)
            return
        try:
            result = entry.route.handler(ctx, request.body)
        except CloseConnection as e:
            log.warning("request_rejected", error=str(e), **request_fields(ctx))
            self._answer(conn, request, CLOSE, started)
            return
        except Exception:
            log.exception("request_failed", **request_fields(ctx))
            self._answer(conn, request, failed_answer(entry, ctx, request.body), started)
            return
        if type(result) is CoroutineType:  # an async handler: nothing else starts until it is done
            conn.running = request
            task = self.loop.create_task(result)
            task.add_done_callback(partial(self._handler_done, conn, request, ctx, started))
            return
        self._settle(conn, request, ctx, result, started)

    def _handler_done(self, conn: Connection, request: Request, ctx: RequestContext, started: float,
                      task: asyncio.Task) -> None:
        conn.running = None
        try:
            result = task.result()
        except CloseConnection as e:
            log.warning("request_rejected", error=str(e), **request_fields(ctx))
            self._answer(conn, request, CLOSE, started)
        except (Exception, asyncio.CancelledError):
            log.exception("request_failed", **request_fields(ctx))
            self._answer(conn, request, failed_answer(request.entry, ctx, request.body),  # type: ignore[arg-type]
                         started)
        else:
            try:
                self._settle(conn, request, ctx, result, started)
            except Exception:
                self._internal_error()
                return
        if self.conn is conn:
            self._pump()

    def _settle(self, conn: Connection, request: Request, ctx: RequestContext, result: Any, started: float) -> None:
        if isinstance(result, Deferred):  # effects applied; the answer waits (for an fsync)
            response = result.response  # a future (a group's answer) or a coroutine (Produce's)
            waiting = response if isinstance(response, asyncio.Future) else asyncio.ensure_future(response)
            waiting.add_done_callback(partial(self._deferred_done, conn, request, ctx, started))
            return
        self._answer(conn, request, self._encoded(request, ctx, result), started)

    def _deferred_done(self, conn: Connection, request: Request, ctx: RequestContext, started: float,
                       waiting: asyncio.Future) -> None:
        try:
            result = waiting.result()
        except (Exception, asyncio.CancelledError):
            log.exception("request_failed", **request_fields(ctx))
            encoded = failed_answer(request.entry, ctx, request.body)  # type: ignore[arg-type]
        else:
            try:
                encoded = self._encoded(request, ctx, result)
            except Exception:
                self._internal_error()
                return
        self._answer(conn, request, encoded, started)
        if self.conn is conn:
            self._flush_later()

    def _encoded(self, request: Request, ctx: RequestContext, response: Any) -> Answer:
        if response is None:
            return None
        observer = self.server.observer
        if observer is not None:
            observer.answer(request.api_key, response)
        return answer(request.entry, ctx, request.body, response)  # type: ignore[arg-type]

    def _answer(self, conn: Connection, request: Request, encoded: Answer, started: float) -> None:
        observer = self.server.observer
        if observer is not None:
            observer.request(request.api_key, request.api_version, time.perf_counter() - started, encoded is CLOSE)
        conn.complete(request, encoded)

