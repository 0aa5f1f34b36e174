"""Issue 17's targets, each checked against figures of the same `make bench` run.

A target is a ratio against Tansu (the peer, measured in the same run) or an absolute bound; where an
absolute target has a Tansu figure (start-up, idle RSS, time to Stable), Tansu's is printed beside it;
where the platform alone has one (the start-up floor), the verdict carries it.
`table(figures)` prints one line per target: kbroker's figure, Tansu's, the ratio, Apache Kafka's
figure and kbroker's ratio to it (information: the targets are issue 17's, against Tansu), the target,
and met / NOT MET / n/a (with the reason: not measured at these sizes, or the figure could not be taken).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.bench.report import KAFKA, KAFKA_FSYNC, KB_ALWAYS, KB_NEVER, NA, PEER, STARTUP_FLOOR, Figure


@dataclass(frozen=True)
class Target:
    text: str                       # as issue 17 words it
    figure: str                     # "<bench>: <figure name> (<unit>)"
    ours: str = KB_ALWAYS           # which kbroker column
    ratio: float | None = None      # ours / Tansu must be >= (higher is better) or <= (lower is better) this
    bound: float | None = None      # ours must be >= (higher is better) or < (lower is better) this
    higher_is_better: bool = True
    peer_figure: str | None = None  # Tansu's figure from another line (it serves no ConsumerGroupHeartbeat)
    floor_figure: str | None = None  # what the platform alone costs, measured in the same run: shown beside the verdict
    floor_text: str = ""            # what that floor is, in the verdict
    kafka: str = KAFKA              # Kafka's column beside it (information): fsyncing where the target is durable


def key(f: Figure) -> str:
    return f"{f.bench}: {f.name} ({f.unit})"


HB = "groups: Heartbeat v4 rate (requests/s)"
OC = "groups: OffsetCommit v8 rate (requests/s)"
TARGETS = [
    Target("Heartbeat v4 >= 2x Tansu", HB, ratio=2.0),
    Target("Heartbeat v4 >= 50k requests/s", HB, bound=50_000),
    Target("OffsetCommit v8 >= 1.5x Tansu, --flush always", OC, ratio=1.5, kafka=KAFKA_FSYNC),
    Target("OffsetCommit v8 >= 2x Tansu, --flush never", OC, ours=KB_NEVER, ratio=2.0),
    Target("ConsumerGroupHeartbeat v1 in Heartbeat's range: >= 2x Tansu's Heartbeat v4",
           "consumer_groups: ConsumerGroupHeartbeat v1 rate (requests/s)", ratio=2.0, peer_figure=HB),
    Target("ConsumerGroupHeartbeat v1 >= 50k requests/s",
           "consumer_groups: ConsumerGroupHeartbeat v1 rate (requests/s)", bound=50_000),
    Target("consume MB/s >= Tansu's", "data_path: consume throughput (MB/s, 10^6 bytes of values)", ratio=1.0),
    Target("produce MB/s >= 1.3x Tansu's, durable acks (--flush always)",
           "data_path: produce throughput (MB/s, 10^6 bytes of values)", ratio=1.3, kafka=KAFKA_FSYNC),
    Target("replay of 1,000,000 offset commits at start-up < 2 s",
           "groups: offsets replay of 1,000,000 commits at start-up (s)", bound=2.0, higher_is_better=False),
    Target("empty start-up to first answered ApiVersions < 0.15 s",
           "groups: start-up with nothing stored (s)", bound=0.15, higher_is_better=False,
           floor_figure=f"groups: {STARTUP_FLOOR} (s)", floor_text="Python with asyncio, uvloop and structlog alone"),
    Target("RSS for 10,000 groups with committed offsets <= Tansu's", "groups: RSS with 10,000 groups (MiB)",
           ratio=1.0, higher_is_better=False),
    Target("idle RSS < 30 MiB", "groups: idle RSS (MiB)", bound=30.0, higher_is_better=False),
    Target("rebalance of 500 members to Stable < 300 ms, initial delay 0",
           "groups: 500 members to Stable (ms)", bound=300.0, higher_is_better=False),
]


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def _kafka(t: Target, f: Figure | None) -> list[str]:
    """[Kafka's figure, kbroker / Kafka] for a target: the same figure in Kafka's column (Kafka serves
    ConsumerGroupHeartbeat, so its own rate stands beside that target, not its Heartbeat)."""
    if f is None or t.kafka not in f.values:
        return ["-", "-"]
    v = f.values[t.kafka]
    shown = "n/a" if isinstance(v, NA) else f.show(t.kafka)
    if t.kafka == KAFKA_FSYNC:
        shown += " (fsync)"
    return [shown, f.ratio(t.ours, t.kafka)]


def check(t: Target, figures: dict[str, Figure]) -> list[str]:
    """[target, kbroker, Tansu, ratio, Kafka, ratio to Kafka, required, verdict] for one target."""
    f = figures.get(t.figure)
    if f is None:
        return [t.text, "-", "-", "-", "-", "-", _required(t), "n/a: not measured in this run (sizes or --skip)"]
    kafka = _kafka(t, f)
    peer_f = figures.get(t.peer_figure) if t.peer_figure else f
    ours_v = f.values.get(t.ours)
    peer_v = peer_f.values.get(PEER) if peer_f is not None else None
    ours, peer = _num(ours_v), _num(peer_v)
    ratio = ours / peer if ours is not None and peer else None
    shown_ours = f.show(t.ours) if ours_v is not None else "-"
    shown_peer = peer_f.show(PEER) if peer_f is not None and peer_v is not None else "-"
    if isinstance(peer_v, NA):
        shown_peer = "n/a"
    if isinstance(ours_v, NA):
        shown_ours = "n/a"
    ratio_text = f"{ratio:.2f}x" if ratio is not None else "-"
    if ours is None:
        why = ours_v.reason if isinstance(ours_v, NA) else "no kbroker figure"
        return [t.text, shown_ours, shown_peer, ratio_text, *kafka, _required(t), f"n/a: {why}"]
    ok = True
    if t.ratio is not None:
        if ratio is None:
            why = peer_v.reason if isinstance(peer_v, NA) else "no Tansu figure in this run"
            return [t.text, shown_ours, shown_peer, ratio_text, *kafka, _required(t), f"n/a: {why}"]
        ok = ratio >= t.ratio if t.higher_is_better else ratio <= t.ratio
    if t.bound is not None:
        ok = ok and (ours >= t.bound if t.higher_is_better else ours < t.bound)
    verdict = "met" if ok else "NOT MET"
    floor = figures.get(t.floor_figure) if t.floor_figure else None
    if floor is not None and _num(floor.values.get(t.ours)) is not None:
        verdict += f" (floor {floor.show(t.ours)} {floor.unit}: {t.floor_text})"
    return [t.text, shown_ours, shown_peer, ratio_text, *kafka, _required(t), verdict]


def _required(t: Target) -> str:
    if t.ratio is not None:
        return f"{'>=' if t.higher_is_better else '<='} {t.ratio:g}x Tansu"
    return f"{'>=' if t.higher_is_better else '<'} {t.bound:,g}"


def table(figures: list[Figure]) -> str:
    by_key = {key(f): f for f in figures}
    head = ["target (issue 17)", "kbroker", "Tansu", "ratio", "Kafka", "to Kafka", "required", "check"]
    rows = [check(t, by_key) for t in TARGETS]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    lines = []
    for r in [head, ["-" * w for w in widths] + ["-----"], *rows]:
        cells = [r[0].ljust(widths[0]), *[r[i].rjust(widths[i]) for i in range(1, len(widths))], r[-1]]
        lines.append("  ".join(cells))
    met = sum(1 for r in rows if r[-1].startswith("met"))
    lines.append(f"{met} of {len(rows)} targets met; ratio = kbroker / Tansu, both measured in this run; kbroker "
                 f"column: {KB_ALWAYS} unless the target names --flush never; Kafka: {KAFKA}, or (fsync) "
                 f"{KAFKA_FSYNC} beside the durable targets, to Kafka = kbroker / Kafka (information, not a target)")
    return "\n".join(lines)
