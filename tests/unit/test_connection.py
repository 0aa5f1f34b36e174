"""The connection as a protocol object (broker/network/connection.py) and its asyncio shell (broker/network/server.py),
driven through in-memory transports: no sockets, so ordering, back-pressure and shutdown are exact.

The integration tests (tests/integration/test_server.py and the security/limit tests) drive the same
code over real sockets with real clients; these pin down what a socket cannot show deterministically.
"""

from __future__ import annotations

import asyncio
import struct
import types
from typing import Any

import pytest
from structlog.testing import capture_logs

from kbroker.broker.network.answers import CLOSE, ApiTable, encode
from kbroker.broker.network.connection import Connection
from kbroker.broker.network.router import Deferred, Router
from kbroker.broker.network.server import KafkaProtocol, KafkaServer
from kbroker.protocol import framing
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
from kbroker.protocol.messages.heartbeat_response import HeartbeatResponse
from kbroker.protocol.messages.metadata_response import MetadataResponse

HEARTBEAT, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 12, 3, 18, 22


def _beat(correlation: int, generation: int | None = None, version: int = 4) -> bytes:
    generation = correlation if generation is None else generation
    return framing.encode_request(HEARTBEAT, version, correlation, "c", HeartbeatRequest("g", generation, "m"))


def _frames(data: bytes) -> list[bytes]:
    out = []
    while data:
        (size,) = struct.unpack_from(">i", data)
        out.append(data[4:4 + size])
        data = data[4 + size:]
    return out


def _correlations(data: bytes) -> list[int]:
    return [struct.unpack_from(">i", f)[0] for f in _frames(data)]


def _echo_generation(ctx, request: HeartbeatRequest) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=request.generation_id, error_code=0)


def _router(handle=_echo_generation, **modules: Any) -> Router:
    router = Router()
    router.register(types.SimpleNamespace(API_KEY=HEARTBEAT, VERSIONS=(0, 4), handle=handle))
    for key, module in modules.items():
        router.register(module)
    return router


# -- the sans-IO object ------------------------------------------------------------------------------

def _connection(router: Router | None = None, **kw: Any) -> Connection:
    return Connection(ApiTable(router or _router()), "127.0.0.1:5000", 1 << 20, **kw)


def _take_all(conn: Connection) -> list:
    out = []
    while (request := conn.next_request()) is not None:
        out.append(request)
    return out


def test_answers_completed_out_of_order_leave_in_request_order() -> None:
    conn = _connection()
    wire = _beat(1) + _beat(2) + _beat(3)
    conn.receive(wire[:7])  # bytes arrive in any cut
    assert conn.next_request() is None
    conn.receive(wire[7:])
    first, second, third = _take_all(conn)
    assert (first.correlation_id, second.correlation_id, third.correlation_id) == (1, 2, 3)
    assert first.body.generation_id == 1 and first.client_id == "c"
    table_entry = first.entry
    conn.complete(third, encode(table_entry, 3, HeartbeatResponse()))
    conn.complete(second, encode(table_entry, 2, HeartbeatResponse()))
    assert conn.data_to_send() == []  # the first is still owed
    conn.complete(first, encode(table_entry, 1, HeartbeatResponse()))
    assert _correlations(b"".join(conn.data_to_send())) == [1, 2, 3]
    assert conn.pending == 0 and conn.close_reason is None


def test_back_pressure_stops_taking_requests_and_reading_then_resumes() -> None:
    conn = _connection(max_pending=2, read_high_water=3 * len(_beat(1)))
    conn.receive(_beat(1) + _beat(2) + _beat(3))
    first, second = _take_all(conn)
    assert conn.pending == 2 and conn.wants_read  # a stall with little buffered: go on reading
    conn.receive(_beat(4) + _beat(5))
    assert conn.next_request() is None and not conn.wants_read  # stalled with 3 frames buffered
    conn.complete(first, None)  # no response (as Produce acks=0)
    assert conn.wants_read  # room for one more request
    third = conn.next_request()
    assert third is not None and third.correlation_id == 3 and conn.next_request() is None
    conn.complete(second, None)
    conn.complete(third, None)
    fourth, fifth = _take_all(conn)
    assert (fourth.correlation_id, fifth.correlation_id) == (4, 5)
    conn.complete(fourth, None)
    conn.complete(fifth, None)
    assert conn.wants_read
    # the transport's write buffer over its high-water mark stops requests too
    conn.writing_paused = True
    conn.receive(_beat(6))
    assert conn.next_request() is None
    conn.writing_paused = False
    assert conn.next_request().correlation_id == 6


