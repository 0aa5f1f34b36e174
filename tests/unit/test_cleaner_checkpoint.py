"""The log cleaner's checkpoint (broker/storage/log/cleaner_checkpoint.py): Kafka's
cleaner-offset-checkpoint format, written after a cleaning, read when the cleaner is made so that a
log cleaned before stays clean, checked against the log, and a damaged file read as absent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kbroker.broker.storage.log import LogConfig, PartitionLog
from kbroker.broker.storage.log.cleaner import LogCleaner, dirtiness
from kbroker.broker.storage.log.cleaner_checkpoint import FILE, CheckpointDamaged, parse, render
from kbroker.tests.unit.test_log_cleaner import COMPACT, filled


def test_kafkas_format_both_ways() -> None:
    text = "0\n2\norders 0 120\nsome.topic-x 3 7\n"
    assert parse(text) == {("orders", 0): 120, ("some.topic-x", 3): 7}
    assert render(parse(text)).decode() == text
    assert render({}).decode() == "0\n0\n"
    assert parse("") == {}  # as Kafka creates it at start, before its first cleaning


@pytest.mark.parametrize("text, why", [
    ("1\n0\n", "unrecognised version"),
    ("0\nmany\n", "count"),
    ("0\n1\norders 0\n", "malformed line 3"),
    ("0\n1\norders zero 5\n", "malformed line 3"),
    ("0\n2\norders 0 5\n", "expected 2 entries but found 1"),
    ("0\n1\norders 0 5\nextra 1 2\n", "expected 1 entries but found 2"),
])
def test_damage_is_named(text: str, why: str) -> None:
    with pytest.raises(CheckpointDamaged, match=why):
        parse(text)


def clean_once(plog: PartitionLog, data: Path) -> LogCleaner:
    cleaner = LogCleaner(lambda: [plog], lambda: 100_000, data)
    assert asyncio.run(cleaner.clean_filthiest())
    return cleaner


def test_a_cleaned_log_stays_clean_for_the_next_cleaner(tmp_path: Path) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 40)
    clean_once(plog, tmp_path)
    cleaned_to = plog.cleaned_to
    assert (tmp_path / FILE).read_text() == f"0\n1\nt 0 {cleaned_to}\n"
    plog.close()
    # a restart: the log loads again with nothing in memory
    again = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(**COMPACT), flush_policy="never")
    assert dirtiness(again, 100_000) == (1.0, False)
    LogCleaner(lambda: [again], lambda: 100_000, tmp_path)
    assert again.cleaned_to == cleaned_to
    assert dirtiness(again, 100_000) == (0.0, False)


def test_damage_reads_as_absent_and_is_reported(tmp_path: Path, capsys) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 40)
    (tmp_path / FILE).write_text("0\n3\nt 0 12\n")
    LogCleaner(lambda: [plog], lambda: 100_000, tmp_path)
    assert plog.cleaned_to == 0
    assert "cleaner_checkpoint_damaged" in capsys.readouterr().out
    clean_once(plog, tmp_path)  # cleaned from its start, as Kafka does; the file is whole again
    assert parse((tmp_path / FILE).read_text()) == {("t", 0): plog.cleaned_to}


def test_an_offset_beyond_the_log_end_is_dropped(tmp_path: Path, capsys) -> None:
    plog = filled(tmp_path, "t", LogConfig(**COMPACT), 40)
    (tmp_path / FILE).write_text(f"0\n2\nt 0 {plog.log_end_offset + 1}\ngone 0 5\n")
    LogCleaner(lambda: [plog], lambda: 100_000, tmp_path)
    assert plog.cleaned_to == 0
    assert "cleaner_checkpoint_beyond_log_end" in capsys.readouterr().out
    clean_once(plog, tmp_path)  # the entry of a log that is no more is dropped with the next write
    assert set(parse((tmp_path / FILE).read_text())) == {("t", 0)}
