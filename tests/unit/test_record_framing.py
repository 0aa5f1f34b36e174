"""protocol/record_framing.py: a batch's records framed as its header says, on real batches and on
the garbage a hostile producer sends under a sound header and CRC."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import InvalidRecordError
from kbroker.protocol.record_framing import check_record_framing, record_heads


@pytest.mark.parametrize("size", [0, 10, 63, 64, 1000, 8191, 8192, 70_000])  # one-, two- and three-byte lengths
def test_real_batches_pass(size: int) -> None:
    batch = rb.encode_batch([rb.Record(i, 1, b"k" if i % 2 else None, os.urandom(size), [("h", b"v")])
                             for i in range(5)])
    header = rb.read_header(batch, 0)
    check_record_framing(batch, rb.HEADER_SIZE, header.size, header.records_count)


def _records(batch: bytes) -> tuple[bytes, int]:
    return batch[rb.HEADER_SIZE:], rb.read_header(batch, 0).records_count


def test_garbage_and_lying_counts_are_refused() -> None:
    data, count = _records(rb.encode_batch([rb.Record(i, 1, b"k", b"v" * 100) for i in range(3)]))
    with pytest.raises(InvalidRecordError):
        check_record_framing(data, 0, len(data), count + 1)  # the header counts a record that is not there
    with pytest.raises(InvalidRecordError):
        check_record_framing(data, 0, len(data), count - 1)  # a record the header does not count
    with pytest.raises(InvalidRecordError):
        check_record_framing(data[:-1], 0, len(data) - 1, count)  # the last record cut short
    with pytest.raises(InvalidRecordError):
        check_record_framing(b"\x01" + data[1:], 0, len(data), count)  # a negative length
    with pytest.raises(InvalidRecordError):
        check_record_framing(b"\xff" * 64, 0, 64, 1)  # a length varint longer than 10 bytes
    for short in (b"\x00", b"\x80\x00", b"\x80\x80\x00", b"\x02", b"\x0a", b"\x8a\x00"):  # 0 to 5 bytes
        with pytest.raises(InvalidRecordError):
            check_record_framing(short + bytes(8), 0, len(short) + 8, 1)
    with pytest.raises(InvalidRecordError):
        check_record_framing(b"\x0c" + bytes(6) + b"\x81\x00" + bytes(8), 0, 17, 2)  # 6 bytes, then a two-byte -1
    rejected = 0
    rng = random.Random(1126)
    for seed in range(200):  # random bytes under a count of 1 to 5
        junk = rng.randbytes(64 + seed)
        try:
            check_record_framing(junk, 0, len(junk), 1 + seed % 5)
        except InvalidRecordError:
            rejected += 1
    assert rejected >= 195  # a random chain can frame by chance, rarely


def test_record_heads_read_each_records_timestamp_delta_and_key_length() -> None:
    base = 1_000_000
    batch = rb.encode_batch([rb.Record(i, base + ts, key, b"v" * size)
                             for i, (ts, key, size) in enumerate([(0, b"k", 0), (-70_000, None, 300), (9_000, b"kk", 9000)])])
    data, count = _records(batch)
    assert list(record_heads(data, 0, len(data), count)) == [(0, 0, 0, 1), (1, -70_000, 1, -1), (2, 9_000, 2, 2)]
    with pytest.raises(InvalidRecordError):
        list(record_heads(data, 0, len(data), count - 1))  # a record the header does not count
    # a key running past its own record (the record's length still frames the chain)
    one, _ = _records(rb.encode_batch([rb.Record(0, base, b"k", b"")]))
    check_record_framing(one.replace(b"\x02k", b"\x0ak", 1), 0, len(one), 1)
    with pytest.raises(InvalidRecordError):
        list(record_heads(one.replace(b"\x02k", b"\x0ak", 1), 0, len(one), 1))


def _framing_walked_one_by_one(data: bytes, start: int, stop: int, count: int) -> bool:
    """The definition: `count` zigzag lengths, each of at least six bytes, chained to `stop`."""
    from kbroker.protocol.errors import CorruptRecordError
    from kbroker.protocol.record_batch import _read_zigzag

    at = start
    try:
        for _ in range(count):
            length, at = _read_zigzag(data, at)
            if length < 6:
                return False
            at += length
    except (IndexError, CorruptRecordError):
        return False
    return at == stop


@settings(max_examples=400, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(6, 9000), st.integers(1, 80)), min_size=1, max_size=6),
       damage=st.one_of(st.none(), st.tuples(st.integers(0, 10**9), st.integers(0, 255))),
       count_off=st.sampled_from([0, 0, 0, -1, 1]), cut=st.sampled_from([0, 0, 0, 1, 7]))
def test_runs_of_records_of_one_size_are_framed_as_a_walk_of_each_would_find(runs, damage, count_off, cut) -> None:
    """Records in runs of one size (the strided look), with a byte changed anywhere, the count off
    by one or the end cut: refused exactly when the one-by-one walk refuses."""
    parts = []
    for size, times in runs:
        body = bytes([size % 251]) * size
        parts.append((rb.zigzag_varint(size) + body) * times)
    data = bytearray(b"".join(parts))
    if damage is not None:
        data[damage[0] % len(data)] = damage[1]
    data = bytes(data[:len(data) - cut]) if cut < len(data) else bytes(data)
    count = sum(times for _, times in runs) + count_off
    expected = _framing_walked_one_by_one(data, 0, len(data), count)
    for buffer in (data, memoryview(data)):
        try:
            check_record_framing(buffer, 0, len(data), count)
        except InvalidRecordError:
            assert not expected
        else:
            assert expected


def test_looks_for_runs_read_a_bounded_share_of_the_batch(monkeypatch) -> None:
    """Sizes that change every other record make every look find a run of one. Each look reads at
    most a window ahead, and looks that find little come less often: all of them together read a
    few times the batch's records, not the rest of the batch at every look (quadratic)."""
    from kbroker.protocol import record_framing

    looked: list[int] = []
    real = record_framing._same_size_after

    def counted(data, at, stop, size, width, most):
        looked.append(most)
        return real(data, at, stop, size, width, most)

    monkeypatch.setattr(record_framing, "_same_size_after", counted)
    pairs = [(rb.zigzag_varint(n) + bytes(n)) * 2 for n in (6, 7) * 5_000]
    data = b"".join(pairs)
    check_record_framing(data, 0, len(data), 20_000)
    assert looked and sum(looked) < 4 * 20_000
    looked.clear()
    uniform = (rb.zigzag_varint(1000) + bytes(1000)) * 20_000
    check_record_framing(uniform, 0, len(uniform), 20_000)
    assert len(looked) < 20  # one run: a few looks of doubling windows
