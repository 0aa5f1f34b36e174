"""Time the whole job and read every executor's peak memory from Spark's event log.

    python -m kbroker.pipeline.timing --data-dir DIR [--master local[2] | spark://HOST:PORT] [--conf k=v ...]

Runs `kbroker analyze` on its own session (session start excluded from the job's time, printed apart)
with the event log on (spark.eventLog.logStageExecutorMetrics, process-tree metrics), then reads the
log's peak executor metrics: JVM heap, the executor JVM's RSS and its Python workers' RSS.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile
import time


def peaks(event_dir: str) -> dict[str, dict[str, int]]:
    """executor id -> the peak of each memory metric over the application (bytes)."""
    out: dict[str, dict[str, int]] = {}
    for path in glob.glob(os.path.join(event_dir, "**", "*"), recursive=True):
        if os.path.isdir(path) or os.path.basename(path).startswith("appstatus"):
            continue
        for line in _lines(path):
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerStageExecutorMetrics":
                executor, metrics = event["Executor ID"], event["Executor Metrics"]
            elif kind == "SparkListenerExecutorMetricsUpdate" and event.get("Executor Metrics Updated"):
                executor = event["Executor ID"]
                metrics = event["Executor Metrics Updated"][0].get("Executor Metrics", {})
            else:
                continue
            mine = out.setdefault(executor, {})
            for name in ("JVMHeapMemory", "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory"):
                if name in metrics:
                    mine[name] = max(mine.get(name, 0), int(metrics[name]))
    return out


def _lines(path: str) -> list[str]:
    """An event log file's lines (Spark 4 writes rolling logs, zstd-compressed by default)."""
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".zstd"):
        import io

        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    return raw.decode("utf-8").splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.pipeline.timing", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", default=None)
    parser.add_argument("--conf", action="append", default=[], help="k=v, a Spark setting (repeatable)")
    args = parser.parse_args(argv)
    from .job import Progress, make_session, run

    events = tempfile.mkdtemp(prefix="kbroker-events-")
    extra = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events,
             "spark.eventLog.logStageExecutorMetrics": "true", "spark.executor.processTreeMetrics.enabled": "true",
             "spark.ui.showConsoleProgress": "false"}
    extra.update(dict(c.split("=", 1) for c in args.conf))
    started = time.perf_counter()
    spark = make_session(args.master, "kbroker-analyze-timing", extra=extra)
    session_s = time.perf_counter() - started
    out = args.out or tempfile.mkdtemp(prefix="kbroker-timing-report-")
    try:
        started = time.perf_counter()
        result = run(spark, args.data_dir, out, progress=Progress(enabled=False))
        job_s = time.perf_counter() - started
    finally:
        spark.stop()
    print(f"master {args.master}: session {session_s:.1f} s, job {job_s:.1f} s "
          f"({', '.join(f'{k} {v:,}' for k, v in result.rows.items() if k in ('offsets_latest', 'rebalances', 'group_summary'))}); "
          f"load average {os.getloadavg()[0]:.1f}")
    for executor, metrics in sorted(peaks(events).items()):
        shown = ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in sorted(metrics.items()))
        print(f"  executor {executor}: peak {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
