"""The last record per key of a run of batches (the replay's fold): it must keep exactly what a full
decode followed by "last write per key wins" keeps, in the order of those last writes, for every
codec and every varint width, for records walked one by one and for runs of records shaped alike
(taken in C-level passes), and it must reject malformed records as the full decode does."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol.errors import KafkaError
from kbroker.protocol.latest_records import in_write_order, latest_per_key
from kbroker.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    CRC_OFFSET,
    Record,
    compute_crc,
    decode_batch,
    encode_batch,
    iter_batches,
)

_keys = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"k" * 70, b"", b"z" * 9000]))
_values = st.one_of(st.none(), st.binary(max_size=200), st.just(b"v" * 9000))
_headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=2)


@st.composite
def _batches(draw: st.DrawFn) -> list[bytes]:
    out, offset = [], draw(st.integers(min_value=0, max_value=2**40))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        base, records = offset, []
        for _ in range(draw(st.integers(min_value=1, max_value=30))):
            records.append(Record(offset, draw(st.integers(min_value=0, max_value=2**41)), draw(_keys),
                                  draw(_values), draw(_headers)))
            offset += draw(st.integers(min_value=1, max_value=20_000))  # one- to three-byte deltas
        out.append(encode_batch(records, base_offset=base,
                                compression=draw(st.sampled_from([COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_ZSTD]))))
    return out


def _expected(batches: list[bytes], min_offset: int) -> tuple[dict, list[int], int]:
    latest: dict = {}
    keyless: list[int] = []
    read = 0
    for batch in batches:
        for r in decode_batch(batch)[1]:
            if r.offset < min_offset:
                continue
            read += 1
            if r.key is None:
                keyless.append(r.offset)
            else:
                latest.pop(r.key, None)
                latest[r.key] = (r.offset, r.value)
    return latest, keyless, read


def _fold(batches: list[bytes], min_offset: int) -> tuple[dict, list[int], int]:
    chunk = b"".join(batches)
    latest: dict = {}
    keyless: list[int] = []
    read = sum(latest_per_key(chunk, pos, header, latest, keyless, min_offset) for pos, header in iter_batches(chunk))
    return dict(in_write_order(latest, {})), keyless, read


# Runs of records shaped alike: the same key and value lengths (keys drawn from a few, so some repeat
# within a run), one timestamp, consecutive offsets, crossing the one-, two- and three-byte delta
# widths; now and then a record that breaks the shape (a header, another timestamp, an offset gap, a
# tombstone, a keyless record, a longer value).
_run_keys = st.sampled_from([b"g1-t-0", b"g1-t-1", b"g1-t-2", b"g2-t-0", b"g2-t-1", b"g9-t-9"])


@st.composite
def _run_batches(draw: st.DrawFn) -> list[bytes]:
    out, offset = [], draw(st.integers(min_value=0, max_value=2**40))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        base, records = offset, []
        offset += draw(st.sampled_from([0, 0, 50, 8150, 8189]))  # the first delta: runs cross 64 and 8192
        ts = draw(st.integers(min_value=0, max_value=2**41))
        tombstones = draw(st.booleans())
        for _ in range(draw(st.integers(min_value=1, max_value=120))):
            odd = draw(st.integers(min_value=0, max_value=40))
            key, value, headers, at = draw(_run_keys), None if tombstones else b"v" * 8, [], ts
            if odd == 0:
                headers = [("h", b"1")]
            elif odd == 1:
                at = ts + 1
            elif odd == 2:
                offset += draw(st.integers(min_value=1, max_value=100))
            elif odd == 3:
                value = None if value is not None else b"v" * 8
            elif odd == 4:
                key = None
            elif odd == 5:
                value = b"w" * 9
            records.append(Record(offset, at, key, value, headers))
            offset += 1
        out.append(encode_batch(records, base_offset=base,
                                compression=draw(st.sampled_from([COMPRESSION_NONE, COMPRESSION_NONE, COMPRESSION_GZIP]))))
    return out


@settings(max_examples=150, deadline=None)
@given(batches=_batches(), cut=st.integers(min_value=0, max_value=60))
def test_fold_keeps_what_a_full_decode_keeps_in_last_write_order(batches: list[bytes], cut: int) -> None:
    _assert_fold_is_the_full_decodes(batches, cut, mid_batch_below=40)


def _assert_fold_is_the_full_decodes(batches: list[bytes], cut: int, mid_batch_below: int) -> None:
    """The fold of `batches`, read from the offset of the first batch's `cut`th record when `cut` is
    below `mid_batch_below` (a read starting mid-batch) or from 0, keeps the full decode's entries,
    in the same order, and the same keyless offsets and count."""
    first = decode_batch(batches[0])[1]
    min_offset = first[min(cut, len(first) - 1)].offset if cut < mid_batch_below else 0
    expected = _expected(batches, min_offset)
    got = _fold(batches, min_offset)
    assert list(got[0].items()) == list(expected[0].items())  # same entries, same order
    assert got[1:] == expected[1:]


@settings(max_examples=300, deadline=None)
@given(batches=_run_batches(), cut=st.integers(min_value=0, max_value=200))
def test_runs_of_records_shaped_alike_fold_as_a_full_decode_does(batches: list[bytes], cut: int) -> None:
    _assert_fold_is_the_full_decodes(batches, cut, mid_batch_below=150)  # reads starting mid-run


def _with_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


@settings(max_examples=300, deadline=None)
@given(batches=_run_batches(), where=st.integers(min_value=61), byte=st.integers(min_value=0, max_value=255))
def test_a_damaged_byte_in_a_run_is_read_as_the_full_decode_reads_it(batches: list[bytes], where: int,
                                                                     byte: int) -> None:
    """Any byte of the records changed (the CRC made to match, so only the walk can tell): the fold
    fails where the full decode fails, and otherwise keeps what it keeps."""
    [(pos, header)] = list(iter_batches(batches[0]))
    if header.compression != COMPRESSION_NONE:
        return
    buf = bytearray(batches[0])
    buf[61 + where % (len(buf) - 61)] = byte
    damaged = _with_crc(buf)
    try:
        expected = _expected([damaged], 0)
    except KafkaError:
        with pytest.raises(KafkaError):
            _fold([damaged], 0)
        return
    got = _fold([damaged], 0)
    assert got[0] == expected[0]
    assert got[1:] == expected[1:]
    offsets = [r.offset for r in decode_batch(damaged)[1]]
    if offsets == sorted(offsets):  # a changed delta can put offsets out of order: then "last" is by offset,
        assert list(got[0].items()) == list(expected[0].items())  # as compaction's; else the order is the log's


def test_a_transactions_writes_take_the_place_of_their_commit_marker() -> None:
    latest = {b"a": (1, b"txn"), b"b": (2, b"plain"), b"c": (3, b"txn"), b"d": (5, b"plain")}
    order = [key for key, _ in in_write_order(latest, {b"a": 4, b"c": 4})]
    assert order == [b"b", b"a", b"c", b"d"]  # a and c at their marker (offset 4), in their own order


def test_a_rewritten_key_moves_behind_keys_written_since() -> None:
    batch = encode_batch([Record(0, 1, b"a", b"1"), Record(1, 1, b"b", b"2"), Record(2, 1, b"a", None)])
    latest, _, read = _fold([batch], 0)
    assert list(latest.items()) == [(b"b", (1, b"2")), (b"a", (2, None))]
    assert read == 3


@pytest.mark.parametrize("damage", ["length", "trailing"])
def test_malformed_records_are_rejected(damage: str) -> None:
    good = encode_batch([Record(0, 1, b"a", b"1"), Record(1, 1, b"b", b"2")])
    buf = bytearray(good)
    if damage == "length":
        buf[61] = 0x7E  # the first record claims 63 bytes: it runs past the batch
    else:
        buf[57:61] = (1).to_bytes(4, "big")  # records_count 1 of 2: bytes remain after it
    [(pos, header)] = list(iter_batches(bytes(buf)))
    with pytest.raises(KafkaError):
        latest_per_key(bytes(buf), pos, header, {}, [], 0)


def test_the_offset_delta_tables_are_the_zigzag_varints_of_every_delta_they_cover():
    from kbroker.protocol import latest_records
    from kbroker.protocol.record_batch import zigzag_varint

    for delta in range(8192):
        encoded = zigzag_varint(delta)
        if delta < 64:
            assert encoded == latest_records._ZIGZAG_ONE[delta:delta + 1]
        else:
            assert encoded == bytes((latest_records._ZIGZAG_LOW[delta], latest_records._ZIGZAG_HIGH[delta]))
    assert len(latest_records._ZIGZAG_LOW) == len(latest_records._ZIGZAG_HIGH) == 8192
