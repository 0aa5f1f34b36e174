"""Figures and how they are printed: each one beside the peer's, measured in the same run, with a ratio."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class NA:
    """A figure that could not be measured; printed as "n/a (reason)"."""

    reason: str

    def __str__(self) -> str:
        return f"n/a ({self.reason})"


Value = float | NA


@dataclass
class Figure:
    bench: str                 # "data_path", "groups"
    name: str                  # short label, e.g. "produce MB/s"
    how: str                   # what it measures and how (sizes, counts, acks, cores)
    unit: str
    values: dict[str, Value] = field(default_factory=dict)  # broker label -> value
    higher_is_better: bool = True
    fmt: str = ",.1f"
    notes: dict[str, str] = field(default_factory=dict)     # broker label -> printed under its value (CPU use)

    def show(self, label: str) -> str:
        v = self.values.get(label)
        if v is None:
            return "-"
        if isinstance(v, NA):
            return str(v)
        return format(v, self.fmt)

    def ratio(self, ours: str, peer: str) -> str:
        a, b = self.values.get(ours), self.values.get(peer)
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b == 0:
            return "-"
        r = a / b
        return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"  # 0.004x rather than 0.00x


# The columns every broker benchmark prints: kbroker with durable acks, kbroker without fsync, the peer.
PEER = "tansu (memory storage)"
KB_ALWAYS = "kbroker (flush always)"
KB_NEVER = "kbroker (flush never)"
LABELS = [KB_ALWAYS, KB_NEVER, PEER]
# The figure printed under kbroker's start-up (bench/groups.py `startup_floor`) and beside its target.
STARTUP_FLOOR = "start-up floor: Python importing asyncio, uvloop and structlog"


def machine_note() -> str:
    cores = os.cpu_count() or 0
    try:
        load = "%.1f" % os.getloadavg()[0]
    except OSError:
        load = "?"
    from kbroker.bench import cores as pinning

    return (f"{cores} cores shared by the broker under test, the load generator and anything else running "
            f"(1-min load average at start {load}); loopback TCP; {pinning.note()}")


def print_figures(figures: list[Figure], labels: list[str], peer: str, *, width: int = 26) -> None:
    """One block per figure: the how-line, then a row of values per broker and ratios to the peer."""
    for f in figures:
        better = "higher is better" if f.higher_is_better else "lower is better"
        print(f"\n* {f.name} [{f.unit}; {better}]")
        print(f"  how: {f.how}")
        for label in labels:
            if label not in f.values:
                continue
            ratio = "" if label == peer else f"   ratio to {peer}: {f.ratio(label, peer)}"
            print(f"  {label:{width}} {f.show(label):>14}{ratio}")
            if label in f.notes:
                print(f"  {'':{width}} {f.notes[label]}")


def _short(label: str) -> str:
    """'kbroker (flush always)' -> 'always'."""
    inner = label[label.find("(") + 1:label.rfind(")")] if "(" in label else label
    return inner.split()[-1] if inner.split() else label


def summary_table(figures: list[Figure], labels: list[str], peer: str) -> str:
    """A compact table: one row per figure, one column per broker, then ours/peer ratios."""
    ours = [label for label in labels if label != peer]
    head = ["figure", *labels, *[f"ratio {_short(o)}" if len(ours) > 1 else "ratio" for o in ours]]
    rows = []
    for f in figures:
        row = [f"{f.bench}: {f.name} ({f.unit})"]
        for label in labels:
            v = f.values.get(label)
            row.append("-" if v is None else ("n/a" if isinstance(v, NA) else format(v, f.fmt)))
        row += [f.ratio(o, peer) for o in ours]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(r))
             for r in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = []
    for f in figures:
        for label, v in f.values.items():
            if isinstance(v, NA):
                notes.append(f"  n/a: {f.bench}: {f.name}, {label}: {v.reason}")
    return "\n".join(lines + ([""] + notes if notes else []))