def test_a_running_handler_holds_the_next_request_until_it_is_done() -> None:
    conn = _connection()
    conn.receive(_beat(1) + _beat(2))
    first = conn.next_request()
    conn.running = first
    assert conn.next_request() is None
    conn.running = None
    assert conn.next_request().correlation_id == 2


def test_shutdown_finishes_what_is_in_flight_then_closes() -> None:
    conn = _connection()
    conn.receive(_beat(1))
    first = conn.next_request()
    conn.receive(_beat(2))
    conn.stop("shutdown")
    assert conn.next_request() is None and not conn.wants_read
    assert conn.close_reason is None  # an answer is still owed
    conn.complete(first, encode(first.entry, 1, HeartbeatResponse()))
    assert _correlations(b"".join(conn.data_to_send())) == [1]
    assert conn.close_reason == "shutdown"


@pytest.mark.parametrize(("label", "wire", "error"), [
    ("oversized frame", struct.pack(">i", (1 << 20) + 1), "frame size out of bounds"),
    ("negative size", struct.pack(">i", -1), "frame size out of bounds"),
    ("short header", struct.pack(">i", 6) + b"\x00\x0c\x00\x04\x00\x00", "shorter than a header"),
    ("unknown api key", struct.pack(">ihhih", 10, 9999, 0, 1, -1), "unknown api key"),
    ("client id past the end", struct.pack(">ihhih", 10, HEARTBEAT, 4, 1, 50), "undecodable header"),
    ("header ends in the client id", struct.pack(">ihhi", 8, HEARTBEAT, 4, 1), "undecodable header"),
    ("garbage body", struct.pack(">ihhih", 14, HEARTBEAT, 3, 1, -1) + b"\x7f\xff\x00\x00", "undecodable body"),
    ("unsupported version, no top-level error", struct.pack(">ihhih", 11, METADATA, 99, 1, -1) + b"\x00",
     "unsupported"),
])
def test_bad_input_is_one_log_event_and_a_close_after_the_answers_owed(label: str, wire: bytes, error: str) -> None:
    conn = _connection()
    conn.receive(_beat(1))
    owed = conn.next_request()
    with capture_logs() as events:
        conn.receive(wire + _beat(2))  # nothing after bad input is served
        assert conn.next_request() is None
    rejected = [e for e in events if e["event"] == "request_rejected"]
    assert len(rejected) == 1 and error in rejected[0]["error"], events
    assert rejected[0]["peer"] == "127.0.0.1:5000"
    # a refused request whose header names its api counts as a failed request in the metrics
    has_header = label not in ("oversized frame", "negative size", "short header")
    assert conn.refused == ([struct.unpack_from(">hh", wire, 4)] if has_header else [])
    assert conn.close_reason is None and not conn.wants_read  # the earlier answer is still owed
    conn.complete(owed, encode(owed.entry, 1, HeartbeatResponse()))
    assert _correlations(b"".join(conn.data_to_send())) == [1]
    assert conn.close_reason in ("bad request", "bad frame size")


def test_unsupported_versions_answered_as_kafka_does() -> None:
    router = _router(init=types.SimpleNamespace(API_KEY=INIT_PRODUCER_ID, VERSIONS=(0, 4), handle=None))
    conn = _connection(router)
    # KIP-511: ApiVersions of a version we do not serve (header v2) is answered in v0, not closed.
    frame = struct.pack(">hhih", API_VERSIONS, 99, 7, 1) + b"c" + b"\x00" + b"\x00"
    # InitProducerId v6 has a top-level error code: UNSUPPORTED_VERSION in v6, the connection stays.
    too_new = framing.encode_request(INIT_PRODUCER_ID, 6, 8, "c", framing.request_spec(INIT_PRODUCER_ID).struct.cls())
    with capture_logs() as events:
        conn.receive(struct.pack(">i", len(frame)) + frame + too_new + _beat(9))
        served = _take_all(conn)
    assert [r.correlation_id for r in served] == [9]
    versions, init = _frames(b"".join(conn.data_to_send()))
    correlation, body = framing.decode_response(API_VERSIONS, 0, versions)
    assert (correlation, body.error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(API_VERSIONS, 0, 0)]
    correlation, body = framing.decode_response(INIT_PRODUCER_ID, 6, init)
    assert (correlation, body.error_code) == (8, ErrorCode.UNSUPPORTED_VERSION)
    assert [e["answered"] for e in events if e["event"] == "request_rejected"] == [True]
    assert conn.close_reason is None


