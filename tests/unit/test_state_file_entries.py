"""Version-2 state files (broker/storage/state_file.py render_rows/read_rows): one entry per line, each
with its CRC32C, a header counting them. Every way a disk can damage one is told apart from a sound
file, costs only what it touches, and a file from before checksums reads as it always did."""

from __future__ import annotations

import json

import pytest

from kbroker.broker.storage.state_file import read_rows, render_rows

ROWS = [{"user": "a", "n": 1}, {"user": "b", "n": 2}, {"user": "c", "n": 3}]


def legacy(data):
    return [{"user": u, "n": n} for u, n in data["users"].items()]


def test_a_sound_file_reads_back_and_is_still_one_json_object() -> None:
    raw = render_rows("users", ROWS)
    assert json.loads(raw)["entries"] == 3 and json.loads(raw)["version"] == 2
    read = read_rows(raw, "users", legacy)
    assert (read.rows, read.damage, read.legacy) == (ROWS, [], False)
    empty = render_rows("users", [])
    assert (read_rows(empty, "users", legacy).rows, read_rows(empty, "users", legacy).damage) == ([], [])


@pytest.mark.parametrize("at", range(0, 120))
def test_any_flipped_bit_of_an_entry_costs_that_entry_alone(at: int) -> None:
    raw = bytearray(render_rows("users", ROWS))
    line_start = raw.index(b'{"user":"b"')
    line_end = raw.index(b"\n", line_start)
    position = line_start + at % (line_end - line_start)
    raw[position] ^= 1 << (at % 8)
    read = read_rows(bytes(raw), "users", legacy)
    assert read.rows == [ROWS[0], ROWS[2]]
    assert [d.line for d in read.damage] == [3]


def test_a_file_cut_short_says_so() -> None:
    raw = render_rows("users", ROWS)
    cut = raw[:raw.index(b'{"user":"c"')]
    read = read_rows(cut, "users", legacy)
    assert read.rows == ROWS[:2]
    assert any("ends early" in r for r in read.reasons()) and any("counts 3 entries and 2" in r for r in read.reasons())


def test_a_damaged_header_is_reported_and_the_entries_still_read() -> None:
    raw = render_rows("users", ROWS).replace(b'"version"', b'"versimn"', 1)
    read = read_rows(raw, "users", legacy)
    assert read.rows == ROWS and [d.line for d in read.damage] == [1] and not read.legacy


def test_an_entry_without_its_checksum_in_a_checksummed_file_is_refused() -> None:
    raw = render_rows("users", ROWS).replace(b',"crc32c":', b',"crc32d":', 1)
    read = read_rows(raw, "users", legacy)
    assert read.rows == ROWS[1:] and len(read.damage) == 1


def test_a_file_from_before_checksums_reads_as_it_did_and_one_that_no_longer_parses_yields_nothing() -> None:
    old = b'{"version": 1, "users": {\n"a": 1,\n"b": 2\n}}\n'
    read = read_rows(old, "users", legacy)
    assert (read.rows, read.damage, read.legacy) == ([{"user": "a", "n": 1}, {"user": "b", "n": 2}], [], True)
    broken = read_rows(old[:-4], "users", legacy)
    assert broken.rows == [] and broken.legacy and "does not parse" in broken.reasons()[0]
