"""Inline SVG charts for the report: time series and an ownership timeline, with labelled axes.

Plain SVG text (no plotting library, no script): it scales with the page (viewBox, width 100%), each
series has one colour the report gives its group everywhere, every mark has a tooltip (<title>), and
a browser test can read the axes (`text.axis-label`) and series (`g.series[data-group]`) from the DOM.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from dataclasses import dataclass, field

# Distinct colours (Tableau 10 and a few more); "other" groups are grey.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#17becf", "#bcbd22", "#8c564b")
OTHER = "#9d9d9d"
OUTAGE = "rgba(214, 39, 40, 0.18)"

W, H = 1100, 320
LEFT, RIGHT, TOP, BOTTOM = 78, 20, 34, 54


@dataclass
class Series:
    label: str
    colour: str
    points: list[tuple[float, float]]  # (epoch seconds, value)
    dashed: bool = False


@dataclass
class Bar:
    start: float
    end: float
    colour: str
    label: str  # tooltip


@dataclass
class Lane:
    label: str
    bars: list[Bar] = field(default_factory=list)


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out = []
    v = first
    while True:  # up to the first tick at or above `hi`, so the axis covers every value
        out.append(v)
        if v >= hi - step * 1e-9:
            return out
        v += step


def _number(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def time_ticks(lo: float, hi: float, count: int = 6) -> list[tuple[float, str]]:
    span = max(hi - lo, 1)
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
             172800, 604800)
    step = next((s for s in steps if span / s <= count), steps[-1])
    first = math.ceil(lo / step) * step
    fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < 86400 else "%m-%d"
    if span > 86400 and step < 86400:
        fmt = "%m-%d %H:%M"
    out: list[tuple[float, str]] = []
    t = float(first)
    while t <= hi:
        out.append((t, dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).strftime(fmt)))
        t += step
    return out


class _Frame:
    def __init__(self, x0: float, x1: float, y0: float, y1: float, height: int = H, left: int = LEFT) -> None:
        if x1 <= x0:
            x1 = x0 + 1
        if y1 <= y0:
            y1 = y0 + 1
        self.x0, self.x1, self.y0, self.y1, self.h, self.left = x0, x1, y0, y1, height, left

    def x(self, v: float) -> float:
        return self.left + (v - self.x0) / (self.x1 - self.x0) * (W - self.left - RIGHT)

    def y(self, v: float) -> float:
        return self.h - BOTTOM - (v - self.y0) / (self.y1 - self.y0) * (self.h - TOP - BOTTOM)


def _axes(f: _Frame, x_label: str, y_label: str, y_ticks: list[tuple[float, str]] | None) -> list[str]:
    parts = []
    bottom = f.h - BOTTOM
    left = f.left
    parts.append(f"<line class='axis' x1='{left}' y1='{bottom}' x2='{W - RIGHT}' y2='{bottom}' stroke='#555'/>")
    parts.append(f"<line class='axis' x1='{left}' y1='{TOP}' x2='{left}' y2='{bottom}' stroke='#555'/>")
    for t, text in time_ticks(f.x0, f.x1):
        x = f.x(t)
        parts.append(f"<line x1='{x:.1f}' y1='{bottom}' x2='{x:.1f}' y2='{bottom + 5}' stroke='#555'/>"
                     f"<text class='tick' x='{x:.1f}' y='{bottom + 18}' text-anchor='middle'>{_esc(text)}</text>")
    for v, text in y_ticks or []:
        y = f.y(v)
        parts.append(f"<line x1='{left}' y1='{y:.1f}' x2='{W - RIGHT}' y2='{y:.1f}' stroke='#eee'/>"
                     f"<text class='tick' x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{_esc(text)}</text>")
    parts.append(f"<text class='axis-label x' x='{(left + W - RIGHT) / 2}' y='{f.h - 12}' "
                 f"text-anchor='middle'>{_esc(x_label)}</text>")
    parts.append(f"<text class='axis-label y' transform='translate(16,{(TOP + bottom) / 2}) rotate(-90)' "
                 f"text-anchor='middle'>{_esc(y_label)}</text>")
    return parts


def _svg(name: str, title: str, height: int, body: list[str]) -> str:
    return (f"<svg class='chart' data-chart='{_esc(name)}' viewBox='0 0 {W} {height}' width='100%' "
            f"preserveAspectRatio='xMinYMin meet' role='img' aria-label='{_esc(title)}' "
            f"xmlns='http://www.w3.org/2000/svg'><title>{_esc(title)}</title>"
            f"<text class='chart-title' x='{LEFT}' y='20'>{_esc(title)}</text>" + "".join(body) + "</svg>")


def line_chart(name: str, title: str, series: list[Series], x_label: str, y_label: str,
               window: tuple[float | None, float | None] | None = None, step: bool = True,
               shades: list[tuple[float, float, str]] | None = None, height: int = H) -> str:
    """Lines over time (steps: a value holds until the next point), one colour per series."""
    points = [p for s in series for p in s.points]
    if not points:
        return _empty(name, title, x_label, y_label)
    x0 = window[0] if window and window[0] is not None else min(p[0] for p in points)
    x1 = window[1] if window and window[1] is not None else max(p[0] for p in points)
    top = max(p[1] for p in points)
    ticks = nice_ticks(0, top if top > 0 else 1)
    f = _Frame(x0, x1, 0, ticks[-1] if ticks else 1, height)
    body = _axes(f, x_label, y_label, [(v, _number(v)) for v in ticks])
    for start, end, label in shades or []:
        a, b = f.x(max(start, x0)), f.x(min(end, x1))
        body.append(f"<rect class='outage' x='{a:.1f}' y='{TOP}' width='{max(b - a, 1.5):.1f}' "
                    f"height='{height - TOP - BOTTOM}' fill='{OUTAGE}'><title>{_esc(label)}</title></rect>")
    for rank, s in enumerate(series):
        pts = sorted(s.points)
        # Lines drawn later lie on earlier ones: earlier lines are wider, so a line hidden under
        # another still shows as a rim of its own colour.
        width = max(1.5, 2 + 1.5 * (len(series) - 1 - rank) / max(len(series) - 1, 1) * 2)
        path: list[str] = []
        for i, (t, v) in enumerate(pts):
            x, y = f.x(t), f.y(v)
            if i == 0:
                path.append(f"M{x:.1f},{y:.1f}")
            elif step:
                path.append(f"H{x:.1f}V{y:.1f}")
            else:
                path.append(f"L{x:.1f},{y:.1f}")
        dash = " stroke-dasharray='5,3'" if s.dashed else ""
        marks = "".join(f"<circle cx='{f.x(t):.1f}' cy='{f.y(v):.1f}' r='2.2' fill='{s.colour}'>"
                        f"<title>{_esc(s.label)}: {_number(v)} at {_clock(t)}</title></circle>"
                        for t, v in pts) if len(pts) <= 150 else ""
        body.append(f"<g class='series' data-group='{_esc(s.label)}'><path d='{''.join(path)}' fill='none' "
                    f"stroke='{s.colour}' stroke-width='{width:.1f}'{dash}><title>{_esc(s.label)}</title></path>{marks}</g>")
    return _svg(name, title, height, body)


def timeline(name: str, title: str, lanes: list[Lane], x_label: str, y_label: str,
             window: tuple[float, float], shades: list[tuple[float, float, str]], ticks: list[tuple[float, str]]) -> str:
    """One lane per partition: a bar per owner (its tooltip says who), outages shaded red across the
    lanes, a tick at each rebalance."""
    if not lanes:
        return _empty(name, title, x_label, y_label)
    lane_h = 16
    height = TOP + BOTTOM + lane_h * len(lanes) + 8
    x0, x1 = window
    # room for the lane names between the axis label and the axis
    f = _Frame(x0, x1, 0, 1, height, left=34 + 7 * max(len(lane.label) for lane in lanes))
    body = _axes(f, x_label, y_label, None)
    top, bottom = TOP, height - BOTTOM
    for start, end, label in shades:
        a, b = f.x(max(start, x0)), f.x(min(end, x1))
        body.append(f"<rect class='outage' x='{a:.1f}' y='{top}' width='{max(b - a, 1.5):.1f}' "
                    f"height='{bottom - top}' fill='{OUTAGE}'><title>{_esc(label)}</title></rect>")
    for t, label in ticks:
        x = f.x(t)
        body.append(f"<line class='rebalance' x1='{x:.1f}' y1='{top}' x2='{x:.1f}' y2='{bottom}' stroke='#333' "
                    f"stroke-dasharray='2,3'><title>{_esc(label)}</title></line>")
    for i, lane in enumerate(lanes):
        y = top + 4 + i * lane_h
        body.append(f"<text class='lane' x='{f.left - 6}' y='{y + 11}' text-anchor='end'>{_esc(lane.label)}</text>")
        for bar in lane.bars:
            a, b = f.x(max(bar.start, x0)), f.x(min(bar.end, x1))
            body.append(f"<rect class='owner' x='{a:.1f}' y='{y}' width='{max(b - a, 1):.1f}' height='{lane_h - 4}' "
                        f"fill='{bar.colour}'><title>{_esc(bar.label)}</title></rect>")
    return _svg(name, title, height, body)


def _empty(name: str, title: str, x_label: str, y_label: str) -> str:
    f = _Frame(0, 1, 0, 1)
    body = _axes(f, x_label, y_label, None)
    body.append(f"<text class='none' x='{W / 2}' y='{H / 2}' text-anchor='middle' fill='#888'>no data</text>")
    return _svg(name, title, H, body)


def _clock(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def shade(colour: str, i: int) -> str:
    """The group's colour, lighter for every other member (owners in a timeline stay the group's hue)."""
    if i % 2 == 0:
        return colour
    r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(int(c + (255 - c) * 0.45) for c in (r, g, b)))


def tints(colour: str, n: int) -> list[str]:
    """`n` variations of one group's colour, darkest first: a group's partitions stay in its hue."""
    r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    out = []
    for i in range(n):
        f = -0.35 + 0.9 * i / max(n - 1, 1)  # from darker to lighter
        mix = [int(c * (1 + f)) if f < 0 else int(c + (255 - c) * f) for c in (r, g, b)]
        out.append("#{:02x}{:02x}{:02x}".format(*(max(0, min(255, c)) for c in mix)))
    return out
