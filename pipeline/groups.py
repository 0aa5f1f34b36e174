"""The group tables: generations (classic generations and KIP-848 group epochs alike), who owned which
partition when, the outages, and a status per group with Burrow's rules. Spark transformations over
the consumer_offsets view and, optionally, the broker's rebalance history (rebalances.jsonl or its
JSON log); nothing here collects to the driver.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from .analytics import COMMIT_WINDOW

REBALANCE_EVENT = "rebalance_completed"  # coordinator/outcome.py; the history file has the same lines
DEFAULT_CONSUMER_SESSION_MS = 45_000  # group.consumer.session.timeout.ms, when the history does not say

BROKER_LOG_SCHEMA = StructType([
    StructField("event", StringType()),
    StructField("timestamp", StringType()),
    StructField("group_id", StringType()),
    StructField("group_type", StringType()),
    StructField("old_generation", IntegerType()),
    StructField("new_generation", IntegerType()),
    StructField("reason", StringType()),
    StructField("client_reason", StringType()),
    StructField("trigger_member", StringType()),
    StructField("members_in", ArrayType(StringType())),
    StructField("members_out", ArrayType(StringType())),
    StructField("member_count", IntegerType()),
    StructField("duration_ms", LongType()),
    StructField("session_timeout_ms", LongType()),
])



def _empty() -> Column:
    """An empty array of strings (a Column needs a session: made when used, not at import)."""
    return F.array().cast("array<string>")


# -- generations ---------------------------------------------------------------------------------------


def _classic(offsets: DataFrame) -> DataFrame:
    gm = offsets.where(F.col("record_type") == "group_metadata")
    first = Window.partitionBy("group_id", "generation").orderBy("offset")
    return (gm.withColumn("_rank", F.row_number().over(first)).where(F.col("_rank") == 1)
            .select("group_id", F.lit("classic").alias("group_type"), "generation",
                    F.coalesce("state_timestamp", "timestamp").alias("time"), "offset", "members", "leader",
                    "protocol_type", "protocol"))


def member_intervals(offsets: DataFrame) -> DataFrame:
    """A KIP-848 group's members: from a member's first metadata record to its tombstone, with what it
    last said of itself (client id, host, subscription)."""
    ev = (offsets.where(F.col("record_type").isin("consumer_group_member_metadata_record",
                                                  "consumer_group_member_metadata_tombstone"))
          .select("group_id", "member_id", "offset", "timestamp", "members",
                  (F.col("record_type") == "consumer_group_member_metadata_tombstone").alias("_gone")))
    order = Window.partitionBy("group_id", "member_id").orderBy("offset")
    ev = (ev.withColumn("_starts", (~F.col("_gone") & F.coalesce(F.lag("_gone").over(order), F.lit(True))).cast("int"))
          .withColumn("_stint", F.sum("_starts").over(order.rowsBetween(Window.unboundedPreceding, 0))))
    return (ev.where(F.col("_stint") > 0).groupBy("group_id", "member_id", "_stint")
            .agg(F.min(F.when(~F.col("_gone"), F.col("offset"))).alias("start_offset"),
                 F.min(F.when(~F.col("_gone"), F.col("timestamp"))).alias("start_time"),
                 F.min(F.when(F.col("_gone"), F.col("offset"))).alias("end_offset"),
                 F.min(F.when(F.col("_gone"), F.col("timestamp"))).alias("end_time"),
                 F.max_by(F.when(~F.col("_gone"), F.col("members")[0]), F.when(~F.col("_gone"), F.col("offset")))
                 .alias("member"))
            .drop("_stint"))


def _consumer(offsets: DataFrame, intervals: DataFrame) -> DataFrame:
    """One row per KIP-848 group epoch, with the members the group had when it moved to it."""
    epochs = (offsets.where(F.col("record_type") == "consumer_group_metadata_record")
              .select("group_id", "generation", F.col("timestamp").alias("time"), "offset"))
    first = Window.partitionBy("group_id", "generation").orderBy("offset")
    epochs = epochs.withColumn("_rank", F.row_number().over(first)).where(F.col("_rank") == 1).drop("_rank")
    m = intervals.select("group_id", F.col("start_offset").alias("_s"), F.col("end_offset").alias("_e"), "member")
    inside = (F.col("_s") <= F.col("offset")) & (F.col("_e").isNull() | (F.col("_e") > F.col("offset")))
    with_members = (epochs.join(m, "group_id", "left").where(F.col("_s").isNull() | inside)
                    .groupBy("group_id", "generation", "time", "offset")
                    .agg(F.array_sort(F.collect_list("member")).alias("members")))
    # epochs whose every interval failed the condition dropped out above: add them back empty
    return (epochs.join(with_members.select("group_id", "generation", "members"), ["group_id", "generation"], "left")
            .select("group_id", F.lit("consumer").alias("group_type"), "generation", "time", "offset",
                    F.coalesce("members", F.array().cast(with_members.schema["members"].dataType)).alias("members"),
                    F.lit(None).cast("string").alias("leader"), F.lit("consumer").alias("protocol_type"),
                    F.lit(None).cast("string").alias("protocol")))


def reason_kind(reason: Column) -> Column:
    """Reasons folded into kinds (the same folding as the broker's kbroker_rebalances_total metric)."""
    return (F.when(reason.contains("test control"), "test_control")
            .when(reason.contains("session expired"), "session_expired")
            .when(reason.contains("did not sync in time") | reason.contains("revocation timed out"), "sync_timeout")
            .when(reason.contains("updated its metadata") | reason.contains("metadata"), "metadata_changed")
            .when(reason.contains("group became empty"), "group_emptied")
            .when(reason.contains(" left") | (reason == "member left"), "member_left")
            .when(reason.contains("joined") | (reason == "first generation seen"), "member_joined")
            .otherwise("other"))


def _derived_reason(prev_members: Column, members: Column, joined: Column, left: Column) -> Column:
    return (F.when(prev_members.isNull(), F.lit("first generation seen"))
            .when(F.size(members) == 0, F.lit("group became empty"))
            .when((F.size(joined) > 0) & (F.size(left) > 0), F.lit("members joined and left"))
            .when(F.size(joined) > 0, F.lit("member joined"))
            .when(F.size(left) > 0, F.lit("member left"))
            .otherwise(F.lit("same members (rejoin, new subscription or metadata)")))


def rebalances(offsets: DataFrame, intervals: DataFrame, broker_events: DataFrame | None, since: Column | None,
               events_source: str = "broker log") -> DataFrame:
    """Per group and generation (a KIP-848 group's epoch): when, who, which protocol, why (from the
    broker's history when given, else derived from the member lists), the time since the previous one,
    and for a member whose session expired the session timeout (how long it went unnoticed)."""
    classic = _classic(offsets)
    gens = classic.unionByName(_consumer(offsets, intervals.cache()))
    gens = gens.withColumn("member_ids", F.transform("members", lambda m: m["member_id"]))
    order = Window.partitionBy("group_id").orderBy("generation")
    prev_ids = F.coalesce(F.col("_prev_ids"), _empty())
    gens = (gens.withColumn("_prev_ids", F.lag("member_ids").over(order))
            .withColumn("_prev_members", F.lag("members").over(order))
            .withColumn("members_joined", F.array_except("member_ids", prev_ids))
            .withColumn("members_left", F.array_except(prev_ids, "member_ids"))
            .withColumn("derived_reason", _derived_reason(F.col("_prev_ids"), F.col("member_ids"),
                                                          F.col("members_joined"), F.col("members_left")))
            # the longest session timeout among the members that went: a crash goes unnoticed that long
            .withColumn("_left_session_ms", F.array_max(F.transform(
                F.filter(F.coalesce("_prev_members", F.array().cast(classic.schema["members"].dataType)),
                         lambda m: F.array_contains(F.col("members_left"), m["member_id"])),
                lambda m: m["session_timeout_ms"].cast("long"))))
            .withColumn("member_count", F.size("members")))
    if broker_events is None:
        out = (gens.withColumn("reason", F.col("derived_reason")).withColumn("reason_source", F.lit("derived"))
               .withColumn("client_reason", F.lit(None).cast("string"))
               .withColumn("trigger_member", F.lit(None).cast("string"))
               .withColumn("rebalance_duration_ms", F.lit(None).cast("long"))
               .withColumn("session_timeout_ms", F.col("_left_session_ms"))
               .withColumn("in_offsets_log", F.lit(True)))
    else:
        ev = (broker_events.where(F.col("event") == REBALANCE_EVENT)
              .select("group_id", F.col("new_generation").alias("generation"),
                      F.col("group_type").alias("log_group_type"),
                      F.col("reason").alias("log_reason"), "client_reason", "trigger_member",
                      F.col("duration_ms").alias("rebalance_duration_ms"),
                      F.col("session_timeout_ms").alias("log_session_ms"),
                      F.col("member_count").alias("log_member_count"),
                      F.coalesce("members_in", _empty()).alias("log_in"), F.coalesce("members_out", _empty()).alias("log_out"),
                      F.to_timestamp("timestamp").alias("log_time"))
              .dropDuplicates(["group_id", "generation"]))
        joined = gens.withColumn("in_offsets_log", F.lit(True)).join(ev, ["group_id", "generation"], "full_outer")
        out = (joined
               .withColumn("group_type", F.coalesce("group_type", "log_group_type", F.lit("classic")))
               .withColumn("time", F.coalesce("time", "log_time"))
               .withColumn("member_count", F.coalesce("member_count", "log_member_count"))
               .withColumn("members_joined", F.coalesce("members_joined", "log_in"))
               .withColumn("members_left", F.coalesce("members_left", "log_out"))
               .withColumn("in_offsets_log", F.coalesce("in_offsets_log", F.lit(False)))
               .withColumn("reason", F.coalesce("log_reason", "derived_reason"))
               .withColumn("reason_source", F.when(F.col("log_reason").isNotNull(), F.lit(events_source))
                           .when(F.col("derived_reason").isNotNull(), "derived"))
               .withColumn("session_timeout_ms", F.coalesce("log_session_ms", "_left_session_ms"))
               .drop("log_reason", "log_member_count", "log_time", "log_group_type", "log_in", "log_out",
                     "log_session_ms"))
    w = Window.partitionBy("group_id").orderBy("generation")
    out = (out.withColumn("previous_generation", F.lag("generation").over(w))
           .withColumn("seconds_since_previous", F.col("time").cast("double") - F.lag("time").over(w).cast("double")))
    if since is not None:
        out = out.where(F.col("time") >= since)
    # A member leaving with LeaveGroup (a clean close) is not a crash (its session expiring): say which.
    out = (out.withColumn("reason_kind", reason_kind(F.col("reason")))
           .withColumn("ending", F.when(F.col("reason_kind") == "session_expired", "crash or hang")
                       .when((F.col("reason_kind").isin("member_left", "group_emptied")) & (F.col("member_count") == 0),
                             "clean stop")
                       .when(F.col("reason_kind") == "member_left", "clean leave")))
    return out.select(
        "group_id", "group_type", "generation", "time", "member_count", "members", "leader", "protocol_type",
        "protocol", "reason", "reason_kind", "ending", "reason_source", "client_reason", "trigger_member",
        "rebalance_duration_ms", "session_timeout_ms", "members_joined", "members_left", "previous_generation",
        "seconds_since_previous", "in_offsets_log", F.col("offset").alias("offsets_log_offset"),
    ).orderBy("group_id", "generation")


# -- ownership and outages -------------------------------------------------------------------------------


def ownership(offsets: DataFrame, rebalances_df: DataFrame, intervals: DataFrame) -> DataFrame:
    """Who owned each partition when: (group, topic, partition, member, client, from, until). A classic
    generation's assignment holds from the generation to the next one; a KIP-848 member's from each
    of its assignment records to its next one (or its tombstone)."""
    classic = (rebalances_df.where(F.col("group_type") == "classic")
               .withColumn("until", F.lead("time").over(Window.partitionBy("group_id").orderBy("generation")))
               .select("group_id", "generation", F.col("time").alias("since"), "until", F.explode("members").alias("m"))
               .select("group_id", "generation", "since", "until", F.col("m.member_id").alias("member_id"),
                       F.col("m.client_id").alias("client_id"), F.explode("m.assignment").alias("a"))
               .select("group_id", "generation", "since", "until", "member_id", "client_id",
                       F.col("a.topic").alias("topic"), F.explode("a.partitions").alias("partition")))
    cur = (offsets.where(F.col("record_type").isin("consumer_group_current_member_assignment_record",
                                                   "consumer_group_current_member_assignment_tombstone"))
           .withColumn("until", F.lead("timestamp").over(Window.partitionBy("group_id", "member_id").orderBy("offset")))
           .where(F.col("record_type") == "consumer_group_current_member_assignment_record"))
    clients = intervals.groupBy("group_id", "member_id").agg(F.max_by("member.client_id", "start_offset").alias("client_id"))
    consumer = (cur.select("group_id", "generation", F.col("timestamp").alias("since"), "until", "member_id",
                           F.explode("assignment").alias("a"))
                .join(clients, ["group_id", "member_id"], "left")
                .select("group_id", "generation", "since", "until", "member_id", "client_id",
                        F.col("a.topic").alias("topic"), F.explode("a.partitions").alias("partition")))
    return classic.unionByName(consumer).orderBy("group_id", "topic", "partition", "since")


def outages(offsets: DataFrame, rebalances_df: DataFrame) -> DataFrame:
    """Spans in which a group's partitions went unserved: a crashed member's from its last heartbeat
    (its session timeout before the coordinator noticed) until the survivors had them again, and a
    classic rebalance's stop (members revoke everything on joining, until SyncGroup hands out the
    new assignment)."""
    r = rebalances_df.where(F.col("time").isNotNull())
    # A KIP-848 group's partitions are served again once a member reconciles to the new epoch: its
    # next assignment record.
    assigned = (offsets.where(F.col("record_type") == "consumer_group_current_member_assignment_record")
                .select("group_id", F.col("offset").alias("_a_offset"), F.col("timestamp").alias("_a_time")))
    nxt = (r.where(F.col("group_type") == "consumer").select("group_id", "generation", "offsets_log_offset")
           .join(assigned, "group_id").where(F.col("_a_offset") > F.col("offsets_log_offset"))
           .groupBy("group_id", "generation").agg(F.min_by("_a_time", "_a_offset").alias("_served_again")))
    r = r.join(nxt, ["group_id", "generation"], "left")
    crash = F.col("reason_kind") == "session_expired"
    classic = F.col("group_type") == "classic"
    session = F.coalesce(F.col("session_timeout_ms"),
                         F.when(~classic, F.lit(DEFAULT_CONSUMER_SESSION_MS))).cast("double") / 1000
    duration = F.coalesce(F.col("rebalance_duration_ms"), F.lit(0)).cast("double") / 1000
    t = F.col("time").cast("double")
    start = F.when(crash & classic, t - duration - F.coalesce(session, F.lit(0.0))) \
        .when(crash, t - session).when(classic, t - duration)
    end = F.when(classic, t).otherwise(F.coalesce(F.col("_served_again").cast("double"), t))
    kind = F.when(crash, "crash (session expired)").otherwise("rebalance")
    return (r.withColumn("_start", start).withColumn("_end", end)
            .where(F.col("_start").isNotNull() & (F.col("_end") > F.col("_start"))
                   & (crash | (classic & (F.col("member_count") > 0))))
            .select("group_id", "group_type", "generation", kind.alias("kind"),
                    F.col("_start").cast("timestamp").alias("start"), F.col("_end").cast("timestamp").alias("end"),
                    F.round(F.col("_end") - F.col("_start"), 3).alias("seconds"), "members_left", "reason")
            .orderBy("group_id", "start"))


# -- status (Burrow's rules) and the summary --------------------------------------------------------------

SEVERITY = {"ok": 0, "empty": 0, "lagging": 1, "stalled": 2, "stopped": 3}


def partition_status(commit_lag_df: DataFrame, lag_df: DataFrame, now: Column) -> DataFrame:
    """Burrow's evaluation (calculatePartitionStatus) of each partition's last COMMIT_WINDOW commits:
    ok with no lag now; stopped if the time since the last commit is longer than the window spans
    (checked first: a consumer that stopped is caught even if its lag was going down); ok if the lag
    was zero at any of those commits; stalled if the committed offset did not move; lagging if the lag
    did not go down."""
    newest = Window.partitionBy("group_id", "topic", "partition").orderBy(F.col("commit_time").desc(), F.col("offset").desc())
    w = (commit_lag_df.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") <= COMMIT_WINDOW)
         .groupBy("group_id", "topic", "partition")
         .agg(F.min("commit_time").alias("_first_t"), F.max("commit_time").alias("_last_t"),
              F.min("lag_at_commit").alias("_min_lag"), F.min("committed_offset").alias("_min_off"),
              F.max("committed_offset").alias("_max_off"), F.count(F.lit(1)).alias("_count"),
              F.max_by("lag_at_commit", "_n").alias("_oldest_lag"), F.min_by("lag_at_commit", "_n").alias("_newest_lag")))
    w = w.join(lag_df.select("group_id", "topic", "partition", "lag"), ["group_id", "topic", "partition"], "left")
    last, first = F.col("_last_t").cast("double"), F.col("_first_t").cast("double")
    lag_now = F.coalesce(F.col("lag"), F.lit(0))
    status = (F.when(lag_now == 0, "ok")
              .when((now.cast("double") - last) > (last - first), "stopped")  # before the zero-lag rule
              .when(F.col("_min_lag") == 0, "ok")
              .when((F.col("_count") > 1) & (F.col("_min_off") == F.col("_max_off")), "stalled")
              .when((F.col("_count") > 1) & (F.col("_newest_lag") >= F.col("_oldest_lag")), "lagging")
              .otherwise("ok"))
    why = (F.when(status == "stopped", F.format_string("%s-%d: no commit for %.0f s, lag %d", "topic", "partition",
                                                        now.cast("double") - last, lag_now))
           .when(status == "stalled", F.format_string("%s-%d: offset stuck at %d over %d commits, lag %d", "topic",
                                                      "partition", "_max_off", "_count", lag_now))
           .when(status == "lagging", F.format_string("%s-%d: lag %d -> %d over %d commits", "topic", "partition",
                                                      "_oldest_lag", "_newest_lag", "_count")))
    return w.select("group_id", "topic", "partition", status.alias("status"), why.alias("why"), F.col("lag").alias("lag_now"))


def deletions(offsets: DataFrame) -> DataFrame:
    """(group_id, deleted_at): the log offset of each group's newest group tombstone (DeleteGroups)."""
    return (offsets.where(F.col("record_type").isin("group_tombstone", "consumer_group_metadata_tombstone"))
            .groupBy("group_id").agg(F.max("offset").alias("deleted_at")))


def group_summary(rebalances_df: DataFrame, lag_df: DataFrame, commits_df: DataFrame, statuses: DataFrame,
                  txns: DataFrame, outages_df: DataFrame, deleted: DataFrame) -> DataFrame:
    """One row per group: its status, type, generations, members now, crashes and clean leaves, lag,
    commits, transactions, the longest outage. A group deleted since its last generation has none."""
    last = Window.partitionBy("group_id").orderBy(F.col("generation").desc())
    live = (rebalances_df.join(deleted, "group_id", "left")
            .withColumn("member_count", F.when(F.col("deleted_at") > F.max("offsets_log_offset").over(
                Window.partitionBy("group_id")), F.lit(0)).otherwise(F.col("member_count"))))
    gens = (live.withColumn("_n", F.row_number().over(last))
            .groupBy("group_id")
            .agg(F.max(F.when(F.col("_n") == 1, F.col("group_type"))).alias("group_type"),
                 F.count(F.lit(1)).alias("generations"),
                 F.max(F.when(F.col("_n") == 1, F.col("generation"))).alias("generation_now"),
                 F.min("time").alias("first_seen"), F.max("time").alias("last_generation_time"),
                 F.max(F.when(F.col("_n") == 1, F.col("member_count"))).alias("members_now"),
                 F.sum(F.when(F.col("ending") == "crash or hang", 1).otherwise(0)).alias("crashes"),
                 F.sum(F.when(F.col("ending").isin("clean leave", "clean stop"), 1).otherwise(0)).alias("clean_leaves"),
                 F.max(F.when(F.col("_n") == 1, F.col("reason"))).alias("last_reason")))
    lag_sum = lag_df.groupBy("group_id").agg(F.sum("lag").alias("total_lag"), F.count(F.lit(1)).alias("partitions"),
                                             F.max("last_commit_time").alias("last_commit_time"))
    commit_sum = commits_df.groupBy("group_id").agg(F.sum("commits").alias("commits"))
    sev = F.create_map(*[x for k, v in SEVERITY.items() for x in (F.lit(k), F.lit(v))])
    worst = (statuses.withColumn("_sev", sev[F.col("status")])
             .groupBy("group_id").agg(F.max_by("status", "_sev").alias("_pstatus"), F.max_by("why", "_sev").alias("_why")))
    longest = outages_df.groupBy("group_id").agg(F.max("seconds").alias("longest_outage_s"))
    joined = (gens.join(lag_sum, "group_id", "full_outer").join(commit_sum, "group_id", "full_outer")
              .join(worst, "group_id", "left").join(txns, "group_id", "left").join(longest, "group_id", "left"))
    lag_now = F.coalesce(F.col("total_lag"), F.lit(0))
    no_members = F.coalesce(F.col("members_now"), F.lit(0)) == 0
    status = (F.when(no_members & (lag_now > 0), "stopped").when(no_members, "empty")
              .otherwise(F.coalesce("_pstatus", F.lit("ok"))))
    why = (F.when(no_members & (lag_now > 0), F.format_string("no members, lag %d", lag_now))
           .when(no_members, F.lit("no members, nothing behind")).otherwise(F.col("_why")))
    return (joined.select(
        "group_id", F.coalesce("group_type", F.lit("classic")).alias("group_type"), status.alias("status"),
        why.alias("status_reason"), "generations", "generation_now", "members_now", "crashes", "clean_leaves",
        "last_reason", "partitions", "total_lag", F.coalesce("commits", F.lit(0)).alias("commits"),
        F.coalesce("transactions_committed", F.lit(0)).alias("transactions_committed"),
        F.coalesce("transactions_aborted", F.lit(0)).alias("transactions_aborted"),
        "longest_outage_s", "first_seen", "last_generation_time", "last_commit_time")
        .orderBy("group_id"))
