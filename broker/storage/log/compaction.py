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
* The heavy part (decoding every record, writing the cleaned segments and their indexes as
  `<base>.{log,index,timeindex}.cleaned`, fsyncing them) runs in a worker thread under the log's
  maintenance lock, so the event loop keeps answering heartbeats and fetches. The swap runs on the
  loop, where the single writer lives: a cleaned segment replaces the one it was built from only if
  that very segment object is still in the log (retention or a topic deletion may have removed it
  meanwhile). Appends touch only the active segment, which compaction never rewrites.
* Swap: delete the old indexes, rename the cleaned log over `<base>.log`, rename the indexes, then
  fsync the directory (in a thread). After a crash either the old or the new log is in place; a
  missing index, or one that does not match the log, makes the load recover the segment; stray
  `.cleaned` files are deleted at load.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from ....protocol import record_batch as rb
from ....protocol.errors import KafkaError

from .files import fsync_dir
from .segment import LogSegment
from .throttler import Throttler
from .txn_cleaning import TxnCleaning, cleanable_below_limit, forget_markers, removable_markers
from .txn_cleaning import for_log as txn_cleaning_for

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class CompactionStats:
    throttled_ms: int = 0  # slept by the I/O throttle (log.cleaner.io.max.bytes.per.second)
    segments_rewritten: int = 0
    segments_removed: int = 0
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


@dataclass(slots=True)
class _Plan:
    """What one compaction run works on: a snapshot taken on the loop, processed in a thread."""

    segments: list[LogSegment]  # every segment at planning time, the active one last
    cleanable: list[LogSegment]
    horizon_ms: int
    index_interval_bytes: int
    txn: TxnCleaning  # read from the producer state on the loop, used read-only by the thread
    log_end_offset: int  # at planning time: records that came during the run leave the log dirty
    stats: CompactionStats = field(default_factory=CompactionStats)
    markers: set[int] = field(default_factory=set)  # control batches to drop (their transaction is gone)
    cleaned: list[tuple[LogSegment, LogSegment]] = field(default_factory=list)  # (old, its replacement)
    throttle: Callable[[int], None] = lambda _nbytes: None  # bytes read or written (throttler.py)


def cleanable_segments(plog: PartitionLog, now_ms: int) -> list[LogSegment]:
    """The inactive segments, oldest first, up to the first holding a record younger than
    min.compaction.lag.ms."""
    lag = plog.config.min_compaction_lag_ms
    out = []
    for segment in plog.segments[:-1]:
        if lag > 0 and segment.max_timestamp > now_ms - lag:
            break
        out.append(segment)
    return out


def _fingerprint(plog: PartitionLog) -> object:
    return plog.log_end_offset, tuple((s.base_offset, s.size) for s in plog.segments[:-1])


def _plan(plog: PartitionLog, now_ms: int) -> _Plan | None:
    if not plog.config.compact:
        return None
    txn = txn_cleaning_for(plog)
    cleanable = cleanable_below_limit(cleanable_segments(plog, now_ms), txn)
    if not cleanable:
        return None
    # A rerun can only change something if the log grew, segments changed, or tombstones aged out.
    last = plog.last_compaction
    if last is not None and last[0] == _fingerprint(plog) and now_ms - last[1] < plog.config.delete_retention_ms:
        return None
    return _Plan(list(plog.segments), cleanable, now_ms - plog.config.delete_retention_ms,
                 plog.config.index_interval_bytes, txn, plog.log_end_offset)


def _newest_offsets(segments: list[LogSegment], txn: TxnCleaning,
                    throttle: Callable[[int], None] | None = None) -> dict[bytes, int]:
    newest: dict[bytes, int] = {}
    for segment in segments:
        if throttle is not None:  # (PostgreSQL's compaction walks views that have no size)
            throttle(segment.size)
        for pos, header in segment.iter_headers():
            if header.is_control:
                continue
            try:
                _, records = rb.decode_batch(segment.read_at(pos, header.size))
            except KafkaError:
                continue  # rot: its keys are unknowable; _clean_segment keeps the batch as it is
            for record in records:
                if record.key is not None and txn.counts(header.producer_id, record.offset):
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


def _survivors(records: list[rb.Record], header: rb.BatchHeader, newest: dict[bytes, int],
               tombstone_horizon_ms: int, txn: TxnCleaning) -> list[rb.Record]:
    return [
        r
        for r in records
        if r.key is not None
        and newest.get(r.key) == r.offset
        and not (r.value is None and r.timestamp < tombstone_horizon_ms)
        and not txn.is_aborted(header.producer_id, r.offset)
    ]


def _clean_segment(
    segment: LogSegment, newest: dict[bytes, int], tombstone_horizon_ms: int, stats: CompactionStats,
    txn: TxnCleaning, drop_markers: set[int] | frozenset[int] = frozenset(),
) -> bytearray | None:
    """The segment's cleaned bytes, or None when nothing would change."""
    out = bytearray()
    changed = False
    end = 0
    for pos, header in segment.iter_headers():
        end = pos + header.size
        raw = segment.read_at(pos, header.size)
        if header.is_control:
            if header.base_offset in drop_markers:
                changed = True
            else:
                out += raw
            continue
        try:
            _, records = rb.decode_batch(raw)
        except KafkaError:
            out += raw  # damaged: kept byte for byte (reads answer CORRUPT_MESSAGE), never half-cleaned
            continue
        survivors = _survivors(records, header, newest, tombstone_horizon_ms, txn)
        stats.records_before += len(records)
        stats.records_after += len(survivors)
        if len(survivors) == len(records):
            out += raw
        else:
            changed = True
            if survivors:
                out += _rewrite_batch(raw, header, survivors)
    if end != segment.size:
        # The walk stopped at damage it cannot frame past: a rewrite would drop everything behind it.
        log.warning("compaction_skipped_damaged_segment", file=str(segment.log_path), position=end)
        return None
    return out if changed else None


