"""Spark schemas of the data source views, built without a JVM (executors and the driver share them)."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in fields])  # type: ignore[arg-type]


HEADER = _struct(("key", StringType()), ("value", BinaryType()))

# view=records: what a consumer would see, one row per record.
RECORDS = _struct(
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("offset", LongType()),
    ("timestamp", TimestampType()),
    ("key", BinaryType()),
    ("value", BinaryType()),
    ("headers", ArrayType(HEADER, True)),
)

# view=batches: one row per record batch (headers only, CRC checked) plus one row per problem found.
BATCHES = _struct(
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("segment", StringType()),
    ("segment_base_offset", LongType()),
    ("position", LongType()),
    ("base_offset", LongType()),
    ("last_offset", LongType()),
    ("records", IntegerType()),
    ("size_bytes", IntegerType()),
    ("compression", StringType()),
    ("log_append_time", BooleanType()),
    ("base_timestamp", TimestampType()),
    ("max_timestamp", TimestampType()),
    ("producer_id", LongType()),
    ("transactional", BooleanType()),
    ("control", BooleanType()),
    ("error_kind", StringType()),
    ("error", StringType()),
)

TOPIC_PARTITIONS = _struct(("topic", StringType()), ("partitions", ArrayType(IntegerType(), True)))

MEMBER = _struct(
    ("member_id", StringType()),
    ("group_instance_id", StringType()),
    ("client_id", StringType()),
    ("client_host", StringType()),
    ("rebalance_timeout_ms", IntegerType()),
    ("session_timeout_ms", IntegerType()),
    ("subscription", ArrayType(StringType(), True)),
    ("assignment", ArrayType(TOPIC_PARTITIONS, True)),
)

# view=consumer_offsets: `__consumer_offsets` decoded with the coordinator's record codec.
# record_type is offset_commit | offset_tombstone | group_metadata | group_tombstone, a consumer
# group's (KIP-848) record named after its class (consumer_group_metadata_record: generation is the
# group epoch; consumer_group_member_metadata_record: members holds the member;
# consumer_group_current_member_assignment_record: generation is the member epoch, assignment what it
# owns; ..._tombstone), txn_commit | txn_abort (a transaction marker: producer_id says whose),
# unknown (share and other record types) | undecodable. `transactional` records count only once a
# txn_commit of their producer follows them in the same log partition.
CONSUMER_OFFSETS = _struct(
    ("log_partition", IntegerType()),
    ("offset", LongType()),
    ("timestamp", TimestampType()),
    ("record_type", StringType()),
    ("group_id", StringType()),
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("committed_offset", LongType()),
    ("leader_epoch", IntegerType()),
    ("metadata", StringType()),
    ("commit_timestamp", TimestampType()),
    ("expire_timestamp", TimestampType()),
    ("generation", IntegerType()),
    ("protocol_type", StringType()),
    ("protocol", StringType()),
    ("leader", StringType()),
    ("state_timestamp", TimestampType()),
    ("members", ArrayType(MEMBER, True)),
    ("detail", StringType()),
    ("batch_offset", LongType()),
    ("producer_id", LongType()),
    ("transactional", BooleanType()),
    ("member_id", StringType()),
    ("assignment", ArrayType(TOPIC_PARTITIONS, True)),
)

VIEWS = {"records": RECORDS, "batches": BATCHES, "consumer_offsets": CONSUMER_OFFSETS}


def arrow_schema(schema: StructType):
    """The exact Arrow schema Spark checks a reader's batches against (timestamps in us, UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
