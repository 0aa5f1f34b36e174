"""`make bench`: every benchmark in turn, each figure beside the peer's measured in the same run.

    python -m bench [--quick] [--skip NAME,...] [--peers tansu,kafka]

In order: the load generator's ceiling (bench/loadgen.py against the canned-answer responder
bench/echo.py), codec (kbroker's codec beside kio), then kbroker beside its peers, Tansu and Apache
Kafka 4.4 (issue 37; at its default flush and with log.flush.interval.messages=1): data_path (issue 3),
groups (issue 4), consumer_groups (issue 12, KIP-848), streams_groups (issue 46: three Kafka Streams
instances to a settled assignment), share_groups (issue 42: records/s through ShareFetch and
ShareAcknowledge, 1 and 4 members), then transactions (issue 13, no peer), a cluster over PostgreSQL
(issue 44: 1 and 3 nodes beside the local log, 1 node reading its log back from the database, and the
failover time; bench/postgres_cluster.py), idle
connections (issue 17), stalls (issue 10), hostile produce (one costly request against the other
clients), security (issue 14), pipeline (issue 5); then the cost
curves (tables, and PNGs under bench/results/), the summary table, and issue 17's targets, each
checked against Tansu measured in the same run. Every broker runs pinned to one core and the load
generator (this process) to the other (bench/cores.py). `--quick` uses small sizes (a few minutes;
the smoke test runs it) and leaves Kafka out unless `--peers` names it. Each benchmark has its own
`python -m bench.<name> --help` with size flags.
"""

from __future__ import annotations

import argparse
import sys
import time

from kbroker.bench import codec, consumer_groups, data_path, groups, share_groups, streams_groups, transactions
from kbroker.bench.loadgen import Rate
from kbroker.bench.report import (FULL_PEERS, QUICK_PEERS, machine_note, peers_arg, run_labels,
                                  summary_table)


def generator_ceiling(sizes: groups.Sizes) -> dict[str, Rate]:
    """The request-rate generator against the echo responder, with the same connections, window and
    seconds as the group rates: {api: Rate}. A broker figure far below it is the broker's own."""
    from kbroker.bench import loadgen
    from kbroker.bench.group_load import GroupMember, commit_frame, heartbeat_frame

    members = [GroupMember(f"bench-ceiling-{i}", f"member-{i}", 1, 0) for i in range(sizes.connections)]
    out: dict[str, Rate] = {}
    for api, key, version, frames in (
            ("Heartbeat v4", 12, 4, [[heartbeat_frame(m)] for m in members]),
            ("OffsetCommit v8", 8, 8, [[commit_frame(m, "bench-topic", o) for o in range(1, 257)] for m in members])):
        try:
            rate = loadgen.ceiling(frames, api_key=key, version=version, window=sizes.window, seconds=sizes.seconds)
        except Exception as e:  # noqa: BLE001 - printed, the run goes on
            print(f"  {api}: n/a ({type(e).__name__}: {e})")
            continue
        out[api] = rate
        print(f"  {api}: {rate.per_s:,.0f} requests/s over {rate.connections} connections x {rate.window} in "
              f"flight, {rate.seconds:.1f} s; {rate.cpu}; the generator spends {rate.generator_us_per_request:.2f} us "
              f"of CPU per request (= {1e6 / max(rate.generator_us_per_request, 1e-9):,.0f}/s on a core of its "
              f"own), the echo responder {rate.broker_us_per_request:.2f} us")
    return out


