"""Segment files -> Arrow record batches, for the `kbroker-log` data source (no Spark imports here).

A task reads slices of segments (logdir.plan_slices) and hands rows on in Arrow batches of at most
ROWS_PER_ARROW_BATCH rows as it goes, so what it holds is bounded by that record budget (and one
decoded batch), whatever the size of the segments.

Record batches are decoded by `kbroker.protocol.record_batch.decode_batch` (every codec, CRC checked),
the same code the broker uses; this module only walks a segment defensively and lays the records out
in columns. Damage never stops a read: every problem becomes a `ScanIssue` naming the file, the byte
position and the batch's base offset, the bad batch is skipped when its length can be trusted, and
the rest of the segment is abandoned when it cannot (there is no way to find the next batch).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..protocol.records.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
)
from ..protocol.records.codec import UnknownRecordType, decode_record
from ..protocol.records.streams_records import StreamsRecord
from ..protocol.records.classic_records import (
    GroupMetadataRecord,
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
)
from ..protocol import codec
from ..protocol.control_records import COMMIT, control_type
from ..protocol.errors import KafkaError
from ..protocol import consumer_protocol
from ..protocol.record_batch import (
    COMPRESSION_NAMES,
    HEADER_SIZE,
    HEADER_STRUCT,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Record as LogRecord,
    compute_crc,
    decode_batch,
)

from . import storage
from .logdir import SegmentFile, SegmentSlice

ROWS_PER_ARROW_BATCH = 65536


@dataclass(frozen=True, slots=True)
class ScanIssue:
    path: str
    position: int
    base_offset: int | None
    kind: str  # truncated | bad_length | bad_magic | bad_crc | bad_records | unreadable
    message: str

    def describe(self) -> str:
        where = f"byte {self.position}"
        if self.base_offset is not None:
            where += f" (batch base offset {self.base_offset})"
        return f"{self.path}: {self.kind} at {where}: {self.message}"


def _slice(part: SegmentFile | SegmentSlice) -> SegmentSlice:
    return part if isinstance(part, SegmentSlice) else SegmentSlice(part, 0, part.size)


def walk_segment(
    reader: storage.RandomAccess, part: SegmentFile | SegmentSlice, report: Callable[[ScanIssue], None], *,
    check_crc: bool = True
) -> Iterator[tuple[int, Any, int, BatchHeader]]:
    """(position in the file, buffer, offset in the buffer, header) of every sound batch that starts
    in the slice; problems found there go to `report`. Batches before the slice are stepped over by
    their headers alone."""
    sl = _slice(part)
    segment = sl.segment
    n = reader.size
    pos = 0
    while pos < min(n, sl.end):
        mine = pos >= sl.start
        if n - pos < HEADER_SIZE:
            if mine:
                message = f"{n - pos} trailing bytes cannot hold a batch header"
                if segment.last_in_partition:
                    message += " (an append in flight or a torn write)"
                report(ScanIssue(segment.path, pos, None, "truncated", message))
            return
        hbuf, hoff = reader.read(pos, HEADER_SIZE)
        header = BatchHeader(*HEADER_STRUCT.unpack_from(hbuf, hoff))
        if header.batch_length < MIN_BATCH_LENGTH:
            if mine:
                report(ScanIssue(segment.path, pos, header.base_offset, "bad_length",
                                 f"batchLength {header.batch_length} is impossible; the rest of the file "
                                 f"({n - pos} bytes) is skipped"))
            return
        if pos + header.size > n:
            if mine:
                report(ScanIssue(segment.path, pos, header.base_offset, "truncated",
                                 f"batch of {header.size} bytes runs {pos + header.size - n} bytes past the end "
                                 f"of the file"))
            return
        if mine:
            if header.magic != 2:
                report(ScanIssue(segment.path, pos, header.base_offset, "bad_magic",
                                 f"magic {header.magic}, expected 2; batch of {header.size} bytes skipped"))
            else:
                buf, off = reader.read(pos, header.size)
                if check_crc and compute_crc(buf, off, header.size) != header.crc:
                    report(ScanIssue(segment.path, pos, header.base_offset, "bad_crc",
                                     f"CRC mismatch; batch of {header.size} bytes "
                                     f"({header.records_count} records) skipped"))
                else:
                    yield pos, buf, off, header
        pos += header.size


def _decoded_batches(reader: storage.RandomAccess, part: SegmentFile | SegmentSlice,
                     report: Callable[[ScanIssue], None], since_ms: int | None):
    sl = _slice(part)
    for pos, buf, off, header in walk_segment(reader, sl, report, check_crc=False):
        if since_ms is not None and header.max_timestamp < since_ms:
            continue
        try:
            yield decode_batch(buf, off)  # checks the CRC
        except KafkaError as exc:
            kind = "bad_crc" if "CRC" in str(exc) else "bad_records"
            report(ScanIssue(sl.segment.path, pos, header.base_offset, kind, f"{exc}; batch skipped"))


def _open(part: SegmentFile | SegmentSlice, report: Callable[[ScanIssue], None]) -> storage.RandomAccess | None:
    path = _slice(part).segment.path
    try:
        return storage.RandomAccess(path)
    except OSError as exc:
        report(ScanIssue(path, 0, None, "unreadable", str(exc)))
        return None


def print_issue(issue: ScanIssue) -> None:
    # Executors have no channel back to the driver but their log: the job's `batches` scan reports the
    # same issues on the driver, this keeps standalone readers of the records view informed too.
    import sys

    print(f"kbroker-log: {issue.describe()}", file=sys.stderr, flush=True)


# --- records view -------------------------------------------------------------------------------------


def _headers_array(header_lists: list[list[tuple[str, bytes | None]]], list_type: pa.DataType) -> pa.Array:
    offsets = [0]
    keys: list[str] = []
    values: list[bytes | None] = []
    total = 0
    for hs in header_lists:
        if hs:
            total += len(hs)
            for k, v in hs:
                keys.append(k)
                values.append(v)
        offsets.append(total)
    struct_type = list_type.value_type
    items = pa.StructArray.from_arrays(
        [pa.array(keys, struct_type.field(0).type), pa.array(values, struct_type.field(1).type)],
        fields=list(struct_type),
    )
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, type=list_type)


def _timestamps(ms: list[int], ts_type: pa.DataType) -> pa.Array:
    # Spark wants timestamp[us, tz=UTC]; Kafka timestamps are epoch milliseconds.
    return pc.multiply(pa.array(ms, pa.int64()), 1000).cast(ts_type)


def records_to_arrow(
    segment: SegmentFile,
    schema: pa.Schema,
    decoded: Iterable[tuple[BatchHeader, list[LogRecord]]],
    *,
    since_ms: int | None = None,
    rows_per_batch: int = ROWS_PER_ARROW_BATCH,
) -> Iterator[pa.RecordBatch]:
    """Decoded batches of one partition (a segment file, or a fetch) as Arrow batches of the records
    view's schema; control batches (transaction markers) are not data and are left out."""
    names = schema.names
    ts_type = schema.field("timestamp").type
    headers_type = schema.field("headers").type
    offsets: list[int] = []
    stamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []

    def flush() -> pa.RecordBatch:
        n = len(offsets)
        columns = {
            "topic": pa.array([segment.topic] * n, pa.string()),
            "partition": pa.array([segment.partition] * n, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": _timestamps(stamps, ts_type),
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "headers": _headers_array(headers, headers_type),
        }
        batch = pa.RecordBatch.from_arrays([columns[name] for name in names], schema=schema)
        for column in (offsets, stamps, keys, values, headers):
            column.clear()
        return batch

    for header, records in decoded:
        if header.is_control:
            continue
        if since_ms is not None:
            records = [r for r in records if r.timestamp >= since_ms]
        # one comprehension per column is much cheaper than five appends per record
        offsets += [r.offset for r in records]
        stamps += [r.timestamp for r in records]
        keys += [r.key for r in records]
        values += [r.value for r in records]
        headers += [r.headers for r in records]
        if len(offsets) >= rows_per_batch:
            yield flush()
    if offsets:
        yield flush()


def record_batches(
    part: SegmentFile | SegmentSlice,
    schema: pa.Schema,
    *,
    since_ms: int | None = None,
    report: Callable[[ScanIssue], None] = print_issue,
    rows_per_batch: int = ROWS_PER_ARROW_BATCH,
) -> Iterator[pa.RecordBatch]:
    """The records of one segment file (or slice of one) as Arrow batches of the records view's schema."""
    reader = _open(part, report)
    if reader is None:
        return
    with reader:
        decoded = _decoded_batches(reader, part, report, since_ms)
        yield from records_to_arrow(_slice(part).segment, schema, decoded, since_ms=since_ms,
                                    rows_per_batch=rows_per_batch)


# --- batches view -------------------------------------------------------------------------------------


def batch_rows(part: SegmentFile | SegmentSlice, *,
               report: Callable[[ScanIssue], None] | None = None) -> Iterator[dict[str, Any]]:
    """One row per batch of a segment or slice (headers only, CRC checked), plus one per problem found."""
    segment = _slice(part).segment
    base = {"topic": segment.topic, "partition": segment.partition, "segment": segment.path,
            "segment_base_offset": segment.base_offset}
    issues: list[ScanIssue] = []

    def on_issue(issue: ScanIssue) -> None:
        issues.append(issue)
        if report is not None:
            report(issue)

    def issue_rows() -> Iterator[dict[str, Any]]:
        for issue in issues:
            yield {**base, "position": issue.position, "base_offset": issue.base_offset,
                   "error_kind": issue.kind, "error": issue.describe()}
        issues.clear()

    reader = _open(part, on_issue)
    if reader is None:
        yield from issue_rows()
        return
    with reader:
        for pos, _, _, h in walk_segment(reader, part, on_issue):
            yield from issue_rows()
            yield {
                **base, "position": pos, "base_offset": h.base_offset, "last_offset": h.last_offset,
                "records": h.records_count, "size_bytes": h.size,
                "compression": COMPRESSION_NAMES.get(h.compression, str(h.compression)),
                "log_append_time": bool(h.timestamp_type), "base_timestamp": _ms(h.base_timestamp),
                "max_timestamp": _ms(h.max_timestamp), "producer_id": h.producer_id,
                "transactional": h.is_transactional, "control": h.is_control,
            }
    yield from issue_rows()


def _ms(value: int | None):
    """Epoch ms -> an aware datetime for Arrow/Spark; Kafka's -1 (no timestamp) -> None."""
    if value is None or value < 0:
        return None
    import datetime as dt

    return dt.datetime.fromtimestamp(value / 1000, tz=dt.timezone.utc)


# --- __consumer_offsets view ---------------------------------------------------------------------------


def decode_subscription(data: bytes | None) -> tuple[list[str] | None, list[tuple[str, list[int]]] | None]:
    """(topics, owned partitions) of a ConsumerProtocolSubscription; (None, None) when undecodable."""
    if not data or len(data) < 2:
        return None, None
    try:
        sub = consumer_protocol.decode_subscription(data)
        return list(sub.topics), [(tp.topic, list(tp.partitions)) for tp in sub.owned_partitions]
    except Exception:  # noqa: BLE001 - a foreign protocol's bytes are data, not an error
        return None, None


def decode_assignment(data: bytes | None) -> list[tuple[str, list[int]]] | None:
    if not data or len(data) < 2:
        return None
    try:
        return consumer_protocol.assigned_partitions(data)
    except Exception:  # noqa: BLE001
        return None


def _members(record: GroupMetadataRecord) -> list[dict[str, Any]]:
    consumer = record.protocol_type == "consumer"
    out = []
    for m in record.members:
        topics, _owned = decode_subscription(m.subscription) if consumer else (None, None)
        assignment = decode_assignment(m.assignment) if consumer else None
        out.append({
            "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout,
            "session_timeout_ms": m.session_timeout, "subscription": topics,
            "assignment": None if assignment is None else [{"topic": t, "partitions": p} for t, p in assignment],
        })
    return out


_CONSUMER_RECORD_NAME = re.compile(r"(?<!^)(?=[A-Z])")


def _topic_partitions(assignment: Any, topic_names: dict[str, str]) -> list[dict[str, Any]]:
    """A KIP-848 assignment ({topic id: partitions}) with topic names where the data directory has them."""
    return [{"topic": topic_names.get(str(tid), str(tid)), "partitions": sorted(ps)}
            for tid, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))]


