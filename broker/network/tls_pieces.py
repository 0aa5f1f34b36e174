"""How answers owed on a TLS connection are cut for the encryption layer (broker/network/server.py's
`KafkaProtocol._write_tls` says why they are handed on a piece at a time)."""

from __future__ import annotations

from collections import deque

# TLS: answers are handed to the encryption layer this much at a time.
TLS_WRITE_PIECE = 256 * 1024


def take_piece(owed: deque[bytes | memoryview], limit: int = TLS_WRITE_PIECE) -> tuple[list[bytes | memoryview], int]:
    """Take up to `limit` bytes from the head of `owed` (the last buffer cut as a view, its rest left
    at the head): the buffers and their size."""
    piece: list[bytes | memoryview] = []
    size = 0
    while owed and size < limit:
        data = owed[0]
        room = limit - size
        if len(data) <= room:
            piece.append(owed.popleft())
            size += len(data)
        else:
            view = memoryview(data)
            piece.append(view[:room])
            owed[0] = view[room:]
            size += room
    return piece, size
