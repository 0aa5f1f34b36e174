"""Decompression is bounded: every codec inflates as a stream and stops past the limit (issue 10, §5)."""

from __future__ import annotations

import os

import pytest

from kbroker.protocol import compression as c
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import CorruptRecordError, ErrorCode

CODECS = [c.COMPRESSION_GZIP, c.COMPRESSION_SNAPPY, c.COMPRESSION_LZ4, c.COMPRESSION_ZSTD]
MiB = 1 << 20


@pytest.mark.parametrize("codec", CODECS, ids=lambda k: c.COMPRESSION_NAMES[k])
def test_round_trip_and_measured_size(codec: int) -> None:
    data = os.urandom(4096) * 64 + bytes(3 * MiB)
    packed = c.compress(codec, data)
    assert c.decompress(codec, packed) == data
    assert c.inflated_size(codec, packed, 4 * MiB) == len(data)
    assert all(len(chunk) <= max(c.CHUNK_BYTES, 64 * 1024) for chunk in c.iter_inflated(codec, packed, 4 * MiB)
               if codec != c.COMPRESSION_SNAPPY)


@pytest.mark.parametrize("codec", CODECS, ids=lambda k: c.COMPRESSION_NAMES[k])
def test_past_the_bound_is_message_too_large(codec: int) -> None:
    packed = c.compress(codec, bytes(8 * MiB))
    with pytest.raises(c.InflatedTooLarge) as refused:
        c.inflated_size(codec, packed, 1 * MiB)
    assert refused.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(c.InflatedTooLarge):
        c.decompress(codec, packed, 1 * MiB)


@pytest.mark.parametrize("codec", CODECS, ids=lambda k: c.COMPRESSION_NAMES[k])
def test_truncated_streams_are_corrupt(codec: int) -> None:
    """The streaming zstd reader returns a truncated frame's bytes silently; a frame walk catches it."""
    packed = c.compress(codec, os.urandom(200_000))
    with pytest.raises(CorruptRecordError):
        c.decompress(codec, packed[: len(packed) // 2])


def test_a_raw_snappy_block_is_refused_from_its_declared_length() -> None:
    import cramjam

    block = bytes(cramjam.snappy.compress_raw(bytes(4 * MiB)))
    with pytest.raises(c.InflatedTooLarge):
        next(c.iter_inflated(c.COMPRESSION_SNAPPY, block, MiB))


def test_decode_batch_honours_the_bound() -> None:
    batch = rb.encode_batch([rb.Record(0, 0, b"k", bytes(2 * MiB))], compression=c.COMPRESSION_ZSTD)
    assert rb.decode_batch(batch)[1][0].value == bytes(2 * MiB)
    with pytest.raises(c.InflatedTooLarge):
        rb.decode_batch(batch, max_inflated=MiB)
