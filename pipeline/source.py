"""The Spark data sources: `kbroker-log` (a data directory) and `kbroker-wire` (a running broker).

    spark.dataSource.register(KbrokerLogDataSource)
    spark.read.format("kbroker-log").option("view", "records").load("./data")

`kbroker-log` plans its input partitions on the driver (logdir.plan_slices: big segments cut into
slices, small ones packed together, about 64 MiB each) and decodes them on the executors into Arrow
record batches. The location is a path or any URI storage.py reads. Options:
  view     records (default) | batches | consumer_offsets  (schemas in schemas.py)
  topics   comma-separated topic names to read (default: all; consumer_offsets reads only its topic)
  since    epoch ms or ISO 8601: skip batches whose max timestamp is older, and older records (records view)
  task_bytes  the bytes of segment a task reads (default 64 MiB)

`kbroker-wire` reads a topic from a live broker over the Kafka protocol (see wire.py), one input
partition per log partition, between the earliest and the latest offset at planning time. As a stream
(`spark.readStream.format("kbroker-wire")`) each micro-batch reads from where the previous one stopped
to the latest offsets. Options: bootstrap (HOST:PORT[,...], required), topic (default
__consumer_offsets), view (consumer_offsets when the topic is __consumer_offsets, else records).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from . import decode, schemas, wire
from .logdir import (
    OFFSETS_TOPIC,
    TARGET_TASK_BYTES,
    SegmentFile,
    SegmentSlice,
    list_segments,
    parse_topics_option,
    plan_slices,
    topic_names_by_id,
)


def parse_time(value: str | int | None) -> int | None:
    """Epoch milliseconds from an int, digits, or an ISO 8601 time (naive means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"cannot read {value!r} as a time: use ISO 8601 (2024-05-01T12:00:00Z) or epoch "
                         f"milliseconds") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def _view(options: Any, default: str) -> str:
    view = (options.get("view") or default).lower()
    if view not in schemas.VIEWS:
        raise ValueError(f"unknown view {view!r}: expected one of {', '.join(schemas.VIEWS)}")
    return view


# --- kbroker-log --------------------------------------------------------------------------------------


class KbrokerLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kbroker-log"

    def schema(self) -> StructType:
        return schemas.VIEWS[_view(self.options, "records")]

    def reader(self, schema: StructType) -> DataSourceReader:
        return KbrokerLogReader(dict(self.options), schema)


class KbrokerLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        path = options.get("path") or options.get("data_dir")
        if not path:
            raise ValueError("kbroker-log needs the data directory: .load(PATH) or .option('path', PATH)")
        self.path = path
        self.view = _view(options, "records")
        self.topics = {OFFSETS_TOPIC} if self.view == "consumer_offsets" else parse_topics_option(options.get("topics"))
        self.since_ms = parse_time(options.get("since"))
        self.task_bytes = int(options.get("task_bytes") or TARGET_TASK_BYTES)
        self.schema = schema
        # KIP-848 records name topics by id: the names, read once on the driver, travel with the reader
        self.topic_names = topic_names_by_id(path) if self.view == "consumer_offsets" else {}

    def partitions(self) -> list[InputPartition]:
        segments = list_segments(self.path, self.topics)
        return [InputPartition(task) for task in plan_slices(segments, self.task_bytes)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task: list[SegmentSlice] = partition.value
        arrow_schema = schemas.arrow_schema(self.schema)
        for part in task:
            if self.view == "records":
                yield from decode.record_batches(part, arrow_schema, since_ms=self.since_ms)
            elif self.view == "batches":
                yield from decode.rows_to_batches(decode.batch_rows(part), arrow_schema)
            else:
                yield from decode.rows_to_batches(
                    decode.consumer_offsets_rows(part, topic_names=self.topic_names), arrow_schema)


# --- kbroker-wire -------------------------------------------------------------------------------------


class KbrokerWireDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kbroker-wire"

    def _settings(self) -> tuple[str, str, str]:
        bootstrap = self.options.get("bootstrap") or self.options.get("path")
        if not bootstrap:
            raise ValueError("kbroker-wire needs .option('bootstrap', 'HOST:PORT')")
        topic = self.options.get("topic") or OFFSETS_TOPIC
        view = _view(self.options, "consumer_offsets" if topic == OFFSETS_TOPIC else "records")
        if view == "batches":
            raise ValueError("kbroker-wire serves the records and consumer_offsets views")
        return bootstrap, topic, view

    def schema(self) -> StructType:
        return schemas.VIEWS[self._settings()[2]]

    def reader(self, schema: StructType) -> DataSourceReader:
        return KbrokerWireReader(*self._settings(), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KbrokerWireStreamReader(*self._settings(), schema)


def _wire_partitions(bootstrap: str, topic: str, start: dict[int, int] | None, end: dict[int, int]):
    """Planned on the driver: which partition, from which leader, between which offsets (read on the
    executors); for __consumer_offsets, the topic names by id too (KIP-848 records carry ids)."""
    with wire.connect_any(bootstrap) as conn:
        leaders = wire.partition_leaders(conn, topic)
        names = wire.topic_names(conn) if topic == OFFSETS_TOPIC else {}
    first = start if start is not None else wire.offsets_by_leader(bootstrap, topic, wire.EARLIEST)
    out = []
    for leader in leaders:
        lo, hi = first.get(leader.partition, 0), end.get(leader.partition, 0)
        if hi > lo:
            out.append(InputPartition((leader, lo, hi, names)))
    return out


def _read_wire(view: str, schema: StructType,
               value: tuple[wire.PartitionLeader, int, int, dict[str, str]]) -> Iterator[pa.RecordBatch]:
    leader, start, end, names = value
    arrow_schema = schemas.arrow_schema(schema)
    batches = wire.fetch_range(leader.host, leader.port, leader.topic, leader.partition, start, end)
    if view == "consumer_offsets":
        rows = decode.consumer_offsets_from_batches(leader.partition, batches, names)
        yield from decode.rows_to_batches(rows, arrow_schema)
        return
    segment = SegmentFile(leader.topic, leader.partition, start, f"{leader.host}:{leader.port}", 0, True)
    yield from decode.records_to_arrow(segment, arrow_schema, batches)


class KbrokerWireReader(DataSourceReader):
    def __init__(self, bootstrap: str, topic: str, view: str, schema: StructType) -> None:
        self.bootstrap, self.topic, self.view, self.schema = bootstrap, topic, view, schema

    def partitions(self) -> list[InputPartition]:
        latest = wire.offsets_by_leader(self.bootstrap, self.topic, wire.LATEST)
        return _wire_partitions(self.bootstrap, self.topic, None, latest)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read_wire(self.view, self.schema, partition.value)


class KbrokerWireStreamReader(DataSourceStreamReader):
    """Offsets are {"<partition>": next offset}; each micro-batch reads up to the latest offsets."""

    def __init__(self, bootstrap: str, topic: str, view: str, schema: StructType) -> None:
        self.bootstrap, self.topic, self.view, self.schema = bootstrap, topic, view, schema

    def initialOffset(self) -> dict:
        earliest = wire.offsets_by_leader(self.bootstrap, self.topic, wire.EARLIEST)
        return {str(p): o for p, o in earliest.items()}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        latest = wire.offsets_by_leader(self.bootstrap, self.topic, wire.LATEST)
        return {str(p): o for p, o in latest.items()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        lo = {int(p): o for p, o in start.items()}
        hi = {int(p): o for p, o in end.items()}
        return _wire_partitions(self.bootstrap, self.topic, lo, hi)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read_wire(self.view, self.schema, partition.value)


def register(spark: Any) -> None:
    """Register both sources with a session (once: re-registering makes Spark warn)."""
    if getattr(spark, "_kbroker_sources_registered", False):
        return
    spark.dataSource.register(KbrokerLogDataSource)
    spark.dataSource.register(KbrokerWireDataSource)
    spark._kbroker_sources_registered = True
