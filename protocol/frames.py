"""Size-prefixed frames, sans I/O: bytes go in as they arrive, whole frames come out.

Every Kafka connection of ours (the broker's clients in the CLI, the benchmarks, the tests and the
pipeline) cuts its byte stream with this one reader, so the rules for a frame's size live here once.
Nothing here touches a socket: a blocking caller hands `recv_frame` its socket's `recv`.
"""

from __future__ import annotations

from struct import Struct
from typing import Callable

from .primitives import MalformedMessage

_SIZE = Struct(">i")
# The broker's socket.request.max.bytes default; a client reading responses passes a larger bound.
DEFAULT_MAX_FRAME_BYTES = 104_857_600


class FrameSizeError(MalformedMessage):
    """A size prefix that is negative or larger than the reader accepts."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame size {size} out of bounds (0..{max_bytes})")
        self.size = size
        self.max_bytes = max_bytes


class FrameReader:
    """One connection's incoming bytes, cut into frames (each without its 4-byte size)."""

    __slots__ = ("_buf", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._start = 0  # consumed bytes are dropped lazily, so many small frames cost one copy
        self.max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes) -> None:
        if self._start and self._start == len(self._buf):
            self._buf.clear()
            self._start = 0
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next whole frame, or None until more bytes arrive; FrameSizeError on a bad prefix."""
        available = len(self._buf) - self._start
        if available < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameSizeError(size, self.max_frame_bytes)
        if available < 4 + size:
            return None
        begin = self._start + 4
        frame = bytes(self._buf[begin:begin + size])
        self._start = begin + size
        if self._start > 1 << 20:  # compact once a megabyte has been consumed
            del self._buf[:self._start]
            self._start = 0
        return frame

    def needed(self) -> int:
        """How many more bytes the next frame needs at least (4 while its size is unknown)."""
        available = len(self._buf) - self._start
        if available < 4:
            return 4 - available
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        return max(0, 4 + size - available)

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._start


def recv_frame(recv: Callable[[int], bytes], reader: FrameReader | None = None) -> bytes:
    """Block on `recv` (a socket's recv) until a whole frame has arrived, and return it."""
    if reader is None:
        reader = FrameReader(max_frame_bytes=(1 << 31) - 1)
    while True:
        frame = reader.next_frame()
        if frame is not None:
            return frame
        # never past this frame: a caller may hand the socket to other code between frames
        chunk = recv(min(reader.needed(), 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed with {reader.buffered} bytes of a frame read")
        reader.feed(chunk)
