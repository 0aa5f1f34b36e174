"""A minimal asyncio Kafka client for the load generators: kbroker's own codec over one TCP connection.

Requests may be pipelined: `send()` writes a frame and returns a future for its response; a reader
task matches responses to requests by correlation id (responses come back in request order).
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from kbroker.protocol import framing
from kbroker.protocol.frames import FrameReader

_CORRELATION = struct.Struct(">i")


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._correlation = 0
        self._pending: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, bootstrap: str, client_id: str = "kbroker-bench") -> Connection:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), limit=16 * 1024 * 1024)
        return cls(reader, writer, client_id)

    def send(self, api_key: int, version: int, body: Any) -> asyncio.Future:
        """Write one request now; the future resolves to the decoded response body."""
        self._correlation += 1
        cid = self._correlation
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (api_key, version, fut)
        self.writer.write(framing.encode_request(api_key, version, cid, self.client_id, body))
        return fut

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        fut = self.send(api_key, version, body)
        await self.writer.drain()
        return await fut

    async def drain(self) -> None:
        await self.writer.drain()

    async def _read_loop(self) -> None:
        try:
            frames = FrameReader(max_frame_bytes=(1 << 31) - 1)
            while True:
                data = await self.reader.read(1 << 20)
                if not data:
                    raise ConnectionError("closed by the broker")
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    cid = _CORRELATION.unpack_from(frame)[0]
                    api_key, version, fut = self._pending.pop(cid)
                    _, body = framing.decode_response(api_key, version, frame)
                    if not fut.done():
                        fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError) as e:
            self._fail(e if not isinstance(e, asyncio.CancelledError) else ConnectionError("closed"))
        except Exception as e:  # a decode error: fail everything waiting rather than hang
            self._fail(e)

    def _fail(self, exc: BaseException) -> None:
        for _, _, fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection lost: {exc!r}"))
        self._pending.clear()

    async def close(self) -> None:
        self._reader_task.cancel()
        try:
            await self._reader_task
        except (asyncio.CancelledError, Exception):
            pass
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def worst_round_trip(other: Connection, busy: asyncio.Future, every_s: float = 0.02) -> tuple[float, int]:
    """Until `busy` is done, `other` sends ApiVersions every `every_s`: (its worst round trip in
    seconds, how many it sent). The worst is how long any client waited behind the busy work."""
    from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest

    worst, pings = 0.0, 0
    while not busy.done():
        sent = time.perf_counter()
        await other.call(18, 3, ApiVersionsRequest(other.client_id, "1"))
        worst, pings = max(worst, time.perf_counter() - sent), pings + 1
        await asyncio.sleep(every_s)
    return worst, pings
