"""Checks of the data path's APIs, every common version: Metadata, Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, DescribeProducers, DescribeTopicPartitions, DescribeLogDirs.

They read the topics the suite's setup made (`setup_topics`): dw-data (3 partitions; 3 records in
partition 0, 2 in partition 1, none in 2), dw-produce (one partition per Produce version, each written
by that version's check only), dw-delrec (records for DeleteRecords to delete, a partition per check
that deletes), dw-compact (cleanup.policy=compact), dw-scratch (what Produce's error checks send: a
broker that wrongly took such a batch would not move dw-data under the checks that read it).
"""

from __future__ import annotations

from typing import Any

from .craft import (
    DELETE_RECORDS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TOPIC_PARTITIONS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    BASE_TIMESTAMP,
    UNKNOWN_TOPIC_ID,
    batch,
    create_topic,
    make,
    produce,
    topic_id,
)
from .runner import Check, Session
from .versions import sweep

DATA, PRODUCED, DELREC, COMPACT, SCRATCH = "dw-data", "dw-produce", "dw-delrec", "dw-compact", "dw-scratch"
SHARED_TOPICS = (DATA, PRODUCED, DELREC, COMPACT, SCRATCH)


async def setup_topics(s: Session) -> None:
    await create_topic(s, DATA, 3)
    await create_topic(s, PRODUCED, 14)
    await create_topic(s, DELREC, 6)
    await create_topic(s, COMPACT, 1, configs={"cleanup.policy": "compact"})
    await create_topic(s, SCRATCH, 3)
    await produce(s, DATA, 0, "a", "b", "c")
    await produce(s, DATA, 1, "d", "e")
    for partition in range(6):
        await produce(s, DELREC, partition, "1", "2", "3", "4", "5")
    for name in SHARED_TOPICS:
        s.shared[f"topic_id:{name}"] = await topic_id(s, name)


def only_topics(*names: str, field: str = "topics", key: str = "name"):
    """A projection: of a list of every topic on the broker, the ones a check made or the setup did."""
    def project(plain: dict[str, Any]) -> dict[str, Any]:
        plain[field] = [t for t in plain[field] if t[key] in names]
        return plain
    return project


# --- Metadata -----------------------------------------------------------------------------------------

def _metadata_topics(v: int, *names: str) -> list[dict]:
    return [{"name": n} for n in names]


def metadata_checks() -> list[Check]:
    def named(s: Session, v: int) -> Any:
        return make(METADATA, topics=_metadata_topics(v, DATA), allow_auto_topic_creation=False)

    def every(s: Session, v: int) -> Any:
        return make(METADATA, topics=[] if v == 0 else None, allow_auto_topic_creation=False)

    def unknown(s: Session, v: int) -> Any:
        return make(METADATA, topics=[{"name": f"dw-nope-metadata-v{v}"}], allow_auto_topic_creation=False)

    def auto(s: Session, v: int) -> Any:
        return make(METADATA, topics=[{"name": f"dw-auto-metadata-v{v}"}], allow_auto_topic_creation=True)

    def invalid(s: Session, v: int) -> Any:
        return make(METADATA, topics=[{"name": "bad name!"}], allow_auto_topic_creation=True)

    def operations(s: Session, v: int) -> Any:
        return make(METADATA, topics=[{"name": DATA}], include_topic_authorized_operations=True,
                    include_cluster_authorized_operations=True)

    async def by_id(s: Session, v: int) -> Any:
        return make(METADATA, topics=[{"name": None, "topic_id": await topic_id(s, DATA)}])

    def unknown_id(s: Session, v: int) -> Any:
        return make(METADATA, topics=[{"name": None, "topic_id": UNKNOWN_TOPIC_ID}])

    return [
        *sweep(METADATA, "a named topic", named),
        *sweep(METADATA, "every topic", every, project=only_topics(DATA)),
        *sweep(METADATA, "unknown topic, no auto-creation", unknown, versions=range(4, 14)),
        *sweep(METADATA, "unknown topic, auto-created", auto),
        *sweep(METADATA, "invalid topic name", invalid),
        *sweep(METADATA, "authorized operations", operations, versions=range(8, 14)),
        *sweep(METADATA, "a topic by id", by_id, versions=range(10, 14)),
        *sweep(METADATA, "unknown topic id", unknown_id, versions=range(10, 14)),
    ]


# --- Produce --------------------------------------------------------------------------------------------

def _produce(v: int, topic: str, tid: Any, partition: int, records: bytes, acks: int = -1) -> Any:
    data = {"name": topic, "partition_data": [{"index": partition, "records": records}]}
    if v >= 13:
        data = {"topic_id": tid, "partition_data": data["partition_data"]}
    return make(PRODUCE, acks=acks, timeout_ms=30000, topic_data=[data])


def _corrupt(records: bytes) -> bytes:
    out = bytearray(records)
    out[-2] ^= 0xFF  # in the last record: the CRC no longer matches
    return bytes(out)


