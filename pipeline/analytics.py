"""The report's tables as Spark DataFrame transformations over the data source views.

Inputs: `batches` (the batches view of every topic), `offsets` (the consumer_offsets view), a small
`segments` frame listed on the driver (so empty partitions still have a log end offset) and, optionally,
the broker's `rebalance_completed` log events. Nothing here collects to the driver.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .logdir import OFFSETS_TOPIC, SegmentFile

REBALANCE_EVENT = "rebalance_completed"  # coordinator/runtime/service.py logs one per completed rebalance

BROKER_LOG_SCHEMA = StructType([
    StructField("event", StringType()),
    StructField("timestamp", StringType()),
    StructField("group_id", StringType()),
    StructField("old_generation", IntegerType()),
    StructField("new_generation", IntegerType()),
    StructField("reason", StringType()),
    StructField("client_reason", StringType()),
    StructField("trigger_member", StringType()),
    StructField("members_in", ArrayType(StringType())),
    StructField("members_out", ArrayType(StringType())),
    StructField("member_count", IntegerType()),
    StructField("duration_ms", LongType()),
])


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


def offsets_latest(offsets: DataFrame) -> DataFrame:
    """The compacted view: per group, topic and partition the newest commit record, unless the newest
    record for that key is a tombstone (deleted by OffsetDelete, DeleteGroups or expiry)."""
    keyed = offsets.where(F.col("record_type").isin("offset_commit", "offset_tombstone"))
    # A key always lives in one __consumer_offsets partition (the group's), so the log offset orders it.
    newest = Window.partitionBy("group_id", "topic", "partition").orderBy(F.col("offset").desc())
    return (keyed.withColumn("_rank", F.row_number().over(newest))
            .where((F.col("_rank") == 1) & (F.col("record_type") == "offset_commit"))
            .select("group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
                    "commit_timestamp", "expire_timestamp", F.col("log_partition").alias("offsets_partition"),
                    F.col("offset").alias("offsets_log_offset")))


def lag(latest: DataFrame, ends: DataFrame) -> DataFrame:
    """Per group, topic and partition: log end offset minus committed offset (null when the topic is not
    in the data directory), and when the group last committed."""
    return (latest.join(ends.where(F.col("topic") != OFFSETS_TOPIC), ["topic", "partition"], "left")
            .select("group_id", "topic", "partition", "committed_offset", "log_end_offset",
                    (F.col("log_end_offset") - F.col("committed_offset")).alias("lag"),
                    F.col("commit_timestamp").alias("last_commit_time"))
            .orderBy("group_id", "topic", "partition"))


def commit_rate(offsets: DataFrame, since: F.Column | None) -> DataFrame:
    """Commits per minute per group. One OffsetCommit request is appended as one batch, so `commits`
    counts distinct batches (two members committing in the same millisecond are two commits; counting
    distinct timestamps merged them) and `partition_commits` counts records. A group's first and last
    minutes are only partly covered by the data: `complete` is false there, so charts do not draw
    them as dips."""
    commits = offsets.where(F.col("record_type") == "offset_commit")
    if since is not None:
        commits = commits.where(F.col("commit_timestamp") >= since)
    # Rows read without a batch offset (none today) fall back to the commit timestamp.
    batch = F.coalesce(F.col("batch_offset").cast("string"), F.col("commit_timestamp").cast("string"))
    per_minute = (commits.groupBy("group_id", F.window("commit_timestamp", "1 minute").alias("w"))
                  .agg(F.countDistinct("log_partition", batch).alias("commits"),
                       F.count(F.lit(1)).alias("partition_commits"),
                       F.countDistinct("topic", "partition").alias("partitions"))
                  .select("group_id", F.col("w.start").alias("minute"), "commits", "partition_commits",
                          "partitions"))
    edges = Window.partitionBy("group_id")
    return (per_minute
            .withColumn("complete", (F.col("minute") != F.min("minute").over(edges))
                        & (F.col("minute") != F.max("minute").over(edges)))
            .orderBy("group_id", "minute"))


# Reasons folded into kinds (the same folding as the broker's kbroker_rebalances_total metric).
def reason_kind(reason: F.Column) -> F.Column:
    return (F.when(reason.contains("test control"), "test_control")
            .when(reason.contains("session expired"), "session_expired")
            .when(reason.contains("did not sync in time"), "sync_timeout")
            .when(reason.contains("updated its metadata") | reason.contains("metadata"), "metadata_changed")
            .when(reason.contains("group became empty"), "group_emptied")
            .when(reason.contains(" left") | (reason == "member left"), "member_left")
            .when(reason.contains("joined") | (reason == "first generation seen"), "member_joined")
            .otherwise("other"))


def _derived_reason(prev_members: F.Column, members: F.Column, joined: F.Column, left: F.Column) -> F.Column:
    return (F.when(prev_members.isNull(), F.lit("first generation seen"))
            .when(F.size(members) == 0, F.lit("group became empty"))
            .when((F.size(joined) > 0) & (F.size(left) > 0), F.lit("members joined and left"))
            .when(F.size(joined) > 0, F.lit("member joined"))
            .when(F.size(left) > 0, F.lit("member left"))
            .otherwise(F.lit("same members (rejoin, new subscription or metadata)")))


def rebalances(offsets: DataFrame, broker_events: DataFrame | None, since: F.Column | None,
               events_source: str = "broker log") -> DataFrame:
    """Per group and generation: when, who, which protocol, why (from the broker log when given, else
    derived from the member lists) and the time since the previous generation."""
    gm = offsets.where(F.col("record_type") == "group_metadata")
    first = Window.partitionBy("group_id", "generation").orderBy("offset")
    gm = (gm.withColumn("_rank", F.row_number().over(first)).where(F.col("_rank") == 1)
          .withColumn("time", F.coalesce("state_timestamp", "timestamp"))
          .withColumn("member_ids", F.transform("members", lambda m: m["member_id"])))
    order = Window.partitionBy("group_id").orderBy("generation")
    prev_ids = F.lag("member_ids").over(order)
    gens = (gm.withColumn("_prev_ids", prev_ids)
            .withColumn("previous_generation", F.lag("generation").over(order))
            .withColumn("seconds_since_previous",
                        F.col("time").cast("double") - F.lag("time").over(order).cast("double"))
            .withColumn("members_joined", F.array_except("member_ids", F.coalesce("_prev_ids", F.array().cast("array<string>"))))
            .withColumn("members_left", F.array_except(F.coalesce("_prev_ids", F.array().cast("array<string>")), "member_ids"))
            .withColumn("derived_reason", _derived_reason(F.col("_prev_ids"), F.col("member_ids"),
                                                          F.col("members_joined"), F.col("members_left")))
            .select("group_id", "generation", "time", F.size("members").alias("member_count"), "members",
                    "leader", "protocol_type", "protocol", "previous_generation", "seconds_since_previous",
                    "members_joined", "members_left", "derived_reason"))
    if broker_events is None:
        out = gens.withColumn("reason", F.col("derived_reason")).withColumn("reason_source", F.lit("derived"))
        for name, dtype in (("client_reason", "string"), ("trigger_member", "string"),
                            ("rebalance_duration_ms", "long")):
            out = out.withColumn(name, F.lit(None).cast(dtype))
        out = out.withColumn("in_offsets_log", F.lit(True))
    else:
        ev = (broker_events.where(F.col("event") == REBALANCE_EVENT)
              .select("group_id", F.col("new_generation").alias("generation"),
                      F.col("reason").alias("log_reason"), "client_reason", "trigger_member",
                      F.col("duration_ms").alias("rebalance_duration_ms"),
                      F.col("member_count").alias("log_member_count"),
                      F.to_timestamp("timestamp").alias("log_time"))
              .dropDuplicates(["group_id", "generation"]))
        joined = gens.withColumn("in_offsets_log", F.lit(True)).join(ev, ["group_id", "generation"], "full_outer")
        out = (joined
               .withColumn("time", F.coalesce("time", "log_time"))
               .withColumn("member_count", F.coalesce("member_count", "log_member_count"))
               .withColumn("in_offsets_log", F.coalesce("in_offsets_log", F.lit(False)))
               .withColumn("reason", F.coalesce("log_reason", "derived_reason"))
               .withColumn("reason_source", F.when(F.col("log_reason").isNotNull(), F.lit(events_source))
                           .when(F.col("derived_reason").isNotNull(), "derived"))
               .drop("log_reason", "log_member_count", "log_time"))
        # the previous-generation gap again, now that log-only generations have a time too
        w = Window.partitionBy("group_id").orderBy("generation")
        out = (out.withColumn("previous_generation", F.lag("generation").over(w))
               .withColumn("seconds_since_previous",
                           F.col("time").cast("double") - F.lag("time").over(w).cast("double")))
    if since is not None:
        out = out.where(F.col("time") >= since)
    # A member leaving with LeaveGroup (a clean close) is not a crash (its session expiring): say which.
    out = (out.withColumn("reason_kind", reason_kind(F.col("reason")))
           .withColumn("ending", F.when(F.col("reason_kind") == "session_expired", "crash or hang")
                       .when((F.col("reason_kind") == "member_left") & (F.col("member_count") == 0), "clean stop")
                       .when(F.col("reason_kind") == "member_left", "clean leave")))
    return out.select(
        "group_id", "generation", "time", "member_count", "members", "leader", "protocol_type", "protocol",
        "reason", "reason_kind", "ending", "reason_source", "client_reason", "trigger_member", "rebalance_duration_ms",
        "members_joined", "members_left", "previous_generation", "seconds_since_previous", "in_offsets_log",
    ).orderBy("group_id", "generation")


def topics(batches: DataFrame, segments: DataFrame, ends: DataFrame, since: F.Column | None) -> DataFrame:
    """Per topic and partition: bytes on disk, segments, offsets, messages and their rate. With --since
    the message counts and rates cover batches newer than that time; sizes and offsets are the whole log."""
    sound = batches.where(F.col("error").isNull() & ~F.col("control"))
    if since is not None:
        sound = sound.where(F.col("max_timestamp") >= since)
    stats = sound.groupBy("topic", "partition").agg(
        F.sum("records").alias("messages"), F.count(F.lit(1)).alias("batches"),
        F.sum("size_bytes").alias("batch_bytes"),
        F.min("base_timestamp").alias("first_timestamp"), F.max("max_timestamp").alias("last_timestamp"),
        F.collect_set("compression").alias("compression"))
    files = segments.groupBy("topic", "partition").agg(
        F.sum("size_bytes").alias("size_bytes"), F.count(F.lit(1)).alias("segments"))
    errs = batches.where(F.col("error").isNotNull()).groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("errors"))
    span = F.col("last_timestamp").cast("double") - F.col("first_timestamp").cast("double")
    return (files.join(ends, ["topic", "partition"], "left")
            .join(stats, ["topic", "partition"], "left")
            .join(errs, ["topic", "partition"], "left")
            .select("topic", "partition", "size_bytes", "segments", "log_start_offset", "log_end_offset",
                    F.coalesce("messages", F.lit(0)).alias("messages"),
                    F.coalesce("batches", F.lit(0)).alias("batches"),
                    "first_timestamp", "last_timestamp",
                    F.when(span > 0, F.col("messages") / span).alias("messages_per_sec"),
                    F.when(span > 0, F.col("batch_bytes") / span).alias("bytes_per_sec"),
                    "compression",
                    F.coalesce("errors", F.lit(0)).alias("errors"))
            .orderBy("topic", "partition"))


def group_summary(rebalances_df: DataFrame, lag_df: DataFrame, commits_df: DataFrame) -> DataFrame:
    """One row per group: generations, rebalances by how they ended, members now, lag, commits."""
    last = Window.partitionBy("group_id").orderBy(F.col("generation").desc())
    gens = (rebalances_df.withColumn("_n", F.row_number().over(last))
            .groupBy("group_id")
            .agg(F.count(F.lit(1)).alias("generations"),
                 F.min("time").alias("first_seen"), F.max("time").alias("last_generation_time"),
                 F.max(F.when(F.col("_n") == 1, F.col("member_count"))).alias("members_now"),
                 F.sum(F.when(F.col("ending") == "crash or hang", 1).otherwise(0)).alias("crashes"),
                 F.sum(F.when(F.col("ending").isin("clean leave", "clean stop"), 1).otherwise(0)).alias("clean_leaves"),
                 F.max(F.when(F.col("_n") == 1, F.col("reason"))).alias("last_reason")))
    lag_sum = lag_df.groupBy("group_id").agg(F.sum("lag").alias("total_lag"),
                                             F.max("last_commit_time").alias("last_commit_time"))
    commit_sum = commits_df.groupBy("group_id").agg(F.sum("commits").alias("commits"))
    return (gens.join(lag_sum, "group_id", "full_outer").join(commit_sum, "group_id", "full_outer")
            .select("group_id", "generations", "members_now", "crashes", "clean_leaves", "last_reason",
                    "total_lag", "commits", "first_seen", "last_generation_time", "last_commit_time")
            .orderBy("group_id"))
