"""The report as a browser shows it (headless Chromium at 1,400 px) at 1,000 groups: the charts show the
top ten and one line for the rest (their mean per group), one chart sums every group, and every total
still adds up over all of them. (test_job and test_groups check their own reports the same way.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.pipeline import job, synth
from kbroker.tests.pipeline import browser

pytestmark = pytest.mark.skipif(browser.chromium() is None, reason="needs Debian's chromium (make system-deps)")


def test_a_thousand_groups_top_ten_and_honest_totals(spark, tmp_path) -> None:
    written = synth.write(tmp_path / "data", groups=1000, commits=24_000, topics=10, partitions=2, seconds=600)
    res = job.run(spark, tmp_path / "data", tmp_path / "report", top_groups=10)
    m = browser.assert_sound(Path(res.report), spark, res.out)
    lag_chart = next(c for c in m["charts"] if c["name"] == "lag")
    assert len(lag_chart["series"]) == 11 and lag_chart["series"][-1] == "other groups"
    assert m["totals"]["groups"] == written.groups == 1000
    assert m["totals"]["commits"] == written.requests
    html = Path(res.report).read_text()
    assert "the other 990 groups are summarised" in html and "data-chart='lag-total'" in html
    rebalances = next(t for t in m["tables"] if t["name"] == "rebalances")
    assert rebalances["shown"] == 2000 < rebalances["total"] == 4000  # said as such, not "first 200 of 100000"
    assert "2,000 of 4,000 rows" in html
