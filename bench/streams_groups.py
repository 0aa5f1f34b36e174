"""Streams groups (KIP-1071, issue 46): time for three Kafka Streams 4.4 instances to settle on an assignment.

    python -m bench.streams_groups [--rounds N] [--peers kafka] [--quick]

Three instances of the word count (tests/clients/java/StreamsInstance.java: `group.protocol=streams`,
exactly-once v2, a repartition and a counting store: 4 tasks over input topics of 2 partitions), each its
own JVM, are launched at once on a new application id; the clock runs from the launch to the moment the
settled assignment first shows: every instance RUNNING, every task active on exactly one instance in their
reports (every 300 ms), the broker's StreamsGroupDescribe saying the group is Stable with the same tasks
per process, and so for 3 s after (tests/reference/streams_instances.wait_settled). The brokers run at their defaults, so both figures
include Kafka's default `group.streams.initial.rebalance.delay.ms` (3 s) and the instances' JVM start-up
(the same on both): the difference between the columns is the brokers'. Each broker runs --rounds
rounds (3), a new application each; the median is the figure, every round is printed. Tansu serves no
streams group: it is not measured.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kbroker.bench import brokers
from kbroker.bench.data_path import create_topic
from kbroker.bench.report import (FULL_PEERS, KAFKA, KB_ALWAYS, NA, QUICK_PEERS, Figure, peers_arg, print_figures,
                                  run_labels)

LABELS = [KB_ALWAYS, KAFKA]  # kbroker's flush policy changes nothing here; Tansu has no streams groups


@dataclass
class Sizes:
    rounds: int = 3
    labels: tuple[str, ...] = field(default_factory=lambda: run_labels(FULL_PEERS))

    @classmethod
    def quick(cls) -> Sizes:
        return cls(rounds=1, labels=run_labels(QUICK_PEERS))


def _round(bootstrap: str, java: list[str], work: Path) -> float:
    """Seconds from launching three instances of a new application to their settled assignment."""
    from kbroker.tests.reference.streams_instances import Instance, wait_settled

    app = f"bench-streams-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app}-in", f"{app}-out"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 2)
    instances = [Instance([*java, bootstrap, app, source, sink], work / f"{app}-state-{i}", work / f"{app}-{i}.log")
                 for i in range(3)]
    launched = time.monotonic()
    try:
        for instance in instances:
            instance.start()
        _, settled = wait_settled(instances, f"  {app}", bootstrap, app, standbys=False)
    finally:
        for instance in instances:
            instance.stop()
    return settled - launched


def _java(work: Path) -> list[str]:
    """The instances' command, or Unavailable (no Kafka jars, no JDK)."""
    kafka = brokers.kafka_reference()  # Unavailable without Kafka's jars, which the instances run on too
    if shutil.which("javac") is None:
        raise brokers.Unavailable("javac is missing (a JDK: Java 17 or later)")
    from kbroker.tests.reference.streams_instances import java_command

    return java_command(kafka.kafka_libs(), work)


def run(sizes: Sizes, *, verbose: bool = True) -> list[Figure]:
    results: dict[str, list[float] | NA] = {}
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as tmp:
        work = Path(tmp)
        try:
            java = _java(work)
        except brokers.Unavailable as e:
            return figures({label: NA(str(e)) for label in LABELS if label in sizes.labels}, sizes)
        for label in [label for label in LABELS if label in sizes.labels]:
            if verbose:
                print(f"  streams groups: {label} ...", flush=True)
            try:
                handle = brokers.start_label(label)
            except brokers.Unavailable as e:
                results[label] = NA(str(e))
                continue
            try:
                rounds = [_round(handle.bootstrap, java, work) for _ in range(sizes.rounds)]
            finally:
                handle.stop()
            if verbose:
                print(f"    rounds: {', '.join(f'{s:.2f} s' for s in rounds)}", flush=True)
            results[label] = rounds
    return figures(results, sizes)


def figures(results: dict[str, list[float] | NA], s: Sizes) -> list[Figure]:
    f = Figure("streams_groups", "3 Kafka Streams instances to a settled assignment",
               "three Kafka Streams 4.4 instances (word count, group.protocol=streams, exactly-once v2, 4 tasks), "
               "each its own JVM, launched at once on a new application; launch to the first report of the "
               "assignment they keep (every instance RUNNING, every task active once, the group Stable as the "
               "broker describes it); brokers at their defaults "
               "(a 3 s initial rebalance delay on both); the median of "
               f"{s.rounds} round(s), each printed", "s", higher_is_better=False, fmt=",.2f")
    for label, rounds in results.items():
        if isinstance(rounds, NA):
            f.values[label] = rounds
            continue
        f.values[label] = statistics.median(rounds)
        f.notes[label] = "rounds " + ", ".join(f"{r:.2f}" for r in rounds) + f"; spread {max(rounds) - min(rounds):.2f} s"
    return [f]


def main(argv: list[str] | None = None) -> int:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, help=f"rounds per broker (default {Sizes().rounds})")
    parser.add_argument("--peers", type=peers_arg, help=f"comma-separated peers to measure beside kbroker "
                                                        f"(default {','.join(FULL_PEERS)}; --quick: "
                                                        f"{','.join(QUICK_PEERS)})")
    args = parser.parse_args(argv)
    from kbroker.bench import cores

    cores.pin_generator()
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.rounds:
        sizes.rounds = args.rounds
    if args.peers is not None:
        sizes.labels = run_labels(args.peers)
    print_figures(run(sizes), [label for label in LABELS if label in sizes.labels])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