# A streams group's records (KIP-1071), named as Kafka names their types (StreamsGroupMetadata, ...).
_STREAMS_RECORD_NAMES = {17: "streams_group_metadata", 19: "streams_group_member_metadata",
                         20: "streams_group_target_assignment_metadata", 21: "streams_group_target_assignment_member",
                         22: "streams_group_current_member_assignment", 23: "streams_group_topology"}


def _streams_fields(rec: StreamsRecord) -> dict[str, Any]:
    """A streams group record's row: its type (`_record`, or `_tombstone` for a null value, as the
    consumer group's are named), its member, and the epoch it carries as the generation (the group
    epoch, the assignment epoch, a member's epoch, the topology epoch)."""
    v = rec.value
    fields: dict[str, Any] = {
        "record_type": _STREAMS_RECORD_NAMES[rec.record_type] + ("_tombstone" if v is None else "_record"),
        "member_id": rec.member_id, "protocol_type": "streams"}
    if v is not None:
        for name in ("epoch", "assignment_epoch", "member_epoch"):
            if hasattr(v, name):
                fields["generation"] = getattr(v, name)
                break
        if rec.record_type == 19:
            fields["members"] = [{"member_id": rec.member_id, "group_instance_id": v.instance_id,
                                  "client_id": v.client_id, "client_host": v.client_host,
                                  "rebalance_timeout_ms": v.rebalance_timeout_ms, "session_timeout_ms": None,
                                  "subscription": None, "assignment": None}]
    return fields


