"""Empty start-up and RSS of kbroker alone, for before/after comparisons of one change.

    python -m bench.startup [--runs 7] [--rounds 1] [--broker-path DIR]

Each round starts `kbroker serve` `--runs` times on an empty data directory, timed from process start
to the first ApiVersions answer (`groups.empty_startup`, the figure `make bench` prints), and reads
RSS once with nothing stored (`brokers.settle_rss`). The broker is this checkout's, or with
`--broker-path DIR` the `kbroker` found in DIR (a directory holding a `kbroker` link to a checkout of
another commit, e.g. a `git worktree`): an A/B of two commits alternates runs with and without it.
"""

from __future__ import annotations

import argparse
import os
import statistics

from kbroker.bench import brokers
from kbroker.bench.groups import empty_startup
from kbroker.bench.report import KB_ALWAYS


def measure(runs: int, settle_s: float) -> tuple[float, float, float]:
    """(median start-up s, fastest start-up s, RSS MiB with nothing stored)."""
    times = [empty_startup(KB_ALWAYS) for _ in range(runs)]
    handle = brokers.start_kbroker(flush="always")
    try:
        rss = brokers.settle_rss(handle, settle_s)
    finally:
        handle.stop()
    return statistics.median(times), min(times), rss / 2 ** 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="starts per round (default 7)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before RSS is read (default 2)")
    parser.add_argument("--broker-path", metavar="DIR", help="PYTHONPATH of the broker processes")
    args = parser.parse_args(argv)
    if args.broker_path:
        os.environ["PYTHONPATH"] = args.broker_path  # the brokers started from here inherit it
    for _ in range(args.rounds):
        median, fastest, rss = measure(args.runs, args.settle)
        print(f"empty start-up median {median:.3f} s (fastest {fastest:.3f}) over {args.runs} starts; "
              f"RSS with nothing stored {rss:.1f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