def produce_checks() -> list[Check]:
    async def written(s: Session, v: int) -> Any:
        return _produce(v, PRODUCED, await topic_id(s, PRODUCED), v, batch("x", "y"))

    def unknown(s: Session, v: int) -> Any:
        return _produce(v, f"dw-nope-produce-v{v}", UNKNOWN_TOPIC_ID, 0, batch("x"))

    async def bad_partition(s: Session, v: int) -> Any:
        return _produce(v, SCRATCH, await topic_id(s, SCRATCH), 99, batch("x"))

    async def bad_acks(s: Session, v: int) -> Any:
        return _produce(v, SCRATCH, await topic_id(s, SCRATCH), 2, batch("x"), acks=2)

    async def corrupt(s: Session, v: int) -> Any:
        return _produce(v, SCRATCH, await topic_id(s, SCRATCH), 2, _corrupt(batch("x")))

    async def keyless(s: Session, v: int) -> Any:
        return _produce(v, COMPACT, await topic_id(s, COMPACT), 0, batch("x", key=None))

    async def acks_zero(s: Session, v: int, topic: str) -> None:
        """acks=0: no answer. The next request's answer is the next frame (or the connection closes:
        Kafka closes it when an acks=0 produce fails, the only way it can tell the client)."""
        conn = await s.connect()
        tid = await topic_id(s, topic) if topic != "dw-nope" else UNKNOWN_TOPIC_ID
        await conn.send(PRODUCE, v, _produce(v, topic, tid, 2, batch("z"), acks=0))
        await s.call(METADATA, 4, make(METADATA, topics=[], allow_auto_topic_creation=False),
                     "the next request", conn=conn, project=lambda p: {"answered": True})

    return [
        *sweep(PRODUCE, "acks=-1 to a partition", written),
        *sweep(PRODUCE, "unknown topic", unknown),
        *sweep(PRODUCE, "partition out of range", bad_partition),
        *sweep(PRODUCE, "acks=2", bad_acks),
        *sweep(PRODUCE, "corrupt batch (CRC)", corrupt),
        *sweep(PRODUCE, "keyless record to a compacted topic", keyless),
        *sweep(PRODUCE, "acks=0", steps=lambda s, v: acks_zero(s, v, SCRATCH)),
        *sweep(PRODUCE, "acks=0 to an unknown topic", steps=lambda s, v: acks_zero(s, v, "dw-nope")),
    ]


# --- Fetch ----------------------------------------------------------------------------------------------

