"""The HTML report: a few PNG charts (matplotlib, no display needed) and the tables' heads.

Input is small pandas frames the job collected from the already aggregated tables; nothing here
touches Spark. The report is one `report.html` plus `charts/*.png` next to it, openable from disk.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import pandas as pd

MAX_ROWS = 200  # per table in the HTML; the Parquet folders have everything
MAX_SERIES = 12  # groups per chart


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def chart_lag(lag: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.4 * max(3, min(len(lag), 30))))
    known = lag.dropna(subset=["lag"]) if len(lag) else lag
    if not len(known):
        _empty(ax, "no committed offsets with a known log end offset")
    else:
        per_group = known.groupby("group_id")["lag"].sum().sort_values().tail(30)
        ax.barh(per_group.index.astype(str), per_group.values, color="#4c72b0")
        for y, v in enumerate(per_group.values):
            ax.text(v, y, f" {int(v):,}", va="center", fontsize=8)
        ax.set_xlabel("messages behind (sum over partitions)")
    ax.set_title("Consumer lag by group")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def chart_commit_rate(rate: pd.DataFrame, path: Path) -> None:
    """Complete minutes as lines; a group's first and last minutes (partly covered by the data) as
    hollow markers, so they do not read as dips."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4))
    if not len(rate):
        _empty(ax, "no offset commits")
    else:
        top = rate.groupby("group_id")["commits"].sum().sort_values(ascending=False).head(MAX_SERIES).index
        for group in top:
            series = rate[rate["group_id"] == group].sort_values("minute")
            complete = series[series["complete"]] if "complete" in series else series
            partial = series[~series["complete"]] if "complete" in series else series.iloc[0:0]
            line, = ax.plot(complete["minute"], complete["commits"], marker="o", markersize=3, label=str(group))
            ax.plot(partial["minute"], partial["commits"], linestyle="none", marker="o", markersize=5,
                    markerfacecolor="none", color=line.get_color())
        ax.set_ylabel("commits per minute")
        ax.yaxis.set_major_locator(_integer_locator())
        ax.legend(fontsize=8, loc="upper left")
        fig.autofmt_xdate()
    ax.set_title("Commit rate over time (UTC; hollow: first/last minute, partly covered)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _integer_locator():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def chart_rebalances(rebalances: pd.DataFrame, path: Path) -> None:
    """Generations as steps; a crash (session expired) as a red cross, a clean stop (the last member
    left with LeaveGroup) as a grey square: stopping consumers is not drawn like losing one."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4))
    timed = rebalances.dropna(subset=["time"]) if len(rebalances) else rebalances
    if not len(timed):
        _empty(ax, "no group generations")
    else:
        top = timed.groupby("group_id").size().sort_values(ascending=False).head(MAX_SERIES).index
        for group in top:
            series = timed[timed["group_id"] == group].sort_values("generation")
            ax.step(series["time"], series["generation"], where="post", marker="o", markersize=4, label=str(group))
        if "ending" in timed:
            crashes = timed[timed["ending"] == "crash or hang"]
            stops = timed[timed["ending"] == "clean stop"]
            if len(crashes):
                ax.plot(crashes["time"], crashes["generation"], "x", color="red", markersize=9, label="crash or hang")
            if len(stops):
                ax.plot(stops["time"], stops["generation"], "s", color="grey", markersize=7, markerfacecolor="none",
                        label="clean stop")
        ax.set_ylabel("generation")
        ax.yaxis.set_major_locator(_integer_locator())
        ax.legend(fontsize=8, loc="upper left")
        fig.autofmt_xdate()
    ax.set_title("Rebalances over time (UTC): each step is a new generation")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _readable(frame: pd.DataFrame) -> pd.DataFrame:
    """No `None`, no `NaN`, no `1.0` for a count, and times with their zone."""
    out = frame.copy()
    for name in out.columns:
        col = out[name]
        if pd.api.types.is_datetime64_any_dtype(col):
            out[name] = col.dt.strftime("%Y-%m-%d %H:%M:%S UTC").where(col.notna(), "")
        elif pd.api.types.is_float_dtype(col):
            known = col.dropna()
            if len(known) and (known == known.round()).all():
                out[name] = col.astype("Int64").astype("string").fillna("")
            else:
                out[name] = col.map(lambda v: "" if pd.isna(v) else f"{v:,.2f}")
        elif pd.api.types.is_bool_dtype(col):
            out[name] = col.map({True: "yes", False: "no"})
        else:
            out[name] = col.map(lambda v: "" if v is None or (isinstance(v, float) and pd.isna(v)) else v)
    return out


def _table(frame: pd.DataFrame) -> str:
    if not len(frame):
        return "<p class='none'>none</p>"
    shown = _readable(frame.head(MAX_ROWS))
    note = f"<p class='note'>first {MAX_ROWS} of {len(frame)} rows</p>" if len(frame) > MAX_ROWS else ""
    return shown.to_html(index=False, border=0, classes="t", na_rep="", escape=True) + note


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table.t{border-collapse:collapse;font-size:12px}table.t td,table.t th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}
table.t th{background:#f4f4f4}.none,.note{color:#888}.warn{color:#a40}img{max-width:100%;border:1px solid #eee}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{color:#666}
"""


def write_report(out_dir: Path, tables: dict[str, pd.DataFrame], problems: list[str], meta: dict[str, Any]) -> Path:
    charts = out_dir / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    chart_lag(tables["lag"], charts / "lag_by_group.png")
    chart_commit_rate(tables["commit_rate"], charts / "commit_rate.png")
    chart_rebalances(tables["rebalances"], charts / "rebalances.png")
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>kbroker report</title><style>{_CSS}</style>"
             "</head><body><h1>kbroker consumer groups report</h1><dl>"]
    for key, value in meta.items():
        parts.append(f"<dt>{esc(str(key))}</dt><dd>{esc(str(value))}</dd>")
    parts.append(f"<dt>generated</dt><dd>{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC</dd></dl>")
    if problems:
        parts.append(f"<h2 class='warn'>Problems in the input ({len(problems)})</h2><ul>")
        parts += [f"<li class='warn'>{esc(p)}</li>" for p in problems[:MAX_ROWS]]
        parts.append("</ul>")
    if "group_summary" in tables:
        parts.append("<h2>Groups</h2>")
        parts.append(_table(tables["group_summary"]))
    parts.append("<h2>Lag</h2><img src='charts/lag_by_group.png' alt='lag by group'>")
    parts.append(_table(tables["lag"]))
    parts.append("<h2>Commit rate</h2><img src='charts/commit_rate.png' alt='commit rate over time'>")
    parts.append(_table(tables["commit_rate"]))
    parts.append("<h2>Rebalances</h2><img src='charts/rebalances.png' alt='rebalances over time'>")
    parts.append(_table(tables["rebalances"]))
    parts.append("<h2>Topics</h2>")
    parts.append(_table(tables["topics"]))
    parts.append("<p class='note'>Full tables: the Parquet folders next to this file "
                 "(offsets_latest, lag, commit_rate, rebalances, group_summary, topics, errors).</p></body></html>")
    path = out_dir / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
