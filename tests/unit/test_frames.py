"""The one frame reader every connection of ours uses: bytes in any pieces, whole frames out."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol.frames import FrameReader, FrameSizeError, recv_frame


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_frames_split_at_every_byte_come_out_whole_and_in_order() -> None:
    stream = _frame(b"first") + _frame(b"") + _frame(b"x" * 300)
    reader, out = FrameReader(), []
    for i in range(len(stream)):
        reader.feed(stream[i:i + 1])
        while (frame := reader.next_frame()) is not None:
            out.append(frame)
    assert out == [b"first", b"", b"x" * 300]
    assert reader.buffered == 0


def test_many_frames_in_one_read() -> None:
    reader = FrameReader()
    reader.feed(b"".join(_frame(bytes([n]) * n) for n in range(50)))
    assert [reader.next_frame() for _ in range(50)] == [bytes([n]) * n for n in range(50)]
    assert reader.next_frame() is None


@pytest.mark.parametrize("size", [-1, 1025])
def test_a_size_out_of_bounds_is_refused_before_any_body_is_buffered(size: int) -> None:
    reader = FrameReader(max_frame_bytes=1024)
    reader.feed(struct.pack(">i", size))
    with pytest.raises(FrameSizeError) as e:
        reader.next_frame()
    assert e.value.size == size


def test_needed_says_how_much_of_the_next_frame_is_missing() -> None:
    reader = FrameReader()
    assert reader.needed() == 4
    reader.feed(struct.pack(">i", 10) + b"abc")
    assert reader.needed() == 7


def test_big_frames_gathered_from_pieces_come_out_whole_with_the_bytes_after_them() -> None:
    # Frames of 64 KiB and more are gathered by reference and joined once (a 1 MB Produce);
    # the read that completes one may carry the start of the next frame.
    big, huge = bytes(range(256)) * 400, b"\x07" * (1 << 20)
    stream = _frame(big) + _frame(b"small") + _frame(huge) + _frame(b"tail")
    for piece in (1, 4, 1000, 65536, 262144, len(stream)):
        reader, out = FrameReader(), []
        for i in range(0, len(stream), piece):
            reader.feed(stream[i:i + piece])
            while (frame := reader.next_frame()) is not None:
                out.append(frame)
        assert out == [big, b"small", huge, b"tail"], piece
        assert reader.buffered == 0 and reader.needed() == 4


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 3, 100, 65_535, 65_536, 70_000, 112_743, 300_000]), min_size=1, max_size=6),
       pieces=st.lists(st.integers(min_value=1, max_value=300_000), min_size=1, max_size=8),
       takes=st.lists(st.booleans(), min_size=1, max_size=12))
def test_frames_come_out_whole_however_the_reads_fall_between_takes(sizes: list[int], pieces: list[int],
                                                                    takes: list[bool]) -> None:
    """The connection stops taking frames while a request runs, and reads go on arriving (up to its
    read high-water mark): several reads may be fed, past the end of a big frame being gathered and
    into the frames after it, before the next frame is taken."""
    bodies = [bytes([n % 251]) * size for n, size in enumerate(sizes)]
    stream = b"".join(_frame(body) for body in bodies)
    reader, out, at, turn = FrameReader(), [], 0, 0
    while at < len(stream):
        piece = pieces[turn % len(pieces)]
        reader.feed(stream[at:at + piece])
        at += piece
        if takes[turn % len(takes)]:  # the connection takes what is whole now; else it is busy
            while (frame := reader.next_frame()) is not None:
                out.append(frame)
        turn += 1
    while (frame := reader.next_frame()) is not None:
        out.append(frame)
    assert out == bodies
    assert reader.buffered == 0


def test_a_gathered_frame_does_not_change_when_the_caller_reuses_its_buffer() -> None:
    body = b"a" * 100_000
    stream = _frame(body)
    reader, chunk = FrameReader(), bytearray(70_000)
    for i in range(0, len(stream), len(chunk)):
        piece = stream[i:i + len(chunk)]
        chunk[:len(piece)] = piece
        reader.feed(memoryview(chunk)[:len(piece)])
        assert reader.buffered == min(len(stream), i + len(piece))
        chunk[:] = b"z" * len(chunk)  # the caller's next read overwrites it
    assert reader.next_frame() == body


def test_needed_counts_down_while_a_big_frame_is_gathered() -> None:
    reader = FrameReader(max_frame_bytes=200_000)
    reader.feed(struct.pack(">i", 100_000) + b"x" * 10)
    assert reader.next_frame() is None
    assert reader.needed() == 99_990
    reader.feed(b"x" * 99_989)
    assert reader.next_frame() is None and reader.needed() == 1
    reader.feed(b"x")
    assert reader.next_frame() == b"x" * 100_000


def test_recv_frame_never_reads_past_its_frame() -> None:
    stream = bytearray(_frame(b"one") + _frame(b"two"))
    asked = []

    def recv(n: int) -> bytes:
        asked.append(n)
        chunk = bytes(stream[:n])
        del stream[:n]
        return chunk

    assert recv_frame(recv) == b"one"
    assert bytes(stream) == _frame(b"two")  # left for whoever reads next
    assert recv_frame(recv, FrameReader()) == b"two"


def test_recv_frame_on_a_closed_stream_says_so() -> None:
    with pytest.raises(ConnectionError):
        recv_frame(lambda n: b"", FrameReader())
