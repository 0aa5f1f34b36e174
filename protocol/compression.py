"""Kafka's record compression codecs: none, gzip, snappy (xerial framing), lz4 (frame), zstd.

Batches are stored as received and never recompressed; this is for reading records (the pipeline,
the coordinator's replay, tests) and for writing batches of our own.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from kbroker.protocol.errors import CorruptRecordError, KafkaError, UnsupportedCompressionError

_I32 = struct.Struct(">i")

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

# xerial snappy-java stream: 8-byte magic, int32 version, int32 min-compatible version, then
# [int32 length, raw snappy block]*. Kafka's Java client writes this; librdkafka reads and writes it too.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size


# --- compression --------------------------------------------------------------------------------------


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    n = len(data)
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        length = _I32.unpack_from(data, pos)[0]
        pos += 4
        if length < 0 or pos + length > n:
            raise CorruptRecordError("truncated xerial snappy block")
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_SIZE]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _gzip_decompress(data: bytes) -> bytes:
    # wbits 47 = auto-detect gzip or zlib headers; loop for (rare) multi-member gzip streams.
    out = bytearray()
    while data:
        d = zlib.decompressobj(47)
        out += d.decompress(data)
        if not d.eof:
            raise CorruptRecordError("truncated gzip stream")
        data = d.unused_data
    return bytes(out)


def _gzip_compress(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31 = gzip framing, what Kafka's GZIPOutputStream writes
    return c.compress(data) + c.flush()


def _lz4_compress(data: bytes) -> bytes:
    # Kafka's KafkaLZ4BlockInputStream needs independent blocks; it ignores the content checksum.
    c = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    c.compress(data)
    return bytes(c.finish())


def decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == COMPRESSION_NONE:
            return data
        if codec == COMPRESSION_GZIP:
            return _gzip_decompress(data)
        if codec == COMPRESSION_SNAPPY:
            return _snappy_decompress(data)
        if codec == COMPRESSION_LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == COMPRESSION_ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except KafkaError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError; zlib raises zlib.error
        raise CorruptRecordError(f"cannot decompress {COMPRESSION_NAMES[codec]} records: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return _gzip_compress(data)
    if codec == COMPRESSION_SNAPPY:
        return _snappy_compress(data)
    if codec == COMPRESSION_LZ4:
        return _lz4_compress(data)
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))  # zstd-jni's default level
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
