"""Size-prefixed frames, sans I/O: bytes go in as they arrive, whole frames come out.

Every Kafka connection of ours (the broker's clients in the CLI, the benchmarks, the tests and the
pipeline) cuts its byte stream with this one reader, so the rules for a frame's size live here once.
Nothing here touches a socket: a blocking caller hands `recv_frame` its socket's `recv`.
"""

from __future__ import annotations

from struct import Struct
from typing import Callable

from .wire import MalformedMessage

_SIZE = Struct(">i")
# The broker's socket.request.max.bytes default; a client reading responses passes a larger bound.
DEFAULT_MAX_FRAME_BYTES = 104_857_600


class FrameSizeError(MalformedMessage):
    """A size prefix that is negative or larger than the reader accepts."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame size {size} out of bounds (0..{max_bytes})")
        self.size = size
        self.max_bytes = max_bytes


# A frame at least this big whose bytes are still arriving is gathered as a list of the chunks
# received (references, no copy) and joined once when whole: appending 256 KiB reads to one growing
# buffer and slicing the frame out of it copied each byte of a 1 MB Produce three times and more.
_GATHER_FROM = 64 * 1024


class FrameReader:
    """One connection's incoming bytes, cut into frames (each without its 4-byte size)."""

    __slots__ = ("_buf", "_start", "_parts", "_gathered", "_want", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._start = 0  # consumed bytes are dropped lazily, so many small frames cost one copy
        # A big frame being gathered: its chunks so far (the last may run into the next frame),
        # their total length, and the frame's size; `_parts` is empty otherwise.
        self._parts: list[bytes | memoryview] = []
        self._gathered = 0
        self._want = 0
        self.max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._parts:
            # keep a reference to immutable bytes; anything else may be reused by the caller
            self._parts.append(data if type(data) is bytes else bytes(data))
            self._gathered += len(data)
            return
        if self._start == len(self._buf):
            if self._start:
                self._buf.clear()
                self._start = 0
            if type(data) is bytes and self._gather(memoryview(data)):
                return
        self._buf += data

    def _gather(self, view: memoryview) -> bool:
        """Start gathering when `view` (of immutable bytes, nothing buffered before it) opens a big
        frame that it does not hold whole; a size out of bounds is left to next_frame to refuse."""
        if len(view) < 4:
            return False
        (size,) = _SIZE.unpack_from(view)
        if size < _GATHER_FROM or size > self.max_frame_bytes or len(view) >= 4 + size:
            return False
        self._parts = [view[4:]]
        self._gathered = len(view) - 4
        self._want = size
        return True

    def next_frame(self) -> bytes | None:
        """The next whole frame, or None until more bytes arrive; FrameSizeError on a bad prefix."""
        if self._parts:
            if self._want > self.max_frame_bytes:  # the bound may have changed since (authentication)
                raise FrameSizeError(self._want, self.max_frame_bytes)
            return self._joined() if self._gathered >= self._want else None
        available = len(self._buf) - self._start
        if available < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameSizeError(size, self.max_frame_bytes)
        begin = self._start + 4
        if available < 4 + size:
            if size >= _GATHER_FROM:  # gather the rest by reference (see _GATHER_FROM)
                self._parts = [bytes(memoryview(self._buf)[begin:])]
                self._gathered = available - 4
                self._want = size
                self._buf = bytearray()
                self._start = 0
            return None
        frame = bytes(memoryview(self._buf)[begin:begin + size])
        self._start = begin + size
        if self._start > 1 << 20:  # compact once a megabyte has been consumed
            del self._buf[:self._start]
            self._start = 0
        return frame

    def _joined(self) -> bytes:
        """The gathered frame in one copy; bytes past it start the buffer again. Those may span
        several parts: reads go on arriving while the connection takes no frame (a request runs),
        so more than the read that completed the frame can have been gathered."""
        parts, want = self._parts, self._want
        rest: list[bytes | memoryview] = []
        if self._gathered > want:
            taken = 0
            for i, part in enumerate(parts):
                if taken + len(part) > want:
                    cut = want - taken
                    view = memoryview(part)
                    rest = [view[cut:], *parts[i + 1:]]
                    parts = [*parts[:i], view[:cut]]
                    break
                taken += len(part)
        frame = b"".join(parts)
        self._parts = []
        self._gathered = self._want = 0
        self._buf = bytearray()
        self._start = 0
        after = memoryview(rest[0]) if len(rest) == 1 else memoryview(b"".join(rest))
        if not self._gather(after):
            self._buf += after
        return frame

    def needed(self) -> int:
        """How many more bytes the next frame needs at least (4 while its size is unknown)."""
        if self._parts:
            return max(0, self._want - self._gathered)
        available = len(self._buf) - self._start
        if available < 4:
            return 4 - available
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        return max(0, 4 + size - available)

    @property
    def buffered(self) -> int:
        if self._parts:
            return 4 + self._gathered
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
