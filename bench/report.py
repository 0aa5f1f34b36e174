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


# The columns the broker benchmarks print: kbroker with durable acks, kbroker without fsync, then the
# peers: Tansu (issue 17's targets are ratios to it) and Apache Kafka 4.4 at its defaults, whose acks
# follow a write to the page cache without an fsync, and again with log.flush.interval.messages=1,
# which fsyncs every append before it is acknowledged, as kbroker --flush always does.
PEER = "tansu (memory storage)"
KB_ALWAYS = "kbroker (flush always)"
KB_NEVER = "kbroker (flush never)"
KAFKA = "kafka 4.4 (default flush)"
KAFKA_FSYNC = "kafka 4.4 (flush.messages=1)"
LABELS = [KB_ALWAYS, KB_NEVER, PEER, KAFKA, KAFKA_FSYNC]
PEERS = [PEER, KAFKA, KAFKA_FSYNC]
# The ratios printed, kbroker's column over a peer's: each kbroker policy beside each peer at its
# defaults, and the durable one beside Kafka fsyncing too.
RATIOS = [(KB_ALWAYS, PEER), (KB_NEVER, PEER), (KB_ALWAYS, KAFKA), (KB_NEVER, KAFKA), (KB_ALWAYS, KAFKA_FSYNC)]
# `--peers` names the peers a run starts; `--quick` leaves Kafka out (its JVM takes 10-30 s to start
# here, and a run starts it a dozen times).
PEER_LABELS = {"tansu": (PEER,), "kafka": (KAFKA, KAFKA_FSYNC)}
FULL_PEERS = ("tansu", "kafka")
QUICK_PEERS = ("tansu",)
# How Kafka runs in every benchmark (bench/brokers.py start_kafka), printed once at the head of a run.
KAFKA_HOW = ("one KRaft node (broker and controller in one JVM) from build/kafka/libs, "
             "pinned to the broker core as the others, with kafka-server-start.sh's heap (-Xmx1G -Xms1G) and "
             "kafka-run-class.sh's G1 options, group.initial.rebalance.delay.ms=0 (kbroker's is 0 too); at its "
             "default flush it acknowledges a write once it is in the page cache, with no fsync per write "
             "(as kbroker --flush never); the flush.messages=1 column (log.flush.interval.messages=1) fsyncs "
             "every append before acknowledging it (as kbroker --flush always)")
# The figure printed under kbroker's start-up (bench/groups.py `startup_floor`) and beside its target.
STARTUP_FLOOR = "start-up floor: Python importing asyncio, uvloop and structlog"


def run_labels(peers: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The columns of a run with these peers (names of PEER_LABELS): kbroker's two, then the peers'."""
    chosen = {KB_ALWAYS, KB_NEVER, *(label for p in peers for label in PEER_LABELS[p])}
    return tuple(label for label in LABELS if label in chosen)


def peers_arg(text: str) -> tuple[str, ...]:
    """argparse type of a --peers flag: comma-separated names of PEER_LABELS."""
    import argparse

    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [n for n in names if n not in PEER_LABELS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer {', '.join(unknown)}: the peers are "
                                         f"{', '.join(PEER_LABELS)}")
    return names


def machine_note() -> str:
    cores = os.cpu_count() or 0
    try:
        load = "%.1f" % os.getloadavg()[0]
    except OSError:
        load = "?"
    from kbroker.bench import cores as pinning

    return (f"{cores} cores shared by the broker under test, the load generator and anything else running "
            f"(1-min load average at start {load}); loopback TCP; {pinning.note()}")


def print_figures(figures: list[Figure], labels: list[str] | tuple[str, ...], *, width: int = 28) -> None:
    """One block per figure: the how-line, then a row of values per broker, kbroker's with their ratios
    to each peer measured (RATIOS)."""
    for f in figures:
        better = "higher is better" if f.higher_is_better else "lower is better"
        print(f"\n* {f.name} [{f.unit}; {better}]")
        print(f"  how: {f.how}")
        for label in labels:
            if label not in f.values:
                continue
            ratios = [f"{_short(peer)} {f.ratio(ours, peer)}" for ours, peer in RATIOS
                      if ours == label and peer in f.values]
            ratio = f"   ratio to {', '.join(ratios)}" if ratios else ""
            print(f"  {label:{width}} {f.show(label):>14}{ratio}")
            if label in f.notes:
                print(f"  {'':{width}} {f.notes[label]}")


def _short(label: str) -> str:
    """A column's short name in ratios: 'kbroker (flush always)' -> 'always', 'tansu (memory storage)'
    -> 'tansu', 'kafka 4.4 (flush.messages=1)' -> 'kafka-fsync'."""
    return {KB_ALWAYS: "always", KB_NEVER: "never", PEER: "tansu", KAFKA: "kafka",
            KAFKA_FSYNC: "kafka-fsync"}.get(label, label)


def summary_table(figures: list[Figure], labels: list[str] | tuple[str, ...],
                  ratios: list[tuple[str, str]] | None = None) -> str:
    """A compact table: one row per figure, one column per broker, then a column per ratio (RATIOS
    unless given: kbroker's column over a peer's, "always/tansu") among the labels shown."""
    pairs = [(a, b) for a, b in (RATIOS if ratios is None else ratios) if a in labels and b in labels]
    head = ["figure", *labels, *[f"{_short(a)}/{_short(b)}" for a, b in pairs]]
    rows = []
    for f in figures:
        row = [f"{f.bench}: {f.name} ({f.unit})"]
        for label in labels:
            v = f.values.get(label)
            row.append("-" if v is None else ("n/a" if isinstance(v, NA) else format(v, f.fmt)))
        row += [f.ratio(a, b) for a, b in pairs]
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