def _build_cleaned(old: LogSegment, cleaned: bytearray, index_interval_bytes: int) -> LogSegment:
    """Write `<base>.*.cleaned` with the cleaned batches and their indexes, fsynced (worker thread)."""
    new = LogSegment(old.directory, old.base_offset, index_interval_bytes, suffix=".cleaned")
    if new.size:  # a leftover of an earlier failed run: start over
        new.delete()
        new = LogSegment(old.directory, old.base_offset, index_interval_bytes, suffix=".cleaned")
    batches = list(rb.iter_batches(cleaned))
    if batches:
        new.append(cleaned, batches)
    new.verified_size = 0  # it may carry a damaged batch over as it was: reads check CRCs again
    new.mark_inactive()
    new.sync(with_indexes=True)
    return new


def _run(plan: _Plan) -> _Plan:
    """The heavy part: safe in a worker thread (it only reads inactive segments and writes new files)."""
    newest = _newest_offsets(plan.segments, plan.txn, plan.throttle)
    last_cleanable = plan.cleanable[-1].next_offset
    limit = last_cleanable if plan.txn.limit is None else min(plan.txn.limit, last_cleanable)
    plan.markers = removable_markers(
        plan.segments, lambda h, rs: bool(_survivors(rs, h, newest, plan.horizon_ms, plan.txn)), plan.horizon_ms,
        limit)
    for segment in plan.cleanable:
        plan.throttle(segment.size)
        cleaned = _clean_segment(segment, newest, plan.horizon_ms, plan.stats, plan.txn, plan.markers)
        if cleaned is None:
            plan.stats.bytes_before += segment.size
            plan.stats.bytes_after += segment.size
            continue
        plan.throttle(len(cleaned))
        plan.cleaned.append((segment, _build_cleaned(segment, cleaned, plan.index_interval_bytes)))
    return plan


def _swap_in(plog: PartitionLog, old: LogSegment, new: LogSegment) -> bool:
    """On the loop: replace `old` by `new` if it is still part of the log."""
    index = next((i for i, s in enumerate(plog.segments) if s is old), None)
    if index is None or index == len(plog.segments) - 1:
        new.delete()  # removed (retention, truncation, deletion) while we worked
        return False
    # No directory fsync between the renames: should a crash persist the new indexes but not the new
    # log, the load's index sanity check (the last entry must name a batch that is there) catches it.
    old.delete_indexes_and_close()
    new.promote_log()
    new.promote_indexes()
    plog.replace_segment(index, new)
    return True


def _finish(plog: PartitionLog, plan: _Plan) -> CompactionStats:
    stats = plan.stats
    if plog.closed:  # closed or deleted while the thread worked
        for _, new in plan.cleaned:
            new.delete()
        return stats
    # where the next cleaning's dirty part starts (cleaner.py): the end of the last segment cleaned
    last = plan.segments.index(plan.cleanable[-1])
    plog.cleaned_to = max(plog.cleaned_to, plan.segments[last + 1].base_offset)
    for old, new in plan.cleaned:
        before = old.size
        if not _swap_in(plog, old, new):
            continue
        stats.segments_rewritten += 1
        stats.bytes_before += before
        stats.bytes_after += new.size
        log.info("segment_compacted", topic=plog.topic, partition=plog.partition, base_offset=old.base_offset,
                 bytes_before=before, bytes_after=new.size)
    forget_markers(plog, plan.markers)  # on the loop: it changes the producer state and its snapshot
    # Under steady overwrites of the same keys every rolled segment ends up empty; dropping them
    # keeps the file count bounded (Kafka merges small segments while cleaning instead).
    for i in range(len(plog.segments) - 2, 0, -1):
        if plog.segments[i].size == 0:
            plog.remove_emptied_segment(i)
            stats.segments_removed += 1
    # The memo of the log as this run left it, unless records came while it ran: the segments they
    # rolled were not in the plan, and a memo with them in it would skip their cleaning until the log
    # grew again (the cleaner stopped short of the active segment under load).
    plog.last_compaction = ((_fingerprint(plog), plan.horizon_ms + plog.config.delete_retention_ms)
                            if plog.log_end_offset == plan.log_end_offset else None)
    return stats


def compact(plog: PartitionLog, now_ms: int) -> CompactionStats:
    """Compact in the calling thread (tests, tools): plan, clean, swap."""
    plan = _plan(plog, now_ms)
    if plan is None:
        return CompactionStats()
    stats = _finish(plog, _run(plan))
    if stats.segments_rewritten:
        fsync_dir(plog.directory)
    return stats


async def compact_async(plog: PartitionLog, now_ms: int, throttler: Throttler | None = None) -> CompactionStats:
    """The broker's compaction: the cleaning in a worker thread (its I/O held to `throttler`'s rate),
    the swap back on the loop."""
    if plog.maintenance_lock.locked():
        return CompactionStats()  # replay or another run is reading the segments: next round
    async with plog.maintenance_lock:
        plan = _plan(plog, now_ms)
        if plan is None:
            return CompactionStats()
        if throttler is not None:
            plan.throttle = throttler.observe
            slept_before = throttler.slept_ms
        try:
            await asyncio.to_thread(_run, plan)
        except BaseException:
            for _, new in plan.cleaned:
                new.delete()
            raise
        stats = _finish(plog, plan)
        if throttler is not None:
            stats.throttled_ms = throttler.slept_ms - slept_before
        if stats.segments_rewritten:
            await asyncio.to_thread(fsync_dir, plog.directory)  # the renames' durability, off the loop
        return stats