def test_a_close_answer_ends_the_connection_after_the_answers_before_it() -> None:
    conn = _connection()
    conn.receive(_beat(1) + _beat(2) + _beat(3))
    first, second = conn.next_request(), conn.next_request()
    conn.complete(second, CLOSE)
    assert conn.next_request() is None  # nothing starts after a close
    conn.complete(first, encode(first.entry, 1, HeartbeatResponse()))
    assert _correlations(b"".join(conn.data_to_send())) == [1]
    assert conn.close_reason == "bad request"


def test_half_close_serves_the_whole_frames_sent_then_closes() -> None:
    conn = _connection()
    conn.receive(_beat(1) + _beat(2)[:5])
    conn.end_of_input()
    first = conn.next_request()
    assert conn.next_request() is None and conn.close_reason is None
    conn.complete(first, encode(first.entry, 1, HeartbeatResponse()))
    assert _correlations(b"".join(conn.data_to_send())) == [1]
    assert conn.close_reason == "truncated frame"


# -- the asyncio shell, over an in-memory transport -----------------------------------------------

class MemoryTransport(asyncio.Transport):
    """What a TCP transport does that the shell can see: writes kept, reading paused and resumed,
    a close reported to the protocol on the next turn of the loop."""

    def __init__(self, protocol: asyncio.Protocol, port: int = 5000) -> None:
        super().__init__()
        self.protocol = protocol
        self.peername = ("127.0.0.1", port)
        self.written = bytearray()
        self.writes = 0
        self.reading = True
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peername if name == "peername" else default

    def write(self, data: bytes) -> None:
        assert not self.closing
        self.written += data
        self.writes += 1

    def writelines(self, lines) -> None:
        assert not self.closing
        for data in lines:
            self.written += data
        self.writes += 1

    def get_write_buffer_size(self) -> int:
        return 0  # every write is taken at once

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.limits = (high, low)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    abort = close


def _open(server: KafkaServer, port: int = 5000) -> tuple[KafkaProtocol, MemoryTransport]:
    protocol = KafkaProtocol(server)
    transport = MemoryTransport(protocol, port)
    protocol.connection_made(transport)
    return protocol, transport


def _server(router: Router, **config: Any) -> KafkaServer:
    broker = types.SimpleNamespace(config=types.SimpleNamespace(**config)) if config else types.SimpleNamespace()
    return KafkaServer(broker, router, "127.0.0.1", 0, 1 << 20)


def _generations(data: bytes) -> list[int]:
    return [framing.decode_response(HEARTBEAT, 4, f)[1].throttle_time_ms for f in _frames(bytes(data))]


async def test_plain_handlers_answer_inline_in_one_write_without_a_task() -> None:
    tasks_before = len(asyncio.all_tasks())
    seen_tasks = []

    def plain(ctx, request):
        seen_tasks.append(asyncio.current_task())
        return _echo_generation(ctx, request)

    protocol, transport = _open(_server(_router(plain)))
    protocol.data_received(_beat(1) + _beat(2) + _beat(3))
    # answered before data_received returned: no task, no turn of the loop; the three in one write
    assert _generations(transport.written) == [1, 2, 3] and transport.writes == 1
    assert all(t is seen_tasks[0] for t in seen_tasks) and len(asyncio.all_tasks()) == tasks_before
    transport.close()
    await protocol.closed


async def test_async_handlers_run_one_at_a_time_and_answer_in_order() -> None:
    order = []
    gates: dict[int, asyncio.Event] = {}

    async def slow(ctx, request):
        order.append(("start", request.generation_id))
        gates[request.generation_id] = asyncio.Event()
        await gates[request.generation_id].wait()
        order.append(("end", request.generation_id))
        return _echo_generation(ctx, request)

    protocol, transport = _open(_server(_router(slow)))
    protocol.data_received(_beat(1) + _beat(2))
    await asyncio.sleep(0)
    assert order == [("start", 1)] and transport.written == b""  # the second waits for the first
    gates[1].set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == [("start", 1), ("end", 1), ("start", 2)] and _generations(transport.written) == [1]
    gates[2].set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert _generations(transport.written) == [1, 2]
    transport.close()
    await protocol.closed


