"""The HTML report: one self-contained `report.html` (inline SVG charts, a little script for sorting,
filtering and paging the tables), written next to the Parquet tables.

`collect()` runs on the driver over the written tables and brings back only what the page shows: every
group's summary row (up to MAX_GROUP_ROWS), the series of the featured groups (the top N by status,
then lag, then commits) with the other groups summed into one "other" series, and the heads of the
long tables, each with its true row count. `write_report()` touches no Spark.

What the page promises: one colour per featured group in every chart and table; nothing wider than the
page (wide tables scroll inside their box); totals computed over every row of the tables they sum, not
over what is shown.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import charts, storage

MAX_GROUP_ROWS = 5000
MAX_TABLE_ROWS = 2000
TIMELINE_GROUPS = 3
TIMELINE_LANES = 24
STATUS_ORDER = ("stopped", "stalled", "lagging", "ok", "empty")
STATUS_COLOURS = {"ok": "#2e7d32", "lagging": "#b26a00", "stalled": "#c62828", "stopped": "#6a1b9a", "empty": "#616161"}
OTHER_LABEL = "other groups"


@dataclass
class Shown:
    """The head of a table and how many rows the whole table has."""

    frame: pd.DataFrame
    total: int
    order: str


@dataclass
class ReportData:
    summary: pd.DataFrame
    summary_total: int
    featured: list[str]
    colours: dict[str, str]
    totals: dict[str, int]
    status_counts: dict[str, int]
    lag_series: pd.DataFrame  # group (or OTHER_LABEL), time, lag
    commit_series: pd.DataFrame  # group (or OTHER_LABEL), minute, commits
    partition_lag: pd.DataFrame  # group_id, topic, partition, time, lag (timeline groups)
    ownership: pd.DataFrame
    outages_featured: pd.DataFrame
    rebalances_featured: pd.DataFrame
    tables: dict[str, Shown] = field(default_factory=dict)
    others: int = 0
    window: tuple[float | None, float | None] = (None, None)
    bucket_s: int = 60
    lag_total: pd.DataFrame | None = None  # time, lag: every group summed


def collect(t: dict[str, Any], *, top_groups: int, bucket_s: int, window: tuple[float | None, float | None]) -> ReportData:
    from pyspark.sql import functions as F

    severity = F.create_map(*[x for i, s in enumerate(STATUS_ORDER) for x in (F.lit(s), F.lit(len(STATUS_ORDER) - i))])
    ranked = t["group_summary"].withColumn("_sev", severity[F.col("status")]).orderBy(
        F.col("_sev").desc(), F.col("total_lag").desc_nulls_last(), F.col("commits").desc(), "group_id")
    summary_total = t["group_summary"].count()
    summary = ranked.drop("_sev").limit(MAX_GROUP_ROWS).toPandas()
    featured = list(summary["group_id"].head(top_groups)) if len(summary) else []
    colours = {g: charts.PALETTE[i % len(charts.PALETTE)] for i, g in enumerate(featured)}
    others = max(summary_total - len(featured), 0)

    agg = t["group_summary"].agg(F.sum("total_lag"), F.sum("commits"), F.sum("crashes"),
                                 F.sum("transactions_committed"), F.sum("transactions_aborted")).first()
    lag_total = t["lag"].agg(F.sum("lag")).first()[0]
    commits_total = t["commit_rate"].agg(F.sum("commits")).first()[0]
    totals = {"groups": summary_total, "total_lag": int(agg[0] or 0), "commits": int(agg[1] or 0),
              "crashes": int(agg[2] or 0), "transactions_committed": int(agg[3] or 0),
              "transactions_aborted": int(agg[4] or 0),
              # the same figures from the tables they sum (the test checks they agree)
              "lag_table_total": int(lag_total or 0), "commit_table_total": int(commits_total or 0)}
    status_counts = {r["status"]: r["count"] for r in t["group_summary"].groupBy("status").count().collect()}

    # A featured group's own figures; the other groups as their mean per group (their sum would dwarf
    # every featured line: 990 groups against one), and every group summed in a chart of its own.
    label = F.when(F.col("group_id").isin(featured), F.col("group_id")).otherwise(F.lit(OTHER_LABEL))
    per_other = F.lit(max(others, 1))
    lag_series = (t["lag_history"].withColumn("group", label).groupBy("group", "time").agg(F.sum("lag").alias("lag"))
                  .withColumn("lag", F.when(F.col("group") == OTHER_LABEL, F.col("lag") / per_other)
                              .otherwise(F.col("lag"))).toPandas())
    commit_series = (t["commit_rate"].withColumn("group", label).groupBy("group", "minute")
                     .agg(F.sum("commits").alias("commits"))
                     .withColumn("commits", F.when(F.col("group") == OTHER_LABEL, F.col("commits") / per_other)
                                 .otherwise(F.col("commits"))).toPandas())
    lag_total = t["lag_history"].groupBy("time").agg(F.sum("lag").alias("lag")).toPandas()
    timeline_groups = featured[:TIMELINE_GROUPS]
    partition_lag = t["partition_lag_history"].where(F.col("group_id").isin(timeline_groups)).toPandas()
    ownership = t["ownership"].where(F.col("group_id").isin(timeline_groups)).limit(20_000).toPandas()
    outages_featured = t["outages"].where(F.col("group_id").isin(featured)).toPandas()
    rebalances_featured = (t["rebalances"].where(F.col("group_id").isin(timeline_groups))
                           .select("group_id", "generation", "time", "reason", "ending", "member_count").toPandas())

    def head(name: str, frame, order: str) -> Shown:
        return Shown(frame.limit(MAX_TABLE_ROWS).toPandas(), t[name].count(), order)

    tables = {
        "lag": head("lag", t["lag"].orderBy(F.col("lag").desc_nulls_last(), "group_id", "topic", "partition"),
                    "largest lag first"),
        "rebalances": head("rebalances", t["rebalances"].drop("members", "offsets_log_offset")
                           .withColumn("members_joined", F.array_join("members_joined", " "))
                           .withColumn("members_left", F.array_join("members_left", " "))
                           .orderBy(F.col("time").desc_nulls_last(), "group_id"), "newest first"),
        "outages": head("outages", t["outages"].withColumn("members_left", F.array_join("members_left", " "))
                        .orderBy(F.col("seconds").desc(), "group_id"), "longest first"),
        "topics": head("topics", t["topics"].where(~F.col("topic").startswith("__") | (F.col("messages") > 0))
                       .withColumn("compression", F.array_join("compression", ",")), "by topic and partition"),
    }
    # the topics table shown leaves out idle internal partitions: its total counts what it could show
    tables["topics"].total = t["topics"].where(~F.col("topic").startswith("__") | (F.col("messages") > 0)).count()
    return ReportData(summary, summary_total, featured, colours, totals, status_counts, lag_series, commit_series,
                      partition_lag, ownership, outages_featured, rebalances_featured, tables, others, window, bucket_s,
                      lag_total)


# -- HTML -----------------------------------------------------------------------------------------------

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1360px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:1.45em;margin:8px 0}h2{font-size:1.1em;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px;font-size:13px}
.meta dt{color:#666}.meta dd{margin:0;overflow-wrap:anywhere}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.tile{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.tile b{display:block;font-size:1.5em}.tile span{color:#666;font-size:12px}
.panel{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px;margin:10px 0}
.scroll{overflow-x:auto;max-width:100%}
table.t{border-collapse:collapse;font-size:12px;width:100%}
table.t td,table.t th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
table.t td.text,table.t th.text{text-align:left}
table.t td.wrap{white-space:normal;min-width:24em;max-width:40em;overflow-wrap:anywhere;text-align:left}
table.t th{background:#f4f4f4;cursor:pointer;position:sticky;top:0}
table.t th.sorted-asc::after{content:" \\25B2"}table.t th.sorted-desc::after{content:" \\25BC"}
.controls{display:flex;gap:10px;align-items:center;font-size:12px;margin:6px 0;flex-wrap:wrap}
.controls input{padding:3px 6px;width:260px;max-width:100%}
.note,.none{color:#777;font-size:12px}.warn{color:#a40}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;color:#fff;font-size:11px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:middle}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin:4px 0 0 8px}
svg.chart{display:block;max-width:100%;height:auto;font-size:11px}
svg.chart .chart-title{font-size:13px;font-weight:600}svg.chart .axis-label{font-size:12px;fill:#333}
svg.chart .tick,svg.chart .lane{fill:#555}
"""

