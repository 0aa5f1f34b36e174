"""Log compaction for `cleanup.policy` containing "compact" (used by `__consumer_offsets`).

Simplified from Kafka's LogCleaner, for one node and moderate logs:
* The key -> newest-offset map is built over the whole log, active segment included, in memory.
* Only inactive segments are rewritten, oldest first, stopping at the first one younger than
  min.compaction.lag.ms. Each keeps its base offset (file name); batches whose records all survive are
  copied byte for byte; the others are re-encoded with the survivors, same codec and producer fields,
  base offset = first surviving offset and lastOffsetDelta stretched to the original last offset.
* A tombstone (null value) that is the newest for its key is dropped once its timestamp is older than
  delete.retention.ms (Kafka tracks a per-batch "delete horizon" instead; the record time is our proxy).
* Transactions (txn_cleaning.py): nothing from the first unstable offset on is cleaned or counts as
  newest, records of aborted transactions are removed, and markers whose transaction has no record
  left are removed after delete.retention.ms.
* Segments left empty (other than the first) are deleted, so steady overwrites of the same keys
  cannot grow the number of files without bound.
* Swap: write `<base>.log.cleaned` and fsync it, delete the old indexes, rename over `<base>.log`,
  fsync the directory, rebuild the indexes. After a crash either the old or the new log is in place
  and any missing index is rebuilt at load; a stray `.cleaned` file is deleted at load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from kbroker.protocol import record_batch as rb

from .segment import LogSegment, segment_file_name
from .txn_cleaning import TxnCleaning, cleanable_below_limit, forget_markers, removable_markers
from .txn_cleaning import for_log as txn_cleaning_for

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class CompactionStats:
    segments_rewritten: int = 0
    segments_removed: int = 0
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def _cleanable_segments(plog: PartitionLog, now_ms: int) -> list[int]:
    lag = plog.config.min_compaction_lag_ms
    indexes = []
    for i, segment in enumerate(plog.segments[:-1]):
        if lag > 0 and segment.max_timestamp > now_ms - lag:
            break
        indexes.append(i)
    return indexes


def _newest_offsets(plog: PartitionLog, txn: TxnCleaning | None = None) -> dict[bytes, int]:
    newest: dict[bytes, int] = {}
    for segment in plog.segments:
        for pos, header in segment.iter_headers():
            if header.is_control:
                continue
            _, records = rb.decode_batch(segment.read_at(pos, header.size))
            for record in records:
                if record.key is not None and (txn is None or txn.counts(header.producer_id, record.offset)):
                    newest[record.key] = record.offset
    return newest


def _rewrite_batch(raw: bytes, header: rb.BatchHeader, survivors: list[rb.Record]) -> bytes:
    first = survivors[0].offset
    base_sequence = header.base_sequence
    if header.producer_id >= 0 and base_sequence >= 0:
        base_sequence += first - header.base_offset  # the first survivor's own sequence number
    return rb.encode_batch(
        survivors,
        base_offset=first,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=base_sequence,
        timestamp_type=header.timestamp_type,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset - first,
    )


def _survivors(records: list[rb.Record], header: rb.BatchHeader, newest: dict[bytes, int], tombstone_horizon_ms: int,
               txn: TxnCleaning | None) -> list[rb.Record]:
    return [
        r
        for r in records
        if r.key is not None
        and newest.get(r.key) == r.offset
        and not (r.value is None and r.timestamp < tombstone_horizon_ms)
        and not (txn is not None and txn.is_aborted(header.producer_id, r.offset))
    ]


def _clean_segment(
    segment: LogSegment, newest: dict[bytes, int], tombstone_horizon_ms: int, stats: CompactionStats,
    txn: TxnCleaning | None = None, drop_markers: set[int] | frozenset[int] = frozenset(),
) -> bytearray | None:
    """The segment's cleaned bytes, or None when nothing would change."""
    out = bytearray()
    changed = False
    for pos, header in segment.iter_headers():
        raw = segment.read_at(pos, header.size)
        if header.is_control:
            if header.base_offset in drop_markers:
                changed = True
            else:
                out += raw
            continue
        _, records = rb.decode_batch(raw)
        survivors = _survivors(records, header, newest, tombstone_horizon_ms, txn)
        stats.records_before += len(records)
        stats.records_after += len(survivors)
        if len(survivors) == len(records):
            out += raw
        else:
            changed = True
            if survivors:
                out += _rewrite_batch(raw, header, survivors)
    return out if changed else None


def _swap_in(plog: PartitionLog, index: int, cleaned: bytes | bytearray) -> LogSegment:
    old = plog.segments[index]
    directory, base = old.directory, old.base_offset
    cleaned_path = directory / segment_file_name(base, ".log.cleaned")
    fd = os.open(cleaned_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(cleaned)
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    finally:
        os.close(fd)
    old.delete_indexes_and_close()
    os.replace(cleaned_path, old.log_path)
    from .partition_log import fsync_dir

    fsync_dir(directory)
    new, _ = LogSegment.open(directory, base, plog.config.index_interval_bytes, recover=False)
    new.mark_inactive()
    new.sync(with_indexes=True)
    plog.replace_segment(index, new)
    return new


def compact(plog: PartitionLog, now_ms: int) -> CompactionStats:
    stats = CompactionStats()
    if not plog.config.compact:
        return stats
    txn = txn_cleaning_for(plog)
    cleanable = cleanable_below_limit(plog, _cleanable_segments(plog, now_ms), txn)
    if not cleanable:
        return stats
    # A rerun can only change something if the log grew, segments changed, or tombstones aged out.
    fingerprint = (plog.log_end_offset, tuple((s.base_offset, s.size) for s in plog.segments[:-1]))
    last = plog.last_compaction
    if last is not None and last[0] == fingerprint and now_ms - last[1] < plog.config.delete_retention_ms:
        return stats
    newest = _newest_offsets(plog, txn)
    horizon = now_ms - plog.config.delete_retention_ms
    last_cleanable = plog.segments[cleanable[-1]].next_offset
    markers = removable_markers(
        plog.segments, lambda h, rs: bool(_survivors(rs, h, newest, horizon, txn)), horizon,
        last_cleanable if txn.limit is None else min(txn.limit, last_cleanable))
    for i in cleanable:
        segment = plog.segments[i]
        cleaned = _clean_segment(segment, newest, horizon, stats, txn, markers)
        if cleaned is None:
            stats.bytes_before += segment.size
            stats.bytes_after += segment.size
            continue
        before = segment.size
        _swap_in(plog, i, cleaned)
        stats.segments_rewritten += 1
        stats.bytes_before += before
        stats.bytes_after += len(cleaned)
        log.info(
            "segment_compacted",
            topic=plog.topic,
            partition=plog.partition,
            base_offset=segment.base_offset,
            bytes_before=before,
            bytes_after=len(cleaned),
        )
    forget_markers(plog, markers)
    # Under steady overwrites of the same keys every rolled segment ends up empty; dropping them
    # keeps the file count bounded (Kafka merges small segments while cleaning instead).
    for i in reversed(cleanable):
        if i > 0 and plog.segments[i].size == 0:
            plog.remove_emptied_segment(i)
            stats.segments_removed += 1
    plog.last_compaction = (
        (plog.log_end_offset, tuple((s.base_offset, s.size) for s in plog.segments[:-1])),
        now_ms,
    )
    return stats