async def test_deferred_answers_complete_out_of_order_and_leave_in_order() -> None:
    waits: dict[int, asyncio.Future] = {}

    def deferring(ctx, request):
        if request.generation_id % 2:  # odd: waits (as a commit waits for its fsync)
            waits[request.generation_id] = asyncio.get_running_loop().create_future()

            async def later(g=request.generation_id):
                await waits[g]
                return HeartbeatResponse(throttle_time_ms=g)

            return Deferred(later())
        return _echo_generation(ctx, request)

    protocol, transport = _open(_server(_router(deferring)))
    protocol.data_received(_beat(1) + _beat(2) + _beat(3) + _beat(4))
    assert sorted(waits) == [1, 3] and transport.written == b""  # all four started; 2 and 4 wait their turn
    waits[3].set_result(None)
    for _ in range(5):
        await asyncio.sleep(0)
    assert transport.written == b""
    waits[1].set_result(None)
    for _ in range(5):
        await asyncio.sleep(0)
    assert _generations(transport.written) == [1, 2, 3, 4]
    transport.close()
    await protocol.closed


async def test_write_back_pressure_pauses_reading_and_resumes() -> None:
    protocol, transport = _open(_server(_router()))
    protocol.pause_writing()
    protocol.data_received(_beat(1))
    assert transport.written == b""
    protocol.data_received(_beat(2) * 20000)  # a stalled connection stops reading past its high water
    assert not transport.reading
    protocol.resume_writing()
    assert transport.reading and len(_frames(bytes(transport.written))) == 20001
    transport.close()
    await protocol.closed


async def test_shutdown_waits_for_in_flight_requests_then_closes() -> None:
    release = asyncio.Event()

    async def parked(ctx, request):  # as a JoinGroup parked until its rebalance completes
        await release.wait()
        return _echo_generation(ctx, request)

    server = _server(_router(parked))
    busy, busy_transport = _open(server, 5000)
    idle, idle_transport = _open(server, 5001)
    busy.data_received(_beat(1))
    await asyncio.sleep(0)
    with capture_logs() as events:
        stopping = asyncio.ensure_future(server.shutdown(timeout=5))
        for _ in range(3):
            await asyncio.sleep(0)
        assert idle_transport.closing and not busy_transport.closing
        busy.data_received(_beat(2))  # read no more: this one is never started
        release.set()
        await asyncio.wait_for(stopping, 5)
    assert _generations(busy_transport.written) == [1] and busy_transport.closing
    assert {e["reason"] for e in events if e["event"] == "connection_close"} == {"shutdown"}
    assert not server._connections


async def test_idle_connection_is_closed_unless_an_answer_is_owed() -> None:
    release = asyncio.Event()

    async def parked(ctx, request):
        await release.wait()
        return _echo_generation(ctx, request)

    server = _server(_router(parked), connections_max_idle_ms=50)
    waiting, waiting_transport = _open(server, 5000)
    silent, silent_transport = _open(server, 5001)
    waiting.data_received(_beat(1))
    with capture_logs() as events:
        await asyncio.wait_for(silent.closed, 5)
    assert "connections.max.idle.ms=50" in [e for e in events if e["event"] == "connection_close"][0]["reason"]
    await asyncio.sleep(0.15)
    assert not waiting_transport.closing  # owed an answer: not idle
    release.set()
    await asyncio.wait_for(waiting.closed, 5)  # answered, then idle
    assert _generations(waiting_transport.written) == [1]


async def test_a_raising_handler_gets_its_error_answer_and_a_close_request_closes() -> None:
    from kbroker.broker.network.server import CloseConnection

    def failing(ctx, request):
        if request.generation_id == 2:
            raise CloseConnection("as Kafka would")
        raise RuntimeError("a bug")

    protocol, transport = _open(_server(_router(failing)))
    with capture_logs() as events:
        protocol.data_received(_beat(1) + _beat(2) + _beat(3))
        await asyncio.wait_for(protocol.closed, 5)
    (only,) = _frames(bytes(transport.written))
    assert framing.decode_response(HEARTBEAT, 4, only)[1].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert [e["event"] for e in events if e["event"] != "connection_close"] == ["request_failed", "request_rejected"]


async def test_the_observer_counts_every_request_without_a_log_event() -> None:
    from kbroker.broker.operations.observe import Observations

    server = _server(_router())
    server.observer = Observations()
    protocol, transport = _open(server)
    with capture_logs() as events:
        protocol.data_received(_beat(1) + _beat(2))
    assert events == []
    assert server.observer.requests[(HEARTBEAT, 4)] == 2 and server.observer.latency[HEARTBEAT].count == 2
    transport.close()
    await protocol.closed


