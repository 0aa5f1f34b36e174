"""The offset and topic tables as Spark DataFrame transformations over the data source views.

Inputs: `batches` (the batches view of every topic), `offsets` (the consumer_offsets view) and a small
`segments` frame listed on the driver (so empty partitions still have a log end offset). Nothing here
collects to the driver. The group tables (generations, ownership, outages, status) are in groups.py.

Committed offsets are read as Kafka's own loader reads `__consumer_offsets`
(OffsetMetadataManager.replay and replayEndTransactionMarker): a plain OffsetCommit record counts where
it stands; a transactional one counts only if a COMMIT marker of its producer follows it in the same log
partition, and is dropped by an ABORT marker or while no marker has come (an open transaction, which a
read_committed reader does not see). A key's value is then the counted record with the highest log
offset, unless a tombstone is newer: Kafka's replay keeps, on a commit marker, a transaction's offset only
if its record is newer than the one in memory, which comes to the same.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from .logdir import OFFSETS_TOPIC, SegmentFile

COMMIT_WINDOW = 10  # Burrow's window: a partition's status looks at its last 10 commits


def segments_frame(spark: SparkSession, segments: list[SegmentFile]) -> DataFrame:
    schema = "topic string, partition int, base_offset long, path string, size_bytes long"
    rows = [(s.topic, s.partition, s.base_offset, s.path, s.size) for s in segments]
    return spark.createDataFrame(rows, schema)


def errors(batches: DataFrame) -> DataFrame:
    return (batches.where(F.col("error").isNotNull())
            .select("topic", "partition", "segment", "position", "base_offset", "error_kind", "error")
            .orderBy("segment", "position"))


def log_end_offsets(batches: DataFrame, segments: DataFrame) -> DataFrame:
    """(topic, partition, log_start_offset, log_end_offset): the end is the next offset after the last
    sound batch, or the base offset of the newest segment when that segment is still empty."""
    sound = batches.where(F.col("error").isNull())
    from_batches = sound.groupBy("topic", "partition").agg(
        F.min("base_offset").alias("first_offset"), (F.max("last_offset") + 1).alias("end_from_batches"))
    from_files = segments.groupBy("topic", "partition").agg(
        F.min("base_offset").alias("first_base"), F.max("base_offset").alias("last_base"))
    return (from_files.join(from_batches, ["topic", "partition"], "left")
            .select("topic", "partition",
                    F.coalesce("first_offset", "last_base").alias("log_start_offset"),
                    F.greatest(F.coalesce("end_from_batches", F.lit(0)), F.col("last_base")).alias("log_end_offset")))


# -- committed offsets --------------------------------------------------------------------------------


def resolve_transactions(offsets: DataFrame) -> DataFrame:
    """Every offset commit and tombstone with `txn_outcome`: null for a plain record, `commit`, `abort`
    or `open` for a transactional one (the first marker of its producer after it in its log partition),
    and `applied_at` (the marker's offset, or the record's own)."""
    keyed = offsets.where(F.col("record_type").isin("offset_commit", "offset_tombstone"))
    markers = (offsets.where(F.col("record_type").isin("txn_commit", "txn_abort"))
               .select("log_partition", "producer_id", "offset",
                       F.col("offset").alias("_marker_offset"), F.col("record_type").alias("_marker")))
    txn = keyed.where(F.col("transactional"))
    following = (Window.partitionBy("log_partition", "producer_id").orderBy("offset")
                 .rowsBetween(Window.currentRow, Window.unboundedFollowing))
    resolved = (txn.unionByName(markers, allowMissingColumns=True)
                .withColumn("_m_offset", F.first("_marker_offset", ignorenulls=True).over(following))
                .withColumn("_m", F.first("_marker", ignorenulls=True).over(following))
                .where(F.col("record_type").isNotNull())
                .withColumn("txn_outcome", F.when(F.col("_m") == "txn_commit", "commit")
                            .when(F.col("_m") == "txn_abort", "abort").otherwise("open"))
                .withColumn("applied_at", F.coalesce("_m_offset", "offset"))
                .drop("_marker_offset", "_marker", "_m_offset", "_m"))
    plain = (keyed.where(~F.coalesce(F.col("transactional"), F.lit(False)))
             .withColumn("txn_outcome", F.lit(None).cast("string")).withColumn("applied_at", F.col("offset")))
    return plain.unionByName(resolved)


def counted(resolved: DataFrame) -> DataFrame:
    """The records that count (plain ones and those of committed transactions)."""
    return resolved.where(F.col("txn_outcome").isNull() | (F.col("txn_outcome") == "commit"))


def offsets_latest(resolved: DataFrame) -> DataFrame:
    """The compacted, read_committed view: per group, topic and partition the counted commit record with
    the highest log offset, unless a newer counted record for that key is a tombstone (OffsetDelete,
    DeleteGroups or expiry)."""
    newest = Window.partitionBy("group_id", "topic", "partition").orderBy(F.col("offset").desc())
    return (counted(resolved).withColumn("_rank", F.row_number().over(newest))
            .where((F.col("_rank") == 1) & (F.col("record_type") == "offset_commit"))
            .select("group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
                    "commit_timestamp", "expire_timestamp", F.col("log_partition").alias("offsets_partition"),
                    F.col("offset").alias("offsets_log_offset"),
                    F.col("txn_outcome").isNotNull().alias("transactional")))


def commits(resolved: DataFrame) -> DataFrame:
    """Counted commit records, each with `request`: which OffsetCommit (or TxnOffsetCommit) wrote it.

    The coordinator stores the commits it takes in one turn of the loop in one batch (Kafka's runtime
    batches appends too), so a batch is not a request. Within a batch, one request's records are
    consecutive, of one group and share its commit timestamp; a partition seen again in such a run
    starts another request. Two members committing different partitions of one group in the same
    millisecond cannot be told apart and count once."""
    c = counted(resolved).where(F.col("record_type") == "offset_commit")
    run = ["log_partition", "batch_offset", "group_id", "commit_timestamp"]
    again = Window.partitionBy(*run, "topic", "partition").orderBy("offset")
    return (c.withColumn("_k", F.row_number().over(again))
            .withColumn("request", F.concat_ws(":", *[F.col(x).cast("string") for x in run], F.col("_k").cast("string")))
            .drop("_k"))


def transactions(resolved: DataFrame) -> DataFrame:
    """Per group: committed, aborted and open transactions that carried its offsets."""
    txn = resolved.where(F.col("txn_outcome").isNotNull() & (F.col("record_type") == "offset_commit"))
    key = F.concat_ws(":", "log_partition", "producer_id", "applied_at")
    names = {"commit": "transactions_committed", "abort": "transactions_aborted", "open": "transactions_open"}
    return txn.groupBy("group_id").agg(
        *[F.countDistinct(F.when(F.col("txn_outcome") == o, key)).alias(name) for o, name in names.items()])


def commit_rate(commit_rows: DataFrame, since: Column | None) -> DataFrame:
    """Commit requests and records per group and minute. A group's first and last minutes are only
    partly covered by the data: `complete` is false there, so charts do not draw them as dips."""
    if since is not None:
        commit_rows = commit_rows.where(F.col("commit_timestamp") >= since)
    per_minute = (commit_rows.groupBy("group_id", F.window("commit_timestamp", "1 minute").alias("w"))
                  .agg(F.countDistinct("request").alias("commits"),
                       F.count(F.lit(1)).alias("partition_commits"),
                       F.countDistinct("topic", "partition").alias("partitions"))
                  .select("group_id", F.col("w.start").alias("minute"), "commits", "partition_commits",
                          "partitions"))
    edges = Window.partitionBy("group_id")
    return (per_minute
            .withColumn("complete", (F.col("minute") != F.min("minute").over(edges))
                        & (F.col("minute") != F.max("minute").over(edges)))
            .orderBy("group_id", "minute"))


# -- lag ----------------------------------------------------------------------------------------------


def lag(latest: DataFrame, ends: DataFrame) -> DataFrame:
    """Per group, topic and partition: log end offset minus committed offset (null when the topic is not
    in the data directory), and when the group last committed."""
    return (latest.join(ends.where(F.col("topic") != OFFSETS_TOPIC), ["topic", "partition"], "left")
            .select("group_id", "topic", "partition", "committed_offset", "log_end_offset",
                    (F.col("log_end_offset") - F.col("committed_offset")).alias("lag"),
                    F.col("commit_timestamp").alias("last_commit_time"))
            .orderBy("group_id", "topic", "partition"))


def _data_ends(batches: DataFrame) -> DataFrame:
    """(topic, partition, t, end): after the batch written at t the log ends at `end`."""
    return (batches.where(F.col("error").isNull() & (F.col("topic") != OFFSETS_TOPIC))
            .select("topic", "partition", F.col("max_timestamp").alias("t"), (F.col("last_offset") + 1).alias("end")))


def commit_lag(commit_rows: DataFrame, batches: DataFrame) -> DataFrame:
    """Each counted commit with the partition's log end offset when it was made (the newest batch
    written by then) and `lag_at_commit`, as Burrow stores with every commit it sees."""
    c = commit_rows.select("group_id", "topic", "partition", "committed_offset", "offset",
                           F.col("commit_timestamp").alias("t"), F.lit(1).alias("_is_commit"))
    e = _data_ends(batches).withColumn("_is_commit", F.lit(0))
    upto = (Window.partitionBy("topic", "partition").orderBy("t", "_is_commit")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (c.unionByName(e, allowMissingColumns=True)
            .withColumn("end_at_commit", F.max("end").over(upto))
            .where(F.col("_is_commit") == 1)
            .select("group_id", "topic", "partition", "committed_offset", "offset",
                    F.col("t").alias("commit_time"), "end_at_commit",
                    F.greatest(F.coalesce(F.col("end_at_commit") - F.col("committed_offset"), F.lit(0)),
                               F.lit(0)).alias("lag_at_commit")))


def lag_history(commit_rows: DataFrame, batches: DataFrame, start_s: float, bucket_s: int, buckets: int) -> DataFrame:
    """Per group, topic, partition and time bucket (from the group's first commit on): the log end
    offset and the committed offset at the bucket's end, and their difference. The committed offset
    holds between commits; the end grows with every batch written."""
    def bucket(col: str) -> Column:
        return F.least(F.floor((F.col(col).cast("double") - F.lit(start_s)) / bucket_s).cast("int"), F.lit(buckets - 1))

    per_bucket = (commit_rows.groupBy("group_id", "topic", "partition", bucket("commit_timestamp").alias("b"))
                  .agg(F.max_by("committed_offset", "offset").alias("_committed")))
    ends = (_data_ends(batches).groupBy("topic", "partition", bucket("t").alias("b")).agg(F.max("end").alias("_end")))
    first = per_bucket.groupBy("group_id", "topic", "partition").agg(F.min("b").alias("_first"))
    grid = first.select("group_id", "topic", "partition",
                        F.explode(F.sequence(F.greatest(F.col("_first"), F.lit(0)), F.lit(buckets - 1))).alias("b"))
    ends_grid = (ends.select("topic", "partition").distinct()
                 .select("topic", "partition", F.explode(F.sequence(F.lit(0), F.lit(buckets - 1))).alias("b"))
                 .join(ends, ["topic", "partition", "b"], "left")
                 .withColumn("end", F.max("_end").over(Window.partitionBy("topic", "partition").orderBy("b")
                                                       .rowsBetween(Window.unboundedPreceding, Window.currentRow)))
                 .drop("_end"))
    held = Window.partitionBy("group_id", "topic", "partition").orderBy("b").rowsBetween(Window.unboundedPreceding, 0)
    return (grid.join(per_bucket, ["group_id", "topic", "partition", "b"], "left")
            .withColumn("committed_offset", F.last("_committed", ignorenulls=True).over(held))
            .join(ends_grid, ["topic", "partition", "b"], "left")
            .select("group_id", "topic", "partition",
                    (F.lit(start_s) + (F.col("b") + 1) * bucket_s).cast("timestamp").alias("time"),
                    "committed_offset", F.col("end").alias("log_end_offset"),
                    F.greatest(F.coalesce(F.col("end") - F.col("committed_offset"), F.lit(0)), F.lit(0)).alias("lag")))


def group_lag_history(partition_history: DataFrame) -> DataFrame:
    return (partition_history.groupBy("group_id", "time")
            .agg(F.sum("lag").alias("lag"), F.count(F.lit(1)).alias("partitions")).orderBy("group_id", "time"))


# -- topics -------------------------------------------------------------------------------------------


def topics(batches: DataFrame, segments: DataFrame, ends: DataFrame, since: Column | None,
           window_s: float | None) -> DataFrame:
    """Per topic and partition: bytes on disk, segments, offsets, messages and their rates. Rates are
    over the report's whole window (`window_s`, the same for every partition), not over a partition's
    own first-to-last timestamp, which made one batch look like 300,000 messages/s; null when the
    window is shorter than a second."""
    sound = batches.where(F.col("error").isNull() & ~F.col("control"))
    if since is not None:
        sound = sound.where(F.col("max_timestamp") >= since)
    stats = sound.groupBy("topic", "partition").agg(
        F.sum("records").alias("messages"), F.count(F.lit(1)).alias("batches"),
        F.sum("size_bytes").alias("batch_bytes"),
        F.min("base_timestamp").alias("first_timestamp"), F.max("max_timestamp").alias("last_timestamp"),
        F.sort_array(F.collect_set("compression")).alias("compression"))
    files = segments.groupBy("topic", "partition").agg(
        F.sum("size_bytes").alias("size_bytes"), F.count(F.lit(1)).alias("segments"))
    errs = batches.where(F.col("error").isNotNull()).groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("errors"))
    window = F.lit(window_s if window_s and window_s >= 1 else None).cast("double")
    return (files.join(ends, ["topic", "partition"], "left")
            .join(stats, ["topic", "partition"], "left")
            .join(errs, ["topic", "partition"], "left")
            .select("topic", "partition", "size_bytes", "segments", "log_start_offset", "log_end_offset",
                    F.coalesce("messages", F.lit(0)).alias("messages"),
                    F.coalesce("batches", F.lit(0)).alias("batches"),
                    "first_timestamp", "last_timestamp",
                    (F.coalesce("messages", F.lit(0)) / window).alias("messages_per_sec"),
                    (F.coalesce("batch_bytes", F.lit(0)) / window).alias("bytes_per_sec"),
                    "compression",
                    F.coalesce("errors", F.lit(0)).alias("errors"))
            .orderBy("topic", "partition"))