def consumer_offsets_row(log_partition: int, r: LogRecord, header: BatchHeader | None = None,
                         topic_names: dict[str, str] | None = None) -> dict[str, Any]:
    """One `__consumer_offsets` record, decoded with the coordinator's own record codec. The batch
    header says which request wrote it (`batch_offset`) and whether a transaction did (`producer_id`,
    `transactional`: such a record counts only once its producer's COMMIT marker follows)."""
    row: dict[str, Any] = {"log_partition": log_partition, "offset": r.offset, "timestamp": _ms(r.timestamp),
                           "batch_offset": None if header is None else header.base_offset,
                           "producer_id": None if header is None else header.producer_id,
                           "transactional": None if header is None else header.is_transactional}
    try:
        rec = decode_record(r.key, r.value)
    except UnknownRecordType as exc:
        row.update(record_type="unknown", detail=str(exc))
        return row
    except Exception as exc:  # noqa: BLE001 - one undecodable record must not hide the rest
        row.update(record_type="undecodable", detail=f"{type(exc).__name__}: {exc}")
        return row
    row["group_id"] = rec.group
    if isinstance(rec, OffsetCommitRecord):
        row.update(record_type="offset_commit", topic=rec.topic, partition=rec.partition,
                   committed_offset=rec.offset, leader_epoch=rec.leader_epoch, metadata=rec.metadata,
                   commit_timestamp=_ms(rec.commit_timestamp), expire_timestamp=_ms(rec.expire_timestamp))
    elif isinstance(rec, OffsetCommitTombstone):
        row.update(record_type="offset_tombstone", topic=rec.topic, partition=rec.partition)
    elif isinstance(rec, GroupMetadataRecord):
        row.update(record_type="group_metadata", generation=rec.generation, protocol_type=rec.protocol_type,
                   protocol=rec.protocol, leader=rec.leader, state_timestamp=_ms(rec.current_state_timestamp),
                   members=_members(rec))
    elif isinstance(rec, GroupMetadataTombstone):
        row.update(record_type="group_tombstone")
    elif isinstance(rec, StreamsRecord):
        row.update(_streams_fields(rec))
    else:  # a consumer group (KIP-848) record: consumer_group_metadata_record, ..._tombstone, ...
        row["record_type"] = _CONSUMER_RECORD_NAME.sub("_", type(rec).__name__).lower()
        names = topic_names or {}
        if isinstance(rec, ConsumerGroupMetadataRecord):
            row.update(generation=rec.epoch, protocol_type="consumer")
        elif isinstance(rec, ConsumerGroupMemberMetadataRecord):
            row.update(member_id=rec.member_id, members=[{
                "member_id": rec.member_id, "group_instance_id": rec.instance_id, "client_id": rec.client_id,
                "client_host": rec.client_host, "rebalance_timeout_ms": rec.rebalance_timeout_ms,
                "session_timeout_ms": None, "subscription": list(rec.subscribed_topic_names), "assignment": None}])
        elif isinstance(rec, ConsumerGroupCurrentMemberAssignmentRecord):
            row.update(member_id=rec.member_id, generation=rec.member_epoch,
                       assignment=_topic_partitions(rec.assigned_partitions, names))
        elif isinstance(rec, ConsumerGroupTargetAssignmentMemberRecord):
            row.update(member_id=rec.member_id, assignment=_topic_partitions(rec.partitions, names))
        elif isinstance(rec, ConsumerGroupTargetAssignmentMetadataRecord):
            row.update(generation=rec.assignment_epoch)
        else:
            row["member_id"] = getattr(rec, "member_id", None)
    return row


