"""Kafka's record compression codecs: none, gzip, snappy (xerial framing), lz4 (frame), zstd.

Batches are stored as received and never recompressed; this is for reading records (the pipeline,
the coordinator's replay, tests) and for writing batches of our own.

Decompression is a stream of bounded chunks with a bound on the total (`iter_inflated`): a 46 KiB
zstd batch can inflate to 1 GiB, so nothing here ever holds more than `limit` inflated bytes, and
Produce measures a batch's inflated size without keeping it (`inflated_size`). Past the bound the
batch is refused with MESSAGE_TOO_LARGE (`InflatedTooLarge`), Kafka's RecordTooLargeException: not
retriable, and Kafka's Java producer answers it by splitting the batch.
"""

from __future__ import annotations

import struct
import zlib
from types import ModuleType
from typing import Iterator

from .errors import CorruptRecordError, ErrorCode, KafkaError, UnsupportedCompressionError

_I32 = struct.Struct(">i")

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4


def _cramjam() -> ModuleType:
    import cramjam  # the codec libraries load with the first compressed batch, not at start-up

    return cramjam


COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

# xerial snappy-java stream: 8-byte magic, int32 version, int32 min-compatible version, then
# [int32 length, raw snappy block]*. Kafka's Java client writes this; librdkafka reads and writes it too.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size


# What one decompression step may produce, and the bound on a whole batch's inflated size. The
# broker sets the bound from its `max.inflated.batch.bytes` at start-up (`set_inflated_bound`), so
# what Produce accepts, compaction, ListOffsets and the coordinator's replay can always read back.
CHUNK_BYTES = 256 * 1024
DEFAULT_MAX_INFLATED_BYTES = 64 * 1024 * 1024
_bound = DEFAULT_MAX_INFLATED_BYTES


def set_inflated_bound(limit: int) -> None:
    global _bound
    _bound = limit


def inflated_bound() -> int:
    return _bound


