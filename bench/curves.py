"""Cost curves (issue 17): how a figure grows with the number of groups, members, partitions or
connections, printed as a table and plotted into bench/results/<name>.png (matplotlib, Agg).

    curve = Curve("heartbeat_rate_by_groups", "Heartbeat v4 rate by number of groups", "groups",
                  "requests/s", [1, 100, 10_000])
    curve.points[label] = {1: 9000.0, 100: 8000.0, 10_000: NA("...")}
    print(curve.table()); curve.plot(RESULTS)

A benchmark builds its curves from the figures it measured anyway (one run, no second measurement).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kbroker.bench.report import NA, Figure, Value

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Curve:
    name: str                  # file name stem: bench/results/<name>.png
    title: str
    x_label: str               # "groups", "members", "partitions", "idle connections"
    unit: str                  # of the y axis
    xs: list[int]
    points: dict[str, dict[int, Value]] = field(default_factory=dict)   # broker label -> x -> value
    fmt: str = ",.1f"
    note: str = ""             # how it was measured, printed under the table

    def table(self) -> str:
        labels = list(self.points)
        head = [self.x_label, *labels]
        rows = [[f"{x:,}", *[self._cell(self.points[lb].get(x)) for lb in labels]] for x in self.xs]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = [f"-- {self.title} [{self.unit}] --"]
        lines += ["  ".join(c.rjust(widths[i]) for i, c in enumerate(r)) for r in [head, *rows]]
        if self.note:
            lines.append(f"   {self.note}")
        nas = [f"   n/a: {lb} at {x:,}: {v.reason}" for lb in labels for x, v in self.points[lb].items()
               if isinstance(v, NA)]
        return "\n".join(lines + nas)

    def _cell(self, v: Value | None) -> str:
        if v is None:
            return "-"
        return "n/a" if isinstance(v, NA) else format(v, self.fmt)

    def plot(self, folder: Path = RESULTS, stamp: str = "") -> Path | None:
        """Write <folder>/<name>.png; None (and nothing written) when no point was measured."""
        series = {lb: [(x, v) for x, v in sorted(pts.items()) if isinstance(v, (int, float))]
                  for lb, pts in self.points.items()}
        if not any(series.values()):
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        folder.mkdir(parents=True, exist_ok=True)
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
        for label, pts in series.items():
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xticks(self.xs)
        ax.set_xticklabels([f"{x:,}" for x in self.xs])
        ax.set_xlabel(self.x_label)
        ax.set_ylabel(self.unit)
        ax.set_ylim(bottom=0)
        ax.set_title(self.title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        if stamp:
            fig.text(0.01, 0.01, stamp, fontsize=6, color="gray")
        fig.tight_layout(rect=(0, 0.03, 1, 1) if stamp else (0, 0, 1, 1))
        path = folder / f"{self.name}.png"
        fig.savefig(path)
        plt.close(fig)
        return path


def from_figures(figures: list[Figure], name: str, title: str, x_label: str, unit: str,
                 picks: dict[int, str], *, fmt: str = ",.1f", note: str = "",
                 labels: list[str] | None = None) -> Curve:
    """A curve whose points are figures already measured: picks maps x -> the figure's name."""
    curve = Curve(name, title, x_label, unit, sorted(picks), fmt=fmt, note=note)
    by_name = {f.name: f for f in figures}
    for x, fig_name in picks.items():
        f = by_name.get(fig_name)
        if f is None:
            continue
        for label, v in f.values.items():
            if labels is None or label in labels:
                curve.points.setdefault(label, {})[x] = v
    return curve


def run_stamp() -> str:
    """When and under what load the figures were taken, for the foot of each plot."""
    import os
    import time

    from kbroker.bench import cores

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    where = (f"broker pinned to core {min(cores.BROKER_CORE)}, generator to "
             f"{','.join(map(str, sorted(cores.GENERATOR_CORES)))}" if cores.PINNING else "nothing pinned")
    return f"make bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, 1-min load {load:.1f}; {where}"


def report(curves: list[Curve], folder: Path = RESULTS) -> None:
    """Print every curve's table and write its PNG."""
    stamp = run_stamp()
    for c in curves:
        print(c.table())
        path = c.plot(folder, stamp)
        print(f"   plot: {path if path else 'none (no point measured)'}\n")