def consumer_offsets_rows(
    part: SegmentFile | SegmentSlice, *, report: Callable[[ScanIssue], None] = print_issue,
    topic_names: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """One row per `__consumer_offsets` record of a segment file or slice, and one per transaction
    marker (record_type txn_commit or txn_abort, with the producer id)."""
    sl = _slice(part)
    reader = _open(sl, report)
    if reader is None:
        return
    with reader:
        def undecodable(header: BatchHeader, r: LogRecord, detail: str) -> None:
            report(ScanIssue(sl.segment.path, -1, header.base_offset, "bad_records",
                             f"record at offset {r.offset} does not decode: {detail}"))

        yield from consumer_offsets_from_batches(sl.segment.partition, _decoded_batches(reader, sl, report, None),
                                                 topic_names, undecodable)


def consumer_offsets_from_batches(
    log_partition: int, decoded: Iterable[tuple[BatchHeader, list[LogRecord]]],
    topic_names: dict[str, str] | None = None,
    undecodable: Callable[[BatchHeader, LogRecord, str], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows of decoded `__consumer_offsets` batches (from a file or a fetch), markers included."""
    for header, records in decoded:
        if header.is_control:
            kind = control_type(records[0].key) if records else None
            if kind is not None:
                yield {"log_partition": log_partition, "offset": header.base_offset,
                       "timestamp": _ms(header.max_timestamp), "batch_offset": header.base_offset,
                       "producer_id": header.producer_id, "transactional": True,
                       "record_type": "txn_commit" if kind == COMMIT else "txn_abort"}
            continue
        for r in records:
            row = consumer_offsets_row(log_partition, r, header, topic_names)
            if row["record_type"] == "undecodable" and undecodable is not None:
                undecodable(header, r, row["detail"])
            yield row


def rows_to_batches(rows: Iterable[dict[str, Any]], schema: pa.Schema,
                    rows_per_batch: int = ROWS_PER_ARROW_BATCH) -> Iterator[pa.RecordBatch]:
    """Rows as Arrow batches of at most `rows_per_batch` rows, taken from `rows` as they come."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= rows_per_batch:
            yield pa.RecordBatch.from_pylist(chunk, schema=schema)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)
