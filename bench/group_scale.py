"""Memory and start-up by number of groups (issue 17's cost curve): 1,000 / 10,000 / 100,000 groups.

One broker is filled step by step: each group gets one simple-consumer OffsetCommit v8 (generation -1,
empty member id, one partition; bench/group_load.py's commit_many_groups), and at each count the
broker's RSS is read after a settle. kbroker is then stopped and started again on the same data
directory: the time from process start to its first ApiVersions answer (start-up with that many groups
stored) and to its `offsets_loaded` event (the replay done), and the RSS of the restarted broker; the
fill goes on against the restarted one. Tansu keeps offsets in memory, so it has RSS figures but no
start-up with groups stored.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from kbroker.bench import brokers
from kbroker.bench.group_load import BenchError, commit_many_groups


def _restart(handle: brokers.BrokerHandle, data: Path, timeout: float = 300.0) -> tuple[brokers.BrokerHandle, dict]:
    """Stop kbroker, start it on the same data dir; (new handle, {startup_s, loaded_s})."""
    handle.keep_workdir = True
    handle.stop()
    handle.keep_workdir = False   # the caller's final stop() of the first handle removes the data
    started = time.perf_counter()
    new = brokers.start_kbroker(flush="always", data_dir=data, wait=False)
    out: dict = {}
    try:
        deadline = started + timeout
        brokers.wait_answering(new, timeout, poll_s=0.005)
        out["startup_s"] = time.perf_counter() - started
        while not new.log_events("offsets_loaded"):
            if time.perf_counter() > deadline:
                raise BenchError(f"no offsets_loaded event within {timeout:.0f}s of a restart")
            time.sleep(0.01)
        out["loaded_s"] = time.perf_counter() - started
    except BaseException:
        new.stop()
        raise
    return new, out


def fill(handle: brokers.BrokerHandle, counts: list[int], topic: str, settle_s: float,
         verbose: bool = True) -> dict[int, dict]:
    """{count: {"rss": bytes, and for kbroker "startup_s", "loaded_s", "rss_restarted"}}; the handle given
    is stopped by the caller, any restarted one here."""
    prefix = f"bench-scale-{uuid.uuid4().hex[:6]}"
    done = 0
    out: dict[int, dict] = {}
    current = handle
    try:
        for n in sorted(counts):
            if verbose:
                print(f"    {n:,} groups with committed offsets ...", flush=True)
            ok = asyncio.run(commit_many_groups(current.bootstrap, n - done, topic, prefix=prefix, first=done))
            if ok != n - done:
                raise BenchError(f"{ok} of {n - done} commits answered")
            done = n
            row = out[n] = {"rss": brokers.settle_rss(current, settle_s)}
            if current.name == "kbroker":
                restarted, times = _restart(current, handle.workdir / "data")
                if current is not handle:
                    current.stop()
                current = restarted
                row.update(times)
                row["rss_restarted"] = brokers.settle_rss(current, settle_s)
    finally:
        if current is not handle:
            current.stop()
    return out