def _fetch(v: int, topic: str, tid: Any, partition: int, offset: int, **top: Any) -> Any:
    part = {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
    t = {"topic_id": tid, "partitions": [part]} if v >= 13 else {"topic": topic, "partitions": [part]}
    return make(FETCH, **{"max_wait_ms": 0, "min_bytes": 1, "topics": [t], **top})


def fetch_checks() -> list[Check]:
    def at(partition: int, offset: int, topic: str = DATA, **top: Any):
        async def build(s: Session, v: int) -> Any:
            tid = await topic_id(s, topic) if topic == DATA else UNKNOWN_TOPIC_ID
            return _fetch(v, topic, tid, partition, offset, **top)
        return build

    async def session(s: Session, v: int) -> None:
        full = await s.call(FETCH, v, _fetch(v, DATA, await topic_id(s, DATA), 0, 0, session_epoch=0),
                            "a new fetch session")
        if full is not None:
            await s.call(FETCH, v, make(FETCH, max_wait_ms=0, min_bytes=1, session_id=full.session_id,
                                        session_epoch=1, topics=[]), "an incremental fetch")

    return [
        *sweep(FETCH, "records from offset 0", at(0, 0)),
        *sweep(FETCH, "read_committed", at(1, 0, isolation_level=1)),
        *sweep(FETCH, "an empty partition", at(2, 0)),
        *sweep(FETCH, "offset out of range", at(0, 100)),
        *sweep(FETCH, "partition out of range", at(99, 0)),
        *sweep(FETCH, "unknown topic", at(0, 0, topic="dw-nope-fetch")),
        *sweep(FETCH, "fetch session", steps=session, versions=range(7, 19)),
        *sweep(FETCH, "unknown fetch session", at(0, 0, session_id=123456, session_epoch=3),
               versions=range(7, 19)),
    ]


# --- ListOffsets, OffsetForLeaderEpoch ------------------------------------------------------------------

def list_offsets_checks() -> list[Check]:
    def at(timestamp: int, topic: str = DATA, partition: int = 0, **part: Any):
        def build(s: Session, v: int) -> Any:
            return make(LIST_OFFSETS, replica_id=-1, timeout_ms=30000, topics=[{"name": topic, "partitions": [
                {"partition_index": partition, "timestamp": timestamp, "max_num_offsets": 1, **part}]}])
        return build

    return [
        *sweep(LIST_OFFSETS, "earliest", at(-2)),
        *sweep(LIST_OFFSETS, "latest", at(-1)),
        *sweep(LIST_OFFSETS, "by timestamp", at(BASE_TIMESTAMP + 1)),
        *sweep(LIST_OFFSETS, "a timestamp past the last record", at(BASE_TIMESTAMP + 60_000)),
        *sweep(LIST_OFFSETS, "max timestamp", at(-3), versions=range(7, 12)),
        *sweep(LIST_OFFSETS, "earliest local", at(-4), versions=range(8, 12)),
        *sweep(LIST_OFFSETS, "latest tiered", at(-5), versions=range(9, 12)),
        *sweep(LIST_OFFSETS, "earliest pending upload", at(-6), versions=range(11, 12)),
        *sweep(LIST_OFFSETS, "unknown topic", at(-1, topic="dw-nope-list-offsets")),
        *sweep(LIST_OFFSETS, "partition out of range", at(-1, partition=99)),
        *sweep(LIST_OFFSETS, "leader epoch from the future", at(-1, current_leader_epoch=5), versions=range(4, 12)),
    ]


def offset_for_leader_epoch_checks() -> list[Check]:
    def at(epoch: int, current: int = -1, topic: str = DATA, partition: int = 0):
        def build(s: Session, v: int) -> Any:
            return make(OFFSET_FOR_LEADER_EPOCH, replica_id=-1, topics=[{"topic": topic, "partitions": [
                {"partition": partition, "leader_epoch": epoch, "current_leader_epoch": current}]}])
        return build

    return [
        *sweep(OFFSET_FOR_LEADER_EPOCH, "epoch 0", at(0)),
        *sweep(OFFSET_FOR_LEADER_EPOCH, "an epoch past the leader's", at(7)),
        *sweep(OFFSET_FOR_LEADER_EPOCH, "current epoch from the future", at(0, current=5)),
        *sweep(OFFSET_FOR_LEADER_EPOCH, "unknown topic", at(0, topic="dw-nope-ofle")),
        *sweep(OFFSET_FOR_LEADER_EPOCH, "partition out of range", at(0, partition=99)),
    ]


# --- DeleteRecords, DescribeProducers, DescribeTopicPartitions, DescribeLogDirs -------------------------

def delete_records_checks() -> list[Check]:
    def up_to(offset: int, partition: int | None = None, topic: str = DELREC):
        def build(s: Session, v: int) -> Any:
            return make(DELETE_RECORDS, timeout_ms=30000, topics=[{"name": topic, "partitions": [
                {"partition_index": v if partition is None else partition, "offset": offset}]}])
        return build

    return [
        *sweep(DELETE_RECORDS, "before offset 2", up_to(2)),
        *sweep(DELETE_RECORDS, "up to the high watermark (-1)", lambda s, v: up_to(-1, 3 + v)(s, v)),
        *sweep(DELETE_RECORDS, "past the high watermark", up_to(100, 5)),
        *sweep(DELETE_RECORDS, "unknown topic", up_to(1, 0, "dw-nope-delrec")),
        *sweep(DELETE_RECORDS, "partition out of range", up_to(1, 99)),
    ]


def describe_checks() -> list[Check]:
    def producers(topic: str, *partitions: int):
        return lambda s, v: make(DESCRIBE_PRODUCERS, topics=[{"name": topic, "partition_indexes": list(partitions)}])

    def partitions(*names: str, limit: int = 2000, cursor: dict | None = None):
        return lambda s, v: make(DESCRIBE_TOPIC_PARTITIONS, topics=[{"name": n} for n in names],
                                 response_partition_limit=limit, cursor=cursor)

    def log_dirs(topics: list[dict] | None):
        return lambda s, v: make(DESCRIBE_LOG_DIRS, topics=topics)

    def own_partitions(plain: dict[str, Any]) -> dict[str, Any]:
        for d in plain["results"]:
            d["topics"] = [t for t in d["topics"] if t["name"] == DATA]
        return plain

    return [
        *sweep(DESCRIBE_PRODUCERS, "no producers", producers(DATA, 0, 1)),
        *sweep(DESCRIBE_PRODUCERS, "unknown topic", producers("dw-nope-producers", 0)),
        *sweep(DESCRIBE_PRODUCERS, "partition out of range", producers(DATA, 99)),
        *sweep(DESCRIBE_TOPIC_PARTITIONS, "a topic", partitions(DATA)),
        *sweep(DESCRIBE_TOPIC_PARTITIONS, "a partition limit", partitions(DATA, limit=2)),
        *sweep(DESCRIBE_TOPIC_PARTITIONS, "from a cursor", partitions(
            DATA, cursor={"topic_name": DATA, "partition_index": 1})),
        *sweep(DESCRIBE_TOPIC_PARTITIONS, "unknown topic", partitions("dw-nope-dtp")),
        *sweep(DESCRIBE_LOG_DIRS, "named partitions",
               log_dirs([{"topic": DATA, "partitions": [0, 1, 2]}])),
        *sweep(DESCRIBE_LOG_DIRS, "every partition", log_dirs(None), project=own_partitions),
        *sweep(DESCRIBE_LOG_DIRS, "unknown topic", log_dirs([{"topic": "dw-nope-logdirs", "partitions": [0]}])),
    ]


def checks() -> list[Check]:
    return [*metadata_checks(), *produce_checks(), *fetch_checks(), *list_offsets_checks(),
            *offset_for_leader_epoch_checks(), *delete_records_checks(), *describe_checks()]


SETUPS = [Check("setup: shared topics and records", setup_topics, table="setup")]