class InflatedTooLarge(KafkaError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class TooManyParts(Exception):
    """More gzip members, snappy blocks or zstd frames and blocks than the caller allows: not a fault
    of the batch. Each part costs a step in Python, so a megabyte of empty ones costs a second:
    Produce checks a batch like that off the event loop (broker/storage/log/validation.py)."""


class PartAllowance:
    """How many more parts (gzip members, snappy blocks, zstd frames and blocks) the caller's
    decompressions may walk; shared by the calls of one request."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _count_part(allowance: PartAllowance | None) -> None:
    if allowance is not None:
        if allowance.left <= 0:
            raise TooManyParts("more members, blocks or frames than allowed")
        allowance.left -= 1


# --- compression --------------------------------------------------------------------------------------


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(_cramjam().snappy.compress_raw(data[start : start + _XERIAL_BLOCK_SIZE]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _gzip_compress(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31 = gzip framing, what Kafka's GZIPOutputStream writes
    return c.compress(data) + c.flush()


def _lz4_compress(data: bytes) -> bytes:
    # Kafka's KafkaLZ4BlockInputStream needs independent blocks; it ignores the content checksum.
    c = _cramjam().lz4.Compressor(block_linked=False, content_checksum=False)
    c.compress(data)
    return bytes(c.finish())


def _gzip_chunks(data: bytes, parts: PartAllowance | None) -> Iterator[bytes]:
    # wbits 47 = auto-detect gzip or zlib headers; loop for (rare) multi-member gzip streams.
    while data:
        _count_part(parts)
        d = zlib.decompressobj(47)
        chunk = d.decompress(data, CHUNK_BYTES)
        while chunk:
            yield chunk
            chunk = d.decompress(d.unconsumed_tail, CHUNK_BYTES)
        if not d.eof:
            raise CorruptRecordError("truncated gzip stream")
        data = d.unused_data


def _snappy_block(block: bytes, budget: int) -> bytes:
    # A raw snappy block starts with its inflated length: check it before inflating anything.
    if _cramjam().snappy.decompress_raw_len(block) > budget:
        raise InflatedTooLarge("snappy block inflates past the batch bound")
    return bytes(_cramjam().snappy.decompress_raw(block))


def _snappy_chunks(data: bytes, limit: int, parts: PartAllowance | None) -> Iterator[bytes]:
    if not data.startswith(_XERIAL_MAGIC):
        yield _snappy_block(data, limit)
        return
    pos = len(_XERIAL_HEADER)
    n = len(data)
    produced = 0
    while pos < n:
        _count_part(parts)
        if n - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        length = _I32.unpack_from(data, pos)[0]
        pos += 4
        if length < 0 or pos + length > n:
            raise CorruptRecordError("truncated xerial snappy block")
        block = _snappy_block(data[pos : pos + length], limit - produced)
        produced += len(block)
        yield block
        pos += length


def _lz4_chunks(data: bytes) -> Iterator[bytes]:
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    chunk = d.decompress(data, max_length=CHUNK_BYTES)
    while True:
        if chunk:
            yield chunk
        if d.eof:
            return
        if d.needs_input:
            raise CorruptRecordError("truncated lz4 frame")
        chunk = d.decompress(b"", max_length=CHUNK_BYTES)


_ZSTD_MAGIC = 0xFD2FB528
_FCS_SIZES = (0, 2, 4, 8)
_DICT_ID_SIZES = (0, 1, 2, 4)


def _zstd_frames_complete(data: bytes, parts: PartAllowance | None = None) -> bool:
    """Whether `data` is whole zstd frames (RFC 8878 block headers walked, nothing inflated): the
    streaming reader returns what a truncated frame holds without complaint."""
    pos, n = 0, len(data)
    while pos < n:
        _count_part(parts)
        if n - pos < 4:
            return False
        magic = int.from_bytes(data[pos:pos + 4], "little")
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame: a 4-byte length, then that many bytes
            if n - pos < 4:
                return False
            pos += 4 + int.from_bytes(data[pos:pos + 4], "little")
            continue
        if magic != _ZSTD_MAGIC or pos >= n:
            return False
        descriptor = data[pos]
        pos += 1
        single_segment = descriptor >> 5 & 1
        fcs_size = _FCS_SIZES[descriptor >> 6] or single_segment  # flag 0 means 1 byte if single segment
        pos += (0 if single_segment else 1) + _DICT_ID_SIZES[descriptor & 3] + fcs_size
        while True:
            _count_part(parts)
            if n - pos < 3:
                return False
            header = int.from_bytes(data[pos:pos + 3], "little")
            pos += 3
            block_type = header >> 1 & 3
            pos += 1 if block_type == 1 else header >> 3  # an RLE block holds one byte
            if block_type == 3 or pos > n:
                return False
            if header & 1:  # last block
                break
        if descriptor >> 2 & 1:
            pos += 4  # content checksum
    return pos == n


def _zstd_chunks(data: bytes, parts: PartAllowance | None) -> Iterator[bytes]:
    if not _zstd_frames_complete(data, parts):
        raise CorruptRecordError("truncated or malformed zstd frame")
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while chunk := reader.read(CHUNK_BYTES):
        yield chunk


def iter_inflated(codec: int, data: bytes, limit: int | None = None,
                  parts: PartAllowance | None = None) -> Iterator[bytes]:
    """The decompressed bytes in chunks; InflatedTooLarge once they pass `limit` (default: the
    broker's bound) in all; TooManyParts once the gzip members, snappy blocks or zstd frames and
    blocks use up `parts` (default: any number; an lz4 frame's blocks are walked in C, uncounted)."""
    if limit is None:
        limit = _bound
    if codec == COMPRESSION_NONE:
        if len(data) > limit:
            raise InflatedTooLarge(f"{len(data)} bytes of records exceed the bound of {limit}")
        yield data
        return
    if codec == COMPRESSION_GZIP:
        chunks = _gzip_chunks(data, parts)
    elif codec == COMPRESSION_SNAPPY:
        chunks = _snappy_chunks(data, limit, parts)
    elif codec == COMPRESSION_LZ4:
        chunks = _lz4_chunks(data)
    elif codec == COMPRESSION_ZSTD:
        chunks = _zstd_chunks(data, parts)
    else:
        raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
    total = 0
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise InflatedTooLarge(
                    f"{COMPRESSION_NAMES[codec]} batch of {len(data)} bytes inflates past {limit} bytes"
                )
            yield chunk
    except (KafkaError, TooManyParts):
        raise
    except Exception as exc:  # cramjam, zlib, lz4 and zstandard each raise their own error types
        raise CorruptRecordError(f"cannot decompress {COMPRESSION_NAMES[codec]} records: {exc}") from exc


def inflated_size(codec: int, data: bytes, limit: int | None = None) -> int:
    """How many bytes `data` inflates to, holding at most one chunk at a time."""
    return sum(len(chunk) for chunk in iter_inflated(codec, data, limit))


def decompress(codec: int, data: bytes, limit: int | None = None, parts: PartAllowance | None = None) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    return b"".join(iter_inflated(codec, data, limit, parts))


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
        return bytes(_cramjam().zstd.compress(data, level=3))  # zstd-jni's default level
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
