"""A Kafka client between nodes (over PostgreSQL, `serve --cluster`): one pooled connection per node,
requests pipelined on it and matched to their answers by correlation id, as Kafka's NetworkClient
keeps one connection per broker. The share persister (broker/coordinators/share_persister.py) sends
the share state RPCs through it to the node leading a key's `__share_group_state` partition.

Bounded: a connection is opened within `connect_timeout_s`, each request is answered within
`request_timeout_s` (else it fails with TimeoutError and the connection is dropped, since its later
answers would be out of step), and a frame larger than MAX_FRAME closes it. A lost connection fails
every request waiting on it with ConnectionError; the next request opens a new one. The callers
retry (Kafka's persister does).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import structlog

from ...protocol import framing

log = structlog.get_logger("kbroker.node_client")
_SIZE = struct.Struct(">i")
MAX_FRAME = 100 * 1024 * 1024  # the share state answers are small; this bounds a confused peer


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        self.reader, self.writer = reader, writer
        self.pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}  # correlation -> (key, version, answer)
        self.next_correlation = 0
        self.closed = False
        self.task = asyncio.get_running_loop().create_task(self._read(), name=f"node-client-{name}")

    async def _read(self) -> None:
        error: BaseException = ConnectionError("connection closed by the peer")
        try:
            while True:
                (size,) = _SIZE.unpack(await self.reader.readexactly(4))
                if not 0 < size <= MAX_FRAME:
                    raise ConnectionError(f"a frame of {size} bytes")
                frame = await self.reader.readexactly(size)
                (correlation,) = _SIZE.unpack_from(frame)
                entry = self.pending.pop(correlation, None)
                if entry is None:
                    raise ConnectionError(f"an answer to no request (correlation id {correlation})")
                api_key, version, future = entry
                if not future.done():
                    try:
                        future.set_result(framing.decode_response(api_key, version, frame)[1])
                    except Exception as exc:  # noqa: BLE001 - an undecodable answer fails its request
                        future.set_exception(ConnectionError(f"an undecodable answer: {exc!r}"))
        except (asyncio.IncompleteReadError, OSError, ConnectionError) as exc:
            error = exc if isinstance(exc, ConnectionError) else ConnectionError(repr(exc))
        except asyncio.CancelledError:
            error = ConnectionError("the client closed")
            raise
        finally:
            self.close(error)

    def send(self, api_key: int, version: int, client_id: str, body: Any) -> asyncio.Future[Any]:
        if self.closed:
            raise ConnectionError("the connection closed")
        self.next_correlation = (self.next_correlation + 1) & 0x7FFFFFFF
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_correlation] = (api_key, version, future)
        self.writer.write(framing.encode_request(api_key, version, self.next_correlation, client_id, body))
        return future

    def close(self, error: BaseException) -> None:
        if self.closed:
            return
        self.closed = True
        for _, _, future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()
        self.writer.close()
        if asyncio.current_task() is not self.task:
            self.task.cancel()


class NodeClient:
    """Requests to other nodes, one connection per (node, address)."""

    def __init__(self, client_id: str, *, connect_timeout_s: float = 5.0, request_timeout_s: float = 10.0) -> None:
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._connections: dict[tuple[int, str, int], _Connection] = {}
        self._opening: dict[tuple[int, str, int], asyncio.Future[_Connection]] = {}

    async def call(self, node: int, host: str, port: int, api_key: int, version: int, body: Any) -> Any:
        """The answer of `node` at host:port; raises ConnectionError or TimeoutError."""
        connection = await self._connection((node, host, port))
        answer = connection.send(api_key, version, self.client_id, body)
        try:
            return await asyncio.wait_for(asyncio.shield(answer), self.request_timeout_s)
        except asyncio.TimeoutError:
            connection.close(ConnectionError("a request timed out"))
            raise

    async def _connection(self, where: tuple[int, str, int]) -> _Connection:
        found = self._connections.get(where)
        if found is not None and not found.closed:
            return found
        opening = self._opening.get(where)
        if opening is None:  # one connect at a time per node; the others wait for it
            opening = self._opening[where] = asyncio.ensure_future(self._open(where))
            opening.add_done_callback(lambda _: self._opening.pop(where, None))
        return await asyncio.shield(opening)

    async def _open(self, where: tuple[int, str, int]) -> _Connection:
        node, host, port = where
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.connect_timeout_s)
        connection = self._connections[where] = _Connection(reader, writer, f"{node}@{host}:{port}")
        log.info("node_connection_opened", node=node, address=f"{host}:{port}")
        return connection

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            connection.close(ConnectionError("the client closed"))
            await asyncio.gather(connection.task, return_exceptions=True)
        self._connections.clear()