def main(argv: list[str] | None = None) -> int:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")  # the offline replay writer's info events would clutter the report
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, about 2 minutes in all")
    parser.add_argument("--skip", default="",
                        help="comma-separated benchmarks to leave out: "
                             "ceiling,codec,data_path,groups,consumer_groups,streams_groups,share_groups,connections,"
                             "transactions,postgres,"
                             "stalls,"
                             "hostile,security,pipeline")
    parser.add_argument("--peers", type=peers_arg, default=None,
                        help=f"comma-separated peers to run beside kbroker (default {','.join(FULL_PEERS)}; "
                             f"with --quick {','.join(QUICK_PEERS)}: Kafka's JVM takes 10-30 s to start here, and "
                             "a run starts it a dozen times)")
    parser.add_argument("--results", default=None,
                        help="folder for the cost curves' PNGs (default bench/results/, which `make bench` rewrites)")
    args = parser.parse_args(argv)
    from kbroker.bench import cores

    cores.pin_generator()
    cores.raise_fd_limit()
    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    started = time.monotonic()
    from kbroker.bench.brokers import peers_line

    peers = args.peers if args.peers is not None else QUICK_PEERS if args.quick else FULL_PEERS
    labels = run_labels(peers)
    print(f"kbroker benchmarks{' (--quick sizes)' if args.quick else ''}; peers: {peers_line(labels)}")
    if "kafka" not in peers:
        print("Apache Kafka is left out of this run" + (" at --quick sizes (its JVM takes 10-30 s to start here, "
              "and a run starts it a dozen times); --peers tansu,kafka adds it" if args.quick else ""))
    print(f"machine: {machine_note()}; python {sys.version.split()[0]}\n")

    ceiling_rates: dict[str, Rate] = {}
    if "ceiling" not in skip:
        print("=== load generator ceiling (bench/loadgen.py against bench/echo.py on the broker core) ===")
        ceiling_rates = generator_ceiling(groups.Sizes.quick() if args.quick else groups.Sizes())

    codec_rows: list[dict] = []
    if "codec" not in skip:
        print("=== codec ===")
        codec_rows = codec.report(0.2 if args.quick else 1.0)

    # The broker benchmarks share one shape: sizes, a run beside Tansu, its figures, the summary.
    broker_benchmarks = (
        ("data_path", "data_path (issue 3)", data_path),
        ("groups", "groups (issue 4)", groups),
        ("consumer_groups", "consumer groups, new protocol (KIP-848, issue 12)", consumer_groups),
        ("streams_groups", "streams groups (KIP-1071, issue 46)", streams_groups),
        ("share_groups", "share groups (KIP-932, issue 42)", share_groups),
        ("transactions", "transactions (issue 13)", transactions),
    )
    figures = []
    curves = []
    for name, title, module in broker_benchmarks:
        if name in skip:
            continue
        print(f"\n=== {title} ===")
        sizes = module.Sizes.quick() if args.quick else module.Sizes()
        if hasattr(sizes, "labels"):  # transactions have no peer
            sizes.labels = run_labels(peers)
        section = time.monotonic()
        figs = module.run(sizes)
        print(f"  ({name} took {time.monotonic() - section:.0f} s)")
        module.print_figures(figs, getattr(sizes, "labels", module.LABELS))
        figures += figs
        if hasattr(module, "curves"):
            curves += module.curves(figs, sizes)

    if "postgres" not in skip:
        # issue 44: 1 and 3 nodes over one PostgreSQL beside the local log, and the failover time
        print("\n=== a cluster over PostgreSQL (issue 44) ===")
        from kbroker.bench import postgres_cluster

        pg_sizes = postgres_cluster.Sizes.quick() if args.quick else postgres_cluster.Sizes()
        try:
            postgres_cluster.report(postgres_cluster.run(pg_sizes), pg_sizes)
        except Exception as e:  # noqa: BLE001 - printed, the run goes on
            print(f"  n/a ({type(e).__name__}: {e})")

    if "connections" not in skip:
        print("\n=== idle connections (issue 17) ===")
        from kbroker.bench import connections

        curves.append(connections.run(connections.Sizes.quick() if args.quick else connections.Sizes()))

    if "stalls" not in skip:
        # issue 10: the longest event-loop stall while compacting and while replaying __consumer_offsets
        print("\n=== stalls (issue 10) ===")
        from kbroker.bench import stalls

        stalls.report(20_000 if args.quick else 200_000)

    if "hostile" not in skip:
        # the same question for a client's request: how long one costly Produce holds the others
        print("\n=== hostile produce: batches costly to check ===")
        from kbroker.bench import hostile_produce

        hostile_produce.report(args.quick)

    security_rows: dict = {}
    if "security" not in skip:
        print("\n=== security (issue 14): SASL_SSL beside PLAINTEXT ===")
        from kbroker.bench import security

        security_rows = security.report(30_000 if args.quick else 200_000, 1024, 1 if args.quick else 3)

    if "pipeline" not in skip:
        # issue 5: records decoded per second by the kbroker-log Spark source, local[1] and local[2]
        print("\n=== pipeline (issue 5) ===")
        from kbroker.pipeline import bench as pipeline_bench

        pipeline_bench.main(["--records", "1000000" if args.quick else "10000000", "--cores", "1,2"])

    if curves:
        from pathlib import Path

        from kbroker.bench.curves import RESULTS
        from kbroker.bench.curves import report as curve_report

        folder = Path(args.results) if args.results else RESULTS
        print(f"\n=== cost curves (issue 17): tables, and plots under {folder} ===")
        curve_report(curves, folder)

    print("\n=== summary ===")
    if codec_rows:
        print("codec, decode+encode per second on one core (peer: kio); ratio = kbroker / kio")
        width = max(len(r["message"]) for r in codec_rows)
        for r in codec_rows:
            print(f"  {r['message']:{width}}  kbroker {r['kbroker_per_s']:>10,.0f}/s  kio {r['kio_per_s']:>10,.0f}/s"
                  f"  ratio {r['ratio']:.2f}x   (decode only: ratio {r['decode_ratio']:.2f}x)")
        print()
    if figures:
        print("brokers (peers: Tansu, memory storage; Apache Kafka 4.4 at its default flush and with "
              "flush.messages=1); a/b = column a over column b, e.g. always/kafka = kbroker --flush always / Kafka "
              "at its default flush; each figure's how-line is above")
        print(summary_table(figures, labels))
    if figures:
        from kbroker.bench.targets import table

        print("\ntargets of issue 17, each against Tansu measured in this run (Kafka's figures beside them: "
              "information, not targets)")
        print(table(figures))
    for api, rate in ceiling_rates.items():
        top = max((v for f in figures if f.unit == "requests/s" and f.name.startswith(api)
                   for v in f.values.values() if isinstance(v, (int, float))), default=0.0)
        print(f"load generator ceiling, {api}: {rate.per_s:,.0f} requests/s against the echo responder "
              f"({rate.generator_us_per_request:.2f} us of generator CPU per request); the highest {api} rate "
              f"of any broker above, {top:,.0f}/s, is {top / rate.per_s:.0%} of it")
    if security_rows:
        print("\nsecurity, one kbroker: " + ", ".join(
            f"{p} produce {r['produce_mb_s']:.1f} MB/s consume {r['consume_mb_s']:.1f} MB/s"
            for p, r in security_rows.items()))
    print(f"\nall benchmarks took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
