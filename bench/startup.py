"""Empty start-up and RSS of kbroker alone, for before/after comparisons of one change.

    python -m bench.startup [--runs 7] [--rounds 1] [--broker-path DIR] [--partitions N]

Each round starts `kbroker serve` `--runs` times on an empty data directory, timed from process start
to the first ApiVersions answer (`groups.empty_startup`, the figure `make bench` prints), alternating
with the start-up floor (`groups.startup_floor`: Python importing asyncio, uvloop and structlog), and reads
RSS once with nothing stored (`brokers.settle_rss`). The broker is this checkout's, or with
`--broker-path DIR` the `kbroker` found in DIR (a directory holding a `kbroker` link to a checkout of
another commit, e.g. a `git worktree`): an A/B of two commits alternates runs with and without it.
With `--partitions N` it also times restarts on a data directory holding a topic of N partitions
(made once, by the broker under test, and reopened after a clean stop each time): a restart opens
every partition before its listeners.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kbroker.bench import brokers
from kbroker.bench.group_load import prepare_topic
from kbroker.bench.groups import STARTUP_POLL_S, empty_startup, startup_floor
from kbroker.bench.report import KB_ALWAYS


def measure(runs: int, settle_s: float) -> tuple[float, float, float, float]:
    """(median start-up s, fastest start-up s, RSS MiB with nothing stored, median start-up floor s);
    the broker's starts and the floor's alternate, so both see the same machine."""
    times, floors = [], []
    for _ in range(runs):
        times.append(empty_startup(KB_ALWAYS))
        floors.append(startup_floor())
    handle = brokers.start_kbroker(flush="always")
    try:
        rss = brokers.settle_rss(handle, settle_s)
    finally:
        handle.stop()
    return statistics.median(times), min(times), rss / 2 ** 20, statistics.median(floors)


def restart(data: Path, timeout: float = 120.0) -> float:
    """Seconds from process start to the first ApiVersions answer on `data`, then a clean stop."""
    started = time.perf_counter()
    handle = brokers.start_kbroker(flush="always", data_dir=data, wait=False)
    try:
        brokers.wait_answering(handle, timeout, STARTUP_POLL_S)
        return time.perf_counter() - started
    finally:
        handle.stop()


def with_partitions(partitions: int, runs: int) -> tuple[float, float]:
    """(median, fastest) restart on a data directory holding one topic of `partitions` partitions."""
    root = Path(tempfile.mkdtemp(prefix="kbroker-bench-restart-"))
    try:
        handle = brokers.start_kbroker(flush="always", data_dir=root / "data")
        try:
            prepare_topic(handle.bootstrap, partitions)
        finally:
            handle.stop()
        times = [restart(root / "data") for _ in range(runs)]
        return statistics.median(times), min(times)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="starts per round (default 7)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before RSS is read (default 2)")
    parser.add_argument("--broker-path", metavar="DIR", help="PYTHONPATH of the broker processes")
    parser.add_argument("--partitions", type=int, default=0, help="also time restarts with a topic of N partitions")
    args = parser.parse_args(argv)
    if args.broker_path:
        os.environ["PYTHONPATH"] = args.broker_path  # the brokers started from here inherit it
    for _ in range(args.rounds):
        median, fastest, rss, floor = measure(args.runs, args.settle)
        print(f"empty start-up median {median:.3f} s (fastest {fastest:.3f}) over {args.runs} starts; "
              f"RSS with nothing stored {rss:.1f} MiB; floor (Python importing asyncio, uvloop and structlog) "
              f"median {floor:.3f} s", flush=True)
        if args.partitions:
            median, fastest = with_partitions(args.partitions, args.runs)
            print(f"restart with a topic of {args.partitions:,} partitions: median {median:.3f} s "
                  f"(fastest {fastest:.3f}) over {args.runs} starts", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
