"""Smoke test of `python -m bench.stalls` (issue 10, section 8): the measurement runs end to end on a
small log and reports what it measured. No timing asserts: the figures are the benchmark's business."""

from __future__ import annotations

import uvloop

from kbroker.bench import stalls


def test_stalls_bench_measures_compaction_and_replay() -> None:
    result = uvloop.run(stalls.measure(3_000))
    assert result["commits"] == 3_000
    assert 0 < result["records_after"] < 3_000  # compaction really dropped superseded commits
    for key in ("compaction_stall_ms", "replay_stall_ms", "compaction_inline_ms", "replay_ms"):
        assert result[key] >= 0
