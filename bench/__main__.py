"""`make bench`: every benchmark in turn, each figure beside the peer's measured in the same run.

    python -m bench [--quick]

codec (kbroker's codec beside kio), data_path (issue 3), groups (issue 4) and consumer_groups (issue
12, the KIP-848 protocol), kbroker beside Tansu, then transactions (issue 13: transactions per second,
read_committed beside read_uncommitted; no peer), then stalls (issue 10: the longest event-loop stall
during compaction and replay), then pipeline (issue 5, the Spark data source's decode rate on local[1]
and local[2]), then one
summary table. `--quick` uses small sizes (about 2 minutes; the smoke test runs it). Each
benchmark has its own `python -m bench.<name> --help` with size flags.
"""

from __future__ import annotations

import argparse
import sys
import time

from kbroker.bench import codec, consumer_groups, data_path, groups, transactions
from kbroker.bench.report import machine_note, summary_table


def main(argv: list[str] | None = None) -> int:
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")  # the offline replay writer's info events would clutter the report
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, about 2 minutes in all")
    parser.add_argument("--skip", default="",
                        help="comma-separated benchmarks to leave out: "
                             "codec,data_path,groups,consumer_groups,transactions,stalls,security,pipeline")
    args = parser.parse_args(argv)
    from kbroker.bench import cores

    cores.pin_generator()
    cores.raise_fd_limit()
    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    started = time.monotonic()
    from kbroker.bench.brokers import tansu_version

    print(f"kbroker benchmarks{' (--quick sizes)' if args.quick else ''}; peer: {tansu_version()}, memory storage")
    print(f"machine: {machine_note()}; python {sys.version.split()[0]}\n")

    codec_rows: list[dict] = []
    if "codec" not in skip:
        print("=== codec ===")
        codec_rows = codec.report(0.2 if args.quick else 1.0)

    # The broker benchmarks share one shape: sizes, a run beside Tansu, its figures, the summary.
    broker_benchmarks = (
        ("data_path", "data_path (issue 3)", data_path),
        ("groups", "groups (issue 4)", groups),
        ("consumer_groups", "consumer groups, new protocol (KIP-848, issue 12)", consumer_groups),
        ("transactions", "transactions (issue 13)", transactions),
    )
    figures = []
    for name, title, module in broker_benchmarks:
        if name in skip:
            continue
        print(f"\n=== {title} ===")
        figs = module.run(module.Sizes.quick() if args.quick else module.Sizes())
        module.print_figures(figs, module.LABELS, module.PEER)
        figures += figs

    if "stalls" not in skip:
        # issue 10: the longest event-loop stall while compacting and while replaying __consumer_offsets
        print("\n=== stalls (issue 10) ===")
        from kbroker.bench import stalls

        stalls.report(20_000 if args.quick else 200_000)

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

    print("\n=== summary ===")
    if codec_rows:
        print("codec, decode+encode per second on one core (peer: kio); ratio = kbroker / kio")
        width = max(len(r["message"]) for r in codec_rows)
        for r in codec_rows:
            print(f"  {r['message']:{width}}  kbroker {r['kbroker_per_s']:>10,.0f}/s  kio {r['kio_per_s']:>10,.0f}/s"
                  f"  ratio {r['ratio']:.2f}x   (decode only: ratio {r['decode_ratio']:.2f}x)")
        print()
    if figures:
        print("brokers (peer: Tansu, memory storage); ratio = kbroker / Tansu; each figure's how-line is above")
        print(summary_table(figures, groups.LABELS, groups.PEER))
    if security_rows:
        print("\nsecurity, one kbroker: " + ", ".join(
            f"{p} produce {r['produce_mb_s']:.1f} MB/s consume {r['consume_mb_s']:.1f} MB/s"
            for p, r in security_rows.items()))
    print(f"\nall benchmarks took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
