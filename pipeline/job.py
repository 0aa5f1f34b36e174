"""`kbroker analyze`: read a data directory with Spark, write the Parquet tables and the HTML report.

    kbroker analyze --data-dir ./data --out ./report [--master local[*] | spark://HOST:7077]
                    [--since TIME] [--broker-log FILE]

The master is only set when --master is given; otherwise whatever Spark is configured with (spark-submit,
spark-defaults.conf, PYSPARK_SUBMIT_ARGS) wins, and with nothing configured the job runs on local[*].
On a cluster the job ships itself (shipping.py) and bakes nothing of the driver's machine into the
executors. `run()` is the job on an existing session (tests share one); `main()` owns its session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
import time
from dataclasses import dataclass, field

from . import preflight, storage

TABLES = ("offsets_latest", "lag", "commit_rate", "rebalances", "group_summary", "group_status", "partition_status",
          "lag_history", "partition_lag_history", "ownership", "outages", "topics", "errors")
BUCKETS = 120  # points of the lag-over-time series
_NICE_BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


class JobError(Exception):
    """Input the job cannot work with at all; the message is for the operator."""


@dataclass
class Progress:
    enabled: bool = True
    total: int = 0
    step: int = 0
    started: float = field(default_factory=time.monotonic)

    def __call__(self, message: str) -> None:
        self.step += 1
        if self.enabled:
            elapsed = time.monotonic() - self.started
            print(f"[analyze {self.step}/{self.total} {elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        print(f"kbroker analyze: warning: {message}", file=sys.stderr, flush=True)


@dataclass
class JobResult:
    out: str
    rows: dict[str, int]
    problems: list[str]
    report: str


def make_session(master: str | None, app_name: str = "kbroker-analyze", extra: dict[str, str] | None = None):
    """A SparkSession that honours --master, else the configured master, else local[*].

    On a local master the executors are this process's machine: they run this interpreter. On a
    cluster nothing of the driver's machine is set: the executors use the Python their workers are
    configured with (PYSPARK_PYTHON there, or spark.pyspark.python given by the user), the driver
    binds and advertises what Spark resolves (SPARK_LOCAL_IP, spark.driver.host, or the host name),
    and the package reaches them as a zip (shipping.py)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    chosen = master
    if master:
        builder = builder.master(master)
    else:
        # Launch the JVM first: spark-submit, spark-defaults.conf and PYSPARK_SUBMIT_ARGS all land in its
        # system properties, which a JVM-backed SparkConf reads.
        SparkContext._ensure_initialized()
        conf = SparkConf()
        chosen = conf.get("spark.master") if conf.contains("spark.master") else "local[*]"
        if not conf.contains("spark.master"):
            builder = builder.config("spark.master", "local[*]")
    local = preflight.is_local_master(chosen or "local[*]")
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if local:
        settings["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings.update(extra or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not local:
        from .shipping import ship

        ship(spark)
    return spark


def _since_column(since_ms: int | None):
    from pyspark.sql import functions as F

    if since_ms is None:
        return None
    return F.lit(dt.datetime.fromtimestamp(since_ms / 1000, tz=dt.timezone.utc)).cast("timestamp")


def read_broker_log(spark, path: str):
    from . import groups

    if storage.kind(str(path)) != "file":
        raise JobError(f"broker log {str(path)!r} does not exist or is not a file")
    # Lines that are not JSON (a text-format log, a stack trace) become rows of nulls and drop out.
    return spark.read.schema(groups.BROKER_LOG_SCHEMA).option("mode", "PERMISSIVE").json(storage.for_spark(str(path)))


def bucket_seconds(span_s: float, buckets: int = BUCKETS) -> int:
    """A round bucket size giving at most `buckets` points over `span_s` seconds."""
    want = max(span_s, 1) / buckets
    return next((b for b in _NICE_BUCKETS_S if b >= want), int(math.ceil(want)))


def _time_window(spark, batches, commit_rows, since_ms: int | None) -> tuple[float | None, float | None]:
    """(start, end) in epoch seconds of what the data covers (the end is the report's "now")."""
    from pyspark.sql import functions as F

    # __consumer_offsets' own batches are left out: they carry the time they were appended, which is
    # the commit time for commits but may be a rewrite's (compaction) or a tool's for others
    b = (batches.where(F.col("error").isNull() & ~F.col("topic").startswith("__"))
         .agg(F.min("base_timestamp"), F.max("max_timestamp")).first())
    c = commit_rows.agg(F.min("commit_timestamp"), F.max("commit_timestamp")).first()
    starts = [x.timestamp() for x in (b[0], c[0]) if x is not None]
    ends = [x.timestamp() for x in (b[1], c[1]) if x is not None]
    start = min(starts) if starts else None
    if since_ms is not None:
        start = since_ms / 1000
    return start, (max(ends) if ends else None)


def run(spark, data_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, since_ms: int | None = None,
        broker_log: str | os.PathLike[str] | None = None, progress: Progress | None = None,
        top_groups: int = 10) -> JobResult:
    from pyspark.sql import functions as F

    from . import analytics, groups, report, source
    from .logdir import DataDirError, check_data_dir, list_segments

    progress = progress or Progress()
    progress.total = 8 + len(TABLES)
    data_dir, out = str(data_dir), str(out)
    try:
        preflight.check_data_dir(data_dir)
        root = check_data_dir(os.path.abspath(storage.local_path(data_dir)) if storage.is_local(data_dir) else data_dir)
        segments = list_segments(root)
    except (DataDirError, preflight.PreflightError) as exc:
        raise JobError(str(exc)) from exc
    out_location = storage.for_spark(out)
    source.register(spark)
    since = _since_column(since_ms)
    total_bytes = sum(s.size for s in segments)
    progress(f"{len(segments)} segment files, {total_bytes / 1e6:.1f} MB in {root}")

    reader = spark.read.format("kbroker-log").option("path", root)
    batches = reader.option("view", "batches").load().cache()
    offsets = spark.read.format("kbroker-log").option("path", root).option("view", "consumer_offsets").load().cache()
    seg_frame = analytics.segments_frame(spark, segments)

    progress("scanning batch headers (CRC checked) of every segment")
    errors_df = analytics.errors(batches)
    problems = [row["error"] for row in errors_df.collect()]
    for problem in problems:
        progress.warn(problem)
    progress(f"decoding __consumer_offsets: {offsets.count()} records")
    history_file = storage.join(root, "rebalances.jsonl")
    events_source = "broker log"
    if broker_log:
        events = read_broker_log(spark, str(broker_log))
    elif storage.kind(history_file) == "file":
        events, events_source = read_broker_log(spark, history_file), "broker history"
    else:
        events = None

    resolved = analytics.resolve_transactions(offsets).cache()
    commit_rows = analytics.commits(resolved).cache()
    start_s, end_s = _time_window(spark, batches, commit_rows, since_ms)
    window_s = (end_s - start_s) if start_s is not None and end_s is not None else None
    bucket_s = bucket_seconds(window_s or 1)
    buckets = max(1, math.ceil((window_s or 1) / bucket_s))
    now = F.lit(dt.datetime.fromtimestamp(end_s or 0, tz=dt.timezone.utc)).cast("timestamp")
    progress(f"window: {_fmt(start_s)} to {_fmt(end_s)} ({(window_s or 0):,.0f} s), lag every {bucket_s} s")

    ends = analytics.log_end_offsets(batches, seg_frame).cache()
    latest = analytics.offsets_latest(resolved).cache()
    intervals = groups.member_intervals(offsets)
    rows: dict[str, int] = {}

    def write(name: str, frame):
        target = storage.join(out_location, name)
        frame.write.mode("overwrite").parquet(target)
        written = spark.read.parquet(target)
        rows[name] = written.count()
        progress(f"{name}: {rows[name]:,} rows -> {target}")
        return written

    t: dict = {}
    t["offsets_latest"] = write("offsets_latest", latest.orderBy("group_id", "topic", "partition"))
    t["lag"] = write("lag", analytics.lag(latest, ends))
    t["commit_rate"] = write("commit_rate", analytics.commit_rate(commit_rows, since))
    t["rebalances"] = write("rebalances", groups.rebalances(offsets, intervals, events, since, events_source))
    t["ownership"] = write("ownership", groups.ownership(offsets, t["rebalances"], intervals))
    t["outages"] = write("outages", groups.outages(offsets, t["rebalances"]))
    history = analytics.lag_history(commit_rows, batches, start_s or 0, bucket_s, buckets) if start_s is not None \
        else spark.createDataFrame([], "group_id string, topic string, partition int, time timestamp, "
                                       "committed_offset long, log_end_offset long, lag long")
    t["partition_lag_history"] = write("partition_lag_history", history)
    t["lag_history"] = write("lag_history", analytics.group_lag_history(t["partition_lag_history"]))
    t["partition_status"] = write("partition_status", groups.partition_status(
        analytics.commit_lag(commit_rows, batches), t["lag"], now))
    summary = groups.group_summary(t["rebalances"], t["lag"], t["commit_rate"], t["partition_status"],
                                   analytics.transactions(resolved), t["outages"], groups.deletions(offsets))
    t["group_summary"] = write("group_summary", summary)
    t["group_status"] = write("group_status", t["group_summary"].select("group_id", "status", "status_reason"))
    t["topics"] = write("topics", analytics.topics(batches, seg_frame, ends, since, window_s))
    t["errors"] = write("errors", errors_df)

    meta = {"data directory": root, "segments": f"{len(segments):,} ({total_bytes:,} bytes)",
            "window": f"{_fmt(start_s)} to {_fmt(end_s)} UTC" + ("" if since_ms is None else " (--since)"),
            "rebalance reasons": str(broker_log) if broker_log else
            f"{history_file} (the broker's history)" if events is not None else
            "derived from member lists (no --broker-log, no rebalances.jsonl)",
            "spark master": spark.sparkContext.master}
    data = report.collect(t, top_groups=top_groups, bucket_s=bucket_s, window=(start_s, end_s))
    html_path = report.write_report(out, data, problems, meta)
    progress(f"report: {html_path}")
    for frame in (batches, offsets, ends, latest, resolved, commit_rows):
        frame.unpersist()
    return JobResult(out, rows, problems, html_path)


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def main(args: argparse.Namespace) -> int:
    """Entry point of `kbroker analyze`; returns the process exit code. Every bad argument is one line
    and exit code 2, found before Spark starts."""
    from .source import parse_time

    data_dir = getattr(args, "data_dir", None) or "./data"
    out = getattr(args, "out", None) or "./report"
    master = getattr(args, "master", None)
    broker_log = getattr(args, "broker_log", None)
    quiet = bool(getattr(args, "quiet", False))
    try:
        since_ms = parse_time(getattr(args, "since", None))
    except ValueError as exc:
        return _refuse(f"--since: {exc}")
    try:
        preflight.check_master(master)
        preflight.check_data_dir(data_dir)
        if broker_log and storage.kind(broker_log) != "file":
            raise preflight.PreflightError(f"broker log {broker_log!r} does not exist or is not a file")
        preflight.check_output(out)
        preflight.check_java()
        preflight.check_spark_python(master)
    except (preflight.PreflightError, OSError) as exc:
        return _refuse(str(exc))
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return _refuse("pyspark is not installed: pip install 'kbroker[pipeline]'")
    progress = Progress(enabled=not quiet)
    spark = make_session(master)
    try:
        result = run(spark, data_dir, out, since_ms=since_ms, broker_log=broker_log, progress=progress)
    except JobError as exc:
        return _refuse(str(exc))
    finally:
        spark.stop()
    summary = ", ".join(f"{name} {count}" for name, count in result.rows.items())
    print(f"wrote {result.out} ({summary}); open {result.report}")
    if result.problems:
        print(f"kbroker analyze: {len(result.problems)} problem(s) in the input were skipped (listed above and "
              f"in {storage.join(result.out, 'errors')})", file=sys.stderr)
    return 0


def _refuse(message: str) -> int:
    print(f"kbroker analyze: {message}", file=sys.stderr)
    return 2


def _argparser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kbroker.pipeline.job", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--out", default="./report")
    parser.add_argument("--master", default=None)
    parser.add_argument("--since", default=None)
    parser.add_argument("--broker-log", default=None)
    parser.add_argument("--quiet", action="store_true")
    return parser


if __name__ == "__main__":
    raise SystemExit(main(_argparser().parse_args()))