_SCRIPT = r"""
for (const box of document.querySelectorAll('.table-box')) {
  const table = box.querySelector('table'); if (!table) continue;
  const body = table.tBodies[0]; const rows = Array.from(body.rows);
  const size = parseInt(box.dataset.page || '50'); let page = 0; let shown = rows;
  const filter = box.querySelector('input.filter'); const info = box.querySelector('.page-info');
  const prev = box.querySelector('button.prev'); const next = box.querySelector('button.next');
  function draw() {
    const pages = Math.max(1, Math.ceil(shown.length / size)); page = Math.min(page, pages - 1);
    for (const r of rows) r.style.display = 'none';
    shown.slice(page * size, (page + 1) * size).forEach(r => { r.style.display = ''; body.appendChild(r); });
    if (info) info.textContent = shown.length + ' matching rows, page ' + (page + 1) + ' of ' + pages;
  }
  if (filter) filter.addEventListener('input', () => {
    const q = filter.value.toLowerCase();
    shown = rows.filter(r => r.textContent.toLowerCase().includes(q)); page = 0; draw(); });
  if (prev) prev.addEventListener('click', () => { page = Math.max(0, page - 1); draw(); });
  if (next) next.addEventListener('click', () => { page += 1; draw(); });
  table.tHead.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => {
    const desc = th.classList.contains('sorted-asc');
    table.tHead.querySelectorAll('th').forEach(h => h.classList.remove('sorted-asc', 'sorted-desc'));
    th.classList.add(desc ? 'sorted-desc' : 'sorted-asc');
    const key = r => { const c = r.cells[i]; const v = c.dataset.v !== undefined ? c.dataset.v : c.textContent;
                       const n = parseFloat(v); return isNaN(n) || v === '' ? v : n; };
    shown.sort((a, b) => { const x = key(a), y = key(b);
      const o = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === 'number' ? -1 : 1);
      return desc ? -o : o; });
    page = 0; draw(); }));
  draw();
}
"""

