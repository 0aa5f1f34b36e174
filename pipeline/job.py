"""`kbroker analyze`: read a data directory with Spark, write the Parquet tables and the HTML report.

    kbroker analyze --data-dir ./data --out ./report [--master local[*] | spark://HOST:7077]
                    [--since TIME] [--broker-log FILE]

The master is only set when --master is given; otherwise whatever Spark is configured with (spark-submit,
spark-defaults.conf, PYSPARK_SUBMIT_ARGS) wins, and with nothing configured the job runs on local[*].
`run()` is the job on an existing session (tests share one); `main()` owns its session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TABLES = ("offsets_latest", "lag", "commit_rate", "rebalances", "group_summary", "topics", "errors")


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
    out: Path
    rows: dict[str, int]
    problems: list[str]
    report: Path


def make_session(master: str | None, app_name: str = "kbroker-analyze", extra: dict[str, str] | None = None):
    """A SparkSession that honours --master, else the configured master, else local[*]."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    else:
        # Launch the JVM first: spark-submit, spark-defaults.conf and PYSPARK_SUBMIT_ARGS all land in its
        # system properties, which a JVM-backed SparkConf reads.
        SparkContext._ensure_initialized()
        if not SparkConf().contains("spark.master"):
            builder = builder.config("spark.master", "local[*]")
    settings = {
        "spark.pyspark.python": os.environ["PYSPARK_PYTHON"],
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    settings.update(extra or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _since_column(since_ms: int | None):
    from pyspark.sql import functions as F

    if since_ms is None:
        return None
    return F.lit(dt.datetime.fromtimestamp(since_ms / 1000, tz=dt.timezone.utc)).cast("timestamp")


def read_broker_log(spark, path: str | os.PathLike[str]):
    from . import analytics

    if not Path(path).is_file():
        raise JobError(f"broker log {str(path)!r} does not exist or is not a file")
    # Lines that are not JSON (a text-format log, a stack trace) become rows of nulls and drop out.
    return spark.read.schema(analytics.BROKER_LOG_SCHEMA).option("mode", "PERMISSIVE").json(str(path))


def run(spark, data_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, since_ms: int | None = None,
        broker_log: str | os.PathLike[str] | None = None, progress: Progress | None = None) -> JobResult:
    from pyspark.sql import functions as F

    from . import analytics, report, source
    from .logdir import DataDirError, check_data_dir, list_segments

    progress = progress or Progress()
    progress.total = 11
    try:
        root = check_data_dir(data_dir).resolve()
        segments = list_segments(root)
    except DataDirError as exc:
        raise JobError(str(exc)) from exc
    if not (root / "topics").is_dir() and not segments:
        raise JobError(f"{str(root)!r} is not a kbroker data directory (no topics/ folder, no segment files)")
    out_dir = Path(out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    source.register(spark)
    since = _since_column(since_ms)
    total_bytes = sum(s.size for s in segments)
    progress(f"{len(segments)} segment files, {total_bytes / 1e6:.1f} MB in {root}")

    reader = spark.read.format("kbroker-log").option("path", str(root))
    batches = reader.option("view", "batches").load().cache()
    offsets = spark.read.format("kbroker-log").option("path", str(root)).option("view", "consumer_offsets").load()
    offsets = offsets.cache()
    seg_frame = analytics.segments_frame(spark, segments)

    progress("scanning batch headers (CRC checked) of every segment")
    errors_df = analytics.errors(batches)
    problems = [row["error"] for row in errors_df.collect()]
    for problem in problems:
        progress.warn(problem)
    progress(f"decoding __consumer_offsets: {offsets.count()} records")
    # Reasons: the log file when given, else the broker's own rebalance history file in the data dir.
    history_file = root / "rebalances.jsonl"
    events_source = "broker log"
    if broker_log:
        events = read_broker_log(spark, broker_log)
    elif history_file.is_file():
        events, events_source = read_broker_log(spark, history_file), "broker history"
    else:
        events = None

    ends = analytics.log_end_offsets(batches, seg_frame).cache()
    latest = analytics.offsets_latest(offsets).cache()
    tables = {
        "offsets_latest": latest.orderBy("group_id", "topic", "partition"),
        "lag": analytics.lag(latest, ends),
        "commit_rate": analytics.commit_rate(offsets, since),
        "rebalances": analytics.rebalances(offsets, events, since, events_source),
        "topics": analytics.topics(batches, seg_frame, ends, since),
        "errors": errors_df,
    }
    rows: dict[str, int] = {}
    # the summary reads the three tables it sums up once they are written
    for name in ("lag", "commit_rate", "rebalances"):
        tables[name].write.mode("overwrite").parquet(str(out_dir / name))
    written = {name: spark.read.parquet(str(out_dir / name)) for name in ("lag", "commit_rate", "rebalances")}
    tables["group_summary"] = analytics.group_summary(written["rebalances"], written["lag"], written["commit_rate"])
    for name, frame in tables.items():
        if name in written:
            rows[name] = written[name].count()
            progress(f"{name}: {rows[name]} rows -> {out_dir / name}")
            continue
        target = out_dir / name
        frame.write.mode("overwrite").parquet(str(target))
        rows[name] = spark.read.parquet(str(target)).count()
        progress(f"{name}: {rows[name]} rows -> {target}")

    small = {name: spark.read.parquet(str(out_dir / name))
             for name in ("lag", "commit_rate", "rebalances", "topics", "group_summary")}
    pandas_tables = {
        "group_summary": small["group_summary"].limit(100_000).toPandas(),
        "lag": small["lag"].limit(100_000).toPandas(),
        "commit_rate": small["commit_rate"].limit(100_000).toPandas(),
        "rebalances": small["rebalances"].drop("members").limit(100_000)
        .withColumn("members_joined", F.array_join("members_joined", " "))
        .withColumn("members_left", F.array_join("members_left", " ")).toPandas(),
        # the HTML leaves out idle internal partitions (49 of 50 __consumer_offsets partitions are often empty)
        "topics": small["topics"].where(~F.col("topic").startswith("__") | (F.col("messages") > 0))
        .withColumn("compression", F.array_join("compression", ",")).limit(100_000).toPandas(),
    }
    meta = {"data directory": str(root), "segments": f"{len(segments)} ({total_bytes:,} bytes)",
            "since": "everything" if since_ms is None else
            f"{dt.datetime.fromtimestamp(since_ms / 1000, tz=dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
            "rebalance reasons": str(broker_log) if broker_log else
            f"{history_file} (the broker's history)" if history_file.is_file() else
            "derived from member lists (no --broker-log, no rebalances.jsonl)",
            "spark master": spark.sparkContext.master}
    html_path = report.write_report(out_dir, pandas_tables, problems, meta)
    progress(f"report: {html_path}")
    for frame in (batches, offsets, ends, latest):
        frame.unpersist()
    return JobResult(out_dir, rows, problems, html_path)


def main(args: argparse.Namespace) -> int:
    """Entry point of `kbroker analyze`; returns the process exit code."""
    from .source import parse_time

    data_dir = getattr(args, "data_dir", None) or "./data"
    out = getattr(args, "out", None) or "./report"
    master = getattr(args, "master", None)
    broker_log = getattr(args, "broker_log", None)
    quiet = bool(getattr(args, "quiet", False))
    try:
        since_ms = parse_time(getattr(args, "since", None))
    except ValueError as exc:
        print(f"kbroker analyze: --since: {exc}", file=sys.stderr)
        return 2
    if not Path(data_dir).is_dir():
        print(f"kbroker analyze: data directory {data_dir!r} does not exist or is not a directory", file=sys.stderr)
        return 2
    if broker_log and not Path(broker_log).is_file():
        print(f"kbroker analyze: broker log {broker_log!r} does not exist or is not a file", file=sys.stderr)
        return 2
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("kbroker analyze: pyspark is not installed: pip install 'kbroker[pipeline]'", file=sys.stderr)
        return 2
    progress = Progress(enabled=not quiet)
    progress.total = 11
    spark = make_session(master)
    try:
        result = run(spark, data_dir, out, since_ms=since_ms, broker_log=broker_log, progress=progress)
    except JobError as exc:
        print(f"kbroker analyze: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    summary = ", ".join(f"{name} {count}" for name, count in result.rows.items())
    print(f"wrote {result.out} ({summary}); open {result.report}")
    if result.problems:
        print(f"kbroker analyze: {len(result.problems)} problem(s) in the input were skipped (listed above and "
              f"in {result.out / 'errors'})", file=sys.stderr)
    return 0


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

