"""A short, fixed-sequence version of `make chaos` (tests/faults/chaos.py): one round of each fault kind
against a real broker under load, and nothing acknowledged may be lost."""

from __future__ import annotations

import io

import pytest

from kbroker.tests.faults import chaos

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.timeout(300)


def test_one_round_of_each_fault_loses_nothing_acknowledged(tmp_path) -> None:
    out = io.StringIO()
    code = chaos.campaign(7, 0, tmp_path, out=out, faults=list(chaos.FAULTS))
    report = out.getvalue()
    assert code == 0, report
    assert report.count("round ") == len(chaos.FAULTS), report
    assert "nothing acknowledged lost" in report
    damage_line = next(line for line in report.splitlines() if "clean stop, then" in line and "destroyed)" in line)
    assert " 0 destroyed by the test answered" not in damage_line, report


def test_damage_to_the_files_beside_the_segments_is_reported_and_loses_nothing(tmp_path) -> None:
    """Each kind of issue 38's file damage once, after a clean stop: its error event in the next start's
    log, and nothing acknowledged lost."""
    out = io.StringIO()
    code = chaos.campaign(11, 0, tmp_path, out=out, faults=[f"clean+files:{kind}" for kind in chaos.FILE_DAMAGE])
    report = out.getvalue()
    assert code == 0, report
    assert report.count("(reported: ") == len(chaos.FILE_DAMAGE), report


def test_damage_to_the_state_files_is_reported_contained_and_loses_nothing(tmp_path) -> None:
    """Each kind of state-file damage once (tests/faults/state_damage.py): its error event in the next
    start's log, the damage contained, and nothing acknowledged lost."""
    out = io.StringIO()
    code = chaos.campaign(13, 0, tmp_path, out=out, faults=[f"clean+state:{kind}" for kind in chaos.STATE_DAMAGE])
    report = out.getvalue()
    assert code == 0, report
    assert report.count("(reported: ") == len(chaos.STATE_DAMAGE), report
