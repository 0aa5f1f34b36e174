"""Headless Chromium (Debian's `chromium`, installed by `make system-deps`) for the report tests: the
page's own measurements after its scripts ran, and screenshots.

`measure(report)` opens a copy of the report with a probe script appended that writes what it found
(page width against the 1,400 px window, every chart's axis labels, the totals tiles, the tables' rows)
into the DOM as JSON, and reads it back with --dump-dom.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

WIDTH = 1400
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--disable-dev-shm-usage"]

PROBE = """
<script>
window.addEventListener('load', () => {
  const doc = document.documentElement;
  const charts = Array.from(document.querySelectorAll('svg.chart')).map(svg => ({
    name: svg.dataset.chart,
    x: (svg.querySelector('text.axis-label.x') || {}).textContent || '',
    y: (svg.querySelector('text.axis-label.y') || {}).textContent || '',
    width: svg.getBoundingClientRect().width,
    series: Array.from(svg.querySelectorAll('g.series')).map(g => g.dataset.group),
    colours: Array.from(svg.querySelectorAll('g.series path')).map(p => p.getAttribute('stroke')),
  }));
  const tables = Array.from(document.querySelectorAll('.table-box')).map(box => ({
    name: box.dataset.table, total: parseInt(box.dataset.total), shown: parseInt(box.dataset.shown),
    page: parseInt(box.dataset.page),
    headers: Array.from(box.querySelectorAll('th')).map(th => th.textContent),
    rows: Array.from(box.querySelectorAll('tbody tr')).map(tr => Array.from(tr.cells).map(td =>
      td.dataset.v !== undefined ? td.dataset.v : td.textContent)),
    visible: Array.from(box.querySelectorAll('tbody tr')).filter(tr => tr.style.display !== 'none').length,
  }));
  const totals = {};
  document.querySelectorAll('[data-total][data-value]').forEach(t => totals[t.dataset.total] = parseInt(t.dataset.value));
  const status = {};
  document.querySelectorAll('[data-status]').forEach(t => status[t.dataset.status] = parseInt(t.querySelector('b').textContent.replace(/,/g, '')));
  const out = {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, innerWidth: window.innerWidth,
               scrollHeight: doc.scrollHeight, charts, tables, totals, status};
  const pre = document.createElement('pre'); pre.id = 'probe-result';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="kbroker-chromium-") as profile:
        return subprocess.run([chromium() or "chromium", *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def measure(report: Path, width: int = WIDTH, height: int = 900) -> dict:
    probe = report.with_name(report.stem + ".probe.html")
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    try:
        done = _run([f"--window-size={width},{height}", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()])
    finally:
        probe.unlink()
    match = re.search(r"<pre id=\"probe-result\">(.*?)</pre>", done.stdout, re.S)
    assert match, f"chromium gave no probe result: {done.stderr[-2000:]}"
    import html

    return json.loads(html.unescape(match[1]))


def screenshot(report: Path, target: Path, width: int = WIDTH, height: int | None = None) -> Path:
    """A PNG of the whole page (the window as tall as the page)."""
    if height is None:
        height = min(int(measure(report, width)["scrollHeight"]) + 20, 16000)
    target.parent.mkdir(parents=True, exist_ok=True)
    done = _run([f"--window-size={width},{height}", "--virtual-time-budget=10000", f"--screenshot={target}",
                 report.as_uri()])
    assert target.exists(), done.stderr[-2000:]
    return target


def assert_sound(report: Path, spark, out: str) -> dict:
    """What the report must be, as Chromium renders it at 1,400 px: no horizontal overflow, every chart's
    axes labelled, one colour per group across the charts, totals equal to the tables' own sums (every row,
    not the rows shown), the status tiles adding up to the groups, each table's row count the Parquet's."""
    m = measure(report)
    assert m["scrollWidth"] <= m["innerWidth"] == WIDTH, (m["scrollWidth"], m["innerWidth"])
    assert m["charts"], "no chart"
    for chart in m["charts"]:
        assert chart["x"].strip() and chart["y"].strip(), chart["name"]
        assert 0 < chart["width"] <= WIDTH, chart
    colour_of: dict[str, str] = {}
    for chart in (c for c in m["charts"] if c["name"] in ("lag", "commits")):
        named = dict(zip(chart["series"], chart["colours"]))
        groups = [g for g in named if g != "other groups"]
        assert len({named[g] for g in groups}) == len(groups), named  # no colour twice in a chart
        for g in groups:
            assert colour_of.setdefault(g, named[g]) == named[g], (g, chart["name"])

    def table(name: str):
        return spark.read.parquet(f"{out}/{name}")

    summary = table("group_summary").collect()
    lag_sum = sum(r.lag or 0 for r in table("lag").collect())
    assert m["totals"]["total_lag"] == lag_sum == sum(r.total_lag or 0 for r in summary)
    assert m["totals"]["commits"] == sum(r.commits for r in table("commit_rate").collect()) == sum(r.commits for r in summary)
    assert m["totals"]["groups"] == len(summary) == sum(m["status"].values())
    for t in m["tables"]:
        if t["name"] != "topics":
            assert t["total"] == table(t["name"]).count(), t["name"]
        assert t["shown"] == len(t["rows"]) <= t["total"]
        assert t["visible"] == min(t["shown"], t["page"])  # paged
    groups_table = next(t for t in m["tables"] if t["name"] == "group_summary")
    if groups_table["shown"] == groups_table["total"]:
        column = groups_table["headers"].index("total_lag")
        assert sum(int(float(r[column] or 0)) for r in groups_table["rows"]) == lag_sum
    return m