_WRAP = {"status_reason", "last_reason", "reason", "members_joined", "members_left", "error", "client_reason"}


def _cell(name: str, value: Any) -> tuple[str, str | None, str]:
    """(text shown, sort key or None, css class)."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NaT:
        return "", "", ""
    if isinstance(value, (pd.Timestamp, dt.datetime)):
        stamp = pd.Timestamp(value)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        return stamp.strftime("%Y-%m-%d %H:%M:%S UTC"), f"{stamp.timestamp():.3f}", ""
    if isinstance(value, bool):
        return ("yes" if value else "no"), None, ""
    if isinstance(value, int) or (hasattr(value, "dtype") and "int" in str(getattr(value, "dtype", ""))):
        return f"{int(value):,}", str(int(value)), ""
    if isinstance(value, float):
        if value == round(value) and abs(value) < 1e15 and name not in ("seconds", "longest_outage_s"):
            return f"{int(value):,}", str(value), ""
        return f"{value:,.2f}", str(value), ""
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)), None, "text"
    return str(value), None, "wrap" if name in _WRAP else "text"


def _table(name: str, frame: pd.DataFrame, total: int, order: str, colours: dict[str, str], page: int = 50) -> str:
    if not len(frame):
        return f"<p class='none' data-table='{name}'>none</p>"
    esc = html.escape
    head = "".join(f"<th class='{'text' if frame[c].dtype == object else ''}'>{esc(c)}</th>" for c in frame.columns)
    body: list[str] = []
    for row in frame.itertuples(index=False):
        cells = []
        for c, v in zip(frame.columns, row):
            text, key, css = _cell(c, v)
            inner = esc(text)
            if c == "status" and text:
                inner = f"<span class='badge' style='background:{STATUS_COLOURS.get(text, '#555')}'>{inner}</span>"
            if c == "group_id" and text in colours:
                inner = f"<span class='swatch' style='background:{colours[text]}'></span>{inner}"
            attr = f" data-v='{esc(key)}'" if key is not None else ""
            cells.append(f"<td class='{css}'{attr}>{inner}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    shown = len(frame)
    note = (f"all {total:,} rows" if shown >= total else
            f"{shown:,} of {total:,} rows ({order}); every row is in the Parquet folder {name}/")
    return (f"<div class='table-box' data-table='{name}' data-page='{page}' data-total='{total}' data-shown='{shown}'>"
            f"<div class='controls'><input class='filter' type='search' placeholder='filter rows'>"
            f"<button class='prev'>&#8592;</button><button class='next'>&#8594;</button>"
            f"<span class='page-info'></span><span class='note'>{esc(note)}; click a heading to sort</span></div>"
            f"<div class='scroll'><table class='t'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            f"</table></div></div>")


def _secs(v: Any) -> float:
    return pd.Timestamp(v).timestamp()


def _legend(items: list[tuple[str, str]]) -> str:
    return "<div class='legend'>" + "".join(
        f"<span><span class='swatch' style='background:{c}'></span>{html.escape(g)}</span>" for g, c in items) + "</div>"


def _series_charts(d: ReportData) -> list[str]:
    colour = {**d.colours, OTHER_LABEL: charts.OTHER}
    other_note = f"{OTHER_LABEL} ({d.others:,}, mean per group)" if d.others else None
    names = d.featured + ([OTHER_LABEL] if d.others else [])
    shades = [(_secs(o.start), _secs(o.end), f"{o.group_id}: {o.kind}, {o.seconds:.1f} s")
              for o in d.outages_featured.itertuples() if o.kind.startswith("crash")] if len(d.outages_featured) else []
    lag = [charts.Series(g, colour[g], [(_secs(r.time), float(r.lag)) for r in d.lag_series[d.lag_series["group"] == g]
                                        .itertuples()], dashed=g == OTHER_LABEL) for g in names]
    commits = [charts.Series(g, colour[g], [(_secs(r.minute), float(r.commits)) for r in
                                            d.commit_series[d.commit_series["group"] == g].itertuples()],
                             dashed=g == OTHER_LABEL) for g in names]
    legend = _legend([(g, colour[g]) for g in d.featured] + ([(other_note, charts.OTHER)] if other_note else []))
    total = [] if d.lag_total is None or not len(d.lag_total) else [charts.Series(
        f"all {d.totals['groups']:,} groups", "#333333", [(_secs(r.time), float(r.lag)) for r in d.lag_total.itertuples()])]
    out = [f"<h2>Lag over time</h2><div class='panel'>"
           + charts.line_chart("lag-total", f"Messages behind, all {d.totals['groups']:,} groups summed", total,
                               "time (UTC)", "messages behind", window=d.window, height=220) + "</div><div class='panel'>"
           + charts.line_chart("lag", f"Messages behind, summed over each group's partitions (every {d.bucket_s} s; "
                               f"crashes shaded)", lag, "time (UTC)", "messages behind",
                               window=d.window, shades=shades) + legend + "</div>",
           "<h2>Commits</h2><div class='panel'>"
           + charts.line_chart("commits", "Offset commit requests per minute", commits, "time (UTC)",
                               "commits per minute", window=d.window, step=False) + legend + "</div>"]
    return out


def _rows_of(frame: pd.DataFrame, group: str) -> list[Any]:
    return list(frame[frame["group_id"] == group].itertuples()) if len(frame) else []


def _group_charts(d: ReportData) -> list[str]:
    out: list[str] = []
    x0, x1 = d.window
    if x0 is None or x1 is None:
        return out
    for g in d.featured[:TIMELINE_GROUPS]:
        colour = d.colours[g]
        pl = d.partition_lag[d.partition_lag["group_id"] == g] if len(d.partition_lag) else d.partition_lag
        parts = []
        if len(pl):
            worst = pl.groupby(["topic", "partition"])["lag"].max().sort_values(ascending=False)
            keep = list(worst.index[:8])
            hues = charts.tints(colour, len(keep))
            for i, (topic, p) in enumerate(keep):
                rows = pl[(pl["topic"] == topic) & (pl["partition"] == p)]
                parts.append(charts.Series(f"{topic}-{p}", hues[i], [(_secs(r.time), float(r.lag))
                                                                      for r in rows.itertuples()], dashed=i % 2 == 1))
            note = "" if len(worst) <= 8 else f" (the 8 of {len(worst)} partitions with the most lag)"
        else:
            note = ""
        own = d.ownership[d.ownership["group_id"] == g] if len(d.ownership) else d.ownership
        lanes: list[charts.Lane] = []
        if len(own):
            members = sorted(own["member_id"].unique())
            for (topic, p), rows in sorted(own.groupby(["topic", "partition"]), key=lambda kv: kv[0])[:TIMELINE_LANES]:
                lane = charts.Lane(f"{topic}-{p}")
                for r in rows.itertuples():
                    end = _secs(r.until) if r.until is not None and not pd.isna(r.until) else x1
                    who = r.client_id or r.member_id
                    lane.bars.append(charts.Bar(_secs(r.since), end, charts.shade(colour, members.index(r.member_id)),
                                                f"{topic}-{p}: {who} ({r.member_id}), generation {r.generation}"))
                lanes.append(lane)
        outs = _rows_of(d.outages_featured, g)
        shades = [(_secs(o.start), _secs(o.end), f"{o.kind}: {o.seconds:.1f} s") for o in outs]
        ticks = [(_secs(r.time), f"generation {r.generation}: {r.reason}") for r in _rows_of(d.rebalances_featured, g)
                 if r.time is not None and not pd.isna(r.time)]
        out.append(f"<h2><span class='swatch' style='background:{colour}'></span>Group {html.escape(g)}</h2>"
                   "<div class='panel'>"
                   + charts.line_chart(f"partition-lag:{g}", f"{g}: messages behind per partition{note}", parts,
                                       "time (UTC)", "messages behind", window=(x0, x1), shades=shades)
                   + _legend([(s.label, s.colour) for s in parts]) + "</div><div class='panel'>"
                   + charts.timeline(f"ownership:{g}", f"{g}: who owned each partition when (outages shaded, "
                                     f"dashed lines: rebalances)", lanes, "time (UTC)", "partition",
                                     (x0, x1), shades, ticks) + "</div>")
    return out


def write_report(out: str, d: ReportData, problems: list[str], meta: dict[str, Any]) -> str:
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
             f"<title>kbroker consumer groups report</title><style>{_CSS}</style></head><body><main>"
             "<h1>kbroker consumer groups report</h1><dl class='meta'>"]
    for key, value in meta.items():
        parts.append(f"<dt>{esc(str(key))}</dt><dd>{esc(str(value))}</dd>")
    parts.append(f"<dt>generated</dt><dd>{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC</dd></dl>")
    if problems:
        parts.append(f"<h2 class='warn'>Problems in the input ({len(problems)})</h2><ul>")
        parts += [f"<li class='warn'>{esc(p)}</li>" for p in problems[:200]]
        parts.append("</ul>")
    tiles = [(d.status_counts.get(s, 0), s, STATUS_COLOURS[s]) for s in STATUS_ORDER]
    parts.append("<h2>Status</h2><div class='tiles' id='status'>")
    parts += [f"<div class='tile' data-status='{s}'><b style='color:{c}'>{n:,}</b><span>{s}</span></div>"
              for n, s, c in tiles]
    parts.append("</div><div class='tiles' id='totals'>")
    for key, text in (("groups", "groups"), ("total_lag", "messages behind, all groups"),
                      ("commits", "commit requests"), ("crashes", "crashes (session expired)"),
                      ("transactions_committed", "committed transactions"),
                      ("transactions_aborted", "aborted transactions")):
        parts.append(f"<div class='tile' data-total='{key}' data-value='{d.totals[key]}'><b>{d.totals[key]:,}</b>"
                     f"<span>{text}</span></div>")
    parts.append("</div><p class='note'>Status follows Burrow's rules over each partition's last 10 commits: "
                 "ok with nothing behind; stopped when the group has not committed for longer than those commits "
                 "span (or has no members and is behind); ok when the lag touched zero; stalled when the "
                 "committed offset did not move; lagging when the lag did not go down; empty when the group has "
                 "no members and nothing behind. The worst partition decides.</p>")
    if d.others:
        parts.append(f"<p class='note'>The charts show the {len(d.featured)} groups that need attention most (status, "
                     f"then lag, then commits), each in its own colour; the other {d.others:,} groups are summarised "
                     f"in one grey dashed line, their mean per group; the first chart sums every group.</p>")
    parts += _series_charts(d)
    parts.append("<h2>Groups</h2>")
    parts.append(_table("group_summary", d.summary, d.summary_total, "worst status first", d.colours, page=20))
    parts += _group_charts(d)
    for name, title in (("lag", "Lag by partition"), ("outages", "Outages"), ("rebalances", "Rebalances"),
                        ("topics", "Topics")):
        shown = d.tables[name]
        parts.append(f"<h2>{title}</h2>" + _table(name, shown.frame, shown.total, shown.order, d.colours))
    parts.append("<p class='note'>Full tables: the Parquet folders next to this file (offsets_latest, lag, "
                 "lag_history, partition_lag_history, commit_rate, rebalances, ownership, outages, group_summary, "
                 "partition_status, topics, errors).</p>")
    parts.append(f"<script type='application/json' id='report-totals'>{json.dumps(d.totals)}</script>")
    parts.append(f"<script>{_SCRIPT}</script></main></body></html>")
    path = storage.join(out, "report.html")
    storage.write_bytes(path, "\n".join(parts).encode("utf-8"))
    return path