def test_the_table_caches_what_each_version_needs() -> None:
    # an unserved API's entry encodes nothing; a served one round-trips through the codec
    table = ApiTable(_router(meta=types.SimpleNamespace(API_KEY=METADATA, VERSIONS=(0, 12), handle=None)))
    entry = table.entry(METADATA, 12)
    frame = encode(entry, 5, MetadataResponse())
    assert framing.decode_response(METADATA, 12, frame[4:])[0] == 5
    assert not table.entry(METADATA, 13).served and table.entry(METADATA, 12) is entry


async def test_tls_bytes_before_the_principal_is_known_are_served_after() -> None:
    from kbroker.broker.security.session import ConnectionAuth

    server = _server(_router())
    protocol = KafkaProtocol(server, tls=True)
    transport = MemoryTransport(protocol)
    protocol.connection_made(transport)  # the handshake is done; the principal is being mapped
    protocol.data_received(_beat(1))
    assert transport.written == b"" and not server._connections
    protocol.authenticated_tls(ConnectionAuth(sasl=False, mechanisms=(), credentials=None, peer=protocol.peer,
                                              listener="SSL", principal="User:CN=alice"))
    assert _generations(transport.written) == [1] and protocol in server._connections
    transport.close()
    await protocol.closed
    assert not server._connections


class LayerTransport(MemoryTransport):
    """A TLS layer as the shell sees it: it passes writes on while its socket has `room`; a write
    that does not fit is kept back, and the protocol paused until `drain`."""

    def __init__(self, protocol: asyncio.Protocol, room: int) -> None:
        super().__init__(protocol)
        self.room, self.kept, self.sizes = room, 0, []

    def writelines(self, lines) -> None:
        lines = list(lines)
        size = sum(map(len, lines))
        super().writelines(lines)
        self.sizes.append(size)
        if self.kept or size > self.room:
            self.kept += size
            if self.kept == size:
                self.protocol.pause_writing()
        else:
            self.room -= size

    def get_write_buffer_size(self) -> int:
        return self.kept

    def drain(self, room: int) -> None:
        self.room, self.kept = room, 0
        self.protocol.resume_writing()


async def test_tls_answers_wait_in_the_connection_until_the_layer_takes_them() -> None:
    """uvloop's TLS layer hands on all it is given unless its socket paused it, and on a resume all
    it kept back: answers wait in the connection, counted by the unread-answers bound, and go to
    the layer a piece at a time (broker/network/server.py `_write_tls`)."""
    from kbroker.broker.security.session import ConnectionAuth
    from kbroker.broker.network.server import TLS_WRITE_PIECE
    from kbroker.broker.network.unread_answers import UnreadAnswers

    server = _server(_router())
    server.unread = UnreadAnswers(1 << 30)
    protocol = KafkaProtocol(server, tls=True)
    transport = LayerTransport(protocol, room=100_000)
    protocol.connection_made(transport)
    protocol.authenticated_tls(ConnectionAuth(sasl=False, mechanisms=(), credentials=None, peer=protocol.peer,
                                              listener="SSL", principal="User:CN=alice"))
    assert transport.limits == (1, 0)  # paused as soon as the layer keeps anything back
    beats = 60_000  # 16-byte answers: 3.7 pieces
    server.unread.read(protocol.peer, 123)  # as a Fetch answer among them would be
    protocol.data_received(b"".join(_beat(i) for i in range(1, beats + 1)))
    assert transport.sizes == [TLS_WRITE_PIECE]  # one piece went, kept back: the rest waits here
    assert protocol._tls_owed_bytes > TLS_WRITE_PIECE and protocol.conn.writing_paused
    assert server.unread.held == 123  # not taken while answers are owed
    transport.drain(room=TLS_WRITE_PIECE)  # one more piece fits, the next is kept back again
    assert transport.sizes[1:] == [TLS_WRITE_PIECE, TLS_WRITE_PIECE] and server.unread.held == 123
    transport.drain(room=1 << 30)
    assert protocol._tls_owed_bytes == 0 and not protocol.conn.writing_paused
    assert server.unread.held == 0  # all handed on: taken
    assert all(size <= TLS_WRITE_PIECE for size in transport.sizes)
    assert _generations(transport.written) == list(range(1, beats + 1))  # every answer, in order, once
    transport.close()
    await protocol.closed


async def test_connections_past_max_connections_are_refused_with_one_event() -> None:
    server = _server(_router(), max_connections=1)
    first, first_transport = _open(server, 5000)
    with capture_logs() as events:
        second, second_transport = _open(server, 5001)
    assert second_transport.closing and not first_transport.closing
    assert [e["event"] for e in events] == ["connection_refused"] and "max.connections=1" in events[0]["reason"]
    await second.closed
    assert list(server._connections) == [first]
    first_transport.close()
    await first.closed
