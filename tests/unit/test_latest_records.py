"""The last record per key of a run of batches (the replay's fold): it must keep exactly what a full
decode followed by "last write per key wins" keeps, in the order of those last writes, for every
codec and every varint width, and it must reject malformed records as the full decode does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol.errors import KafkaError
from kbroker.protocol.latest_records import latest_per_key
from kbroker.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    Record,
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
    return latest, keyless, read


@settings(max_examples=150, deadline=None)
@given(batches=_batches(), cut=st.integers(min_value=0, max_value=60))
def test_fold_keeps_what_a_full_decode_keeps_in_last_write_order(batches: list[bytes], cut: int) -> None:
    first = decode_batch(batches[0])[1]
    min_offset = first[min(cut, len(first) - 1)].offset if cut < 40 else 0  # a read starting mid-batch
    expected = _expected(batches, min_offset)
    got = _fold(batches, min_offset)
    assert list(got[0].items()) == list(expected[0].items())  # same entries, same order
    assert got[1:] == expected[1:]


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
