"""Compaction of the partitions a node leads over PostgreSQL (issue 44), for `cleanup.policy` containing
"compact" (`__consumer_offsets` and `__transaction_state` among them).

The rules are the segment engine's (broker/storage/log/compaction.py, whose functions this reuses over
the stored batches instead of a segment's): a key's newest value is found over every committed batch;
the cleanable batches are the committed ones from the log start up to the first younger than
`min.compaction.lag.ms` and below the first unstable offset (txn_cleaning.py); in them a record goes when
its key has a newer value, when it is a tombstone older than `delete.retention.ms`, or when its
transaction aborted; a marker goes once its transaction has no record left and it is older than
`delete.retention.ms`. A batch whose records all stay is kept as it is; the others are re-encoded with
the survivors (base offset = the first survivor, last offset kept) or go.

Only the leader compacts, with the segment engine's cadence and knobs (broker/storage/log/cleaner.py):
every `log.cleaner.backoff.ms` (a dynamic broker config; a change wakes it), each partition whose
cleanable bytes are dirtier than `min.cleanable.dirty.ratio`, or whose oldest dirty batch is older than
`max.compaction.lag.ms`, is compacted (`cleaned_to`: where the last run's cleanable part ended, kept in
the database's `partitions.cleaned_to` by the round that stores the run's rewrites, so a new leader
does not find the whole partition dirty: Kafka's cleaner-offset-checkpoint). The
decoding runs in a worker thread on a
snapshot of the batches; back on the loop, the batches that are still there are replaced in memory and
queued for the node's next round, which replaces their rows (the old rows deleted, the new ones
inserted) in its transaction under the same fence as appends (log.py): a deposed leader's rewrite is
refused there, and a failed round takes the partition offline, to be opened again from the database
(which then still holds the uncompacted batches).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Sequence

import structlog

from ....protocol import record_batch as rb
from ....protocol.errors import KafkaError
from ..log.compaction import _newest_offsets, _rewrite_batch, _survivors
from ..log.txn_cleaning import TxnCleaning, removable_markers

if TYPE_CHECKING:
    from .store import Pending, PostgresPartitionStore

log = structlog.get_logger("kbroker.storage.postgres")


class _Batches:
    """Committed batches walked as compaction.py walks a segment: `pos` is a batch's index."""

    def __init__(self, batches: list[tuple[int, bytes]]) -> None:
        self.data = [data for _, data in batches]

    def iter_headers(self) -> Iterator[tuple[int, rb.BatchHeader]]:
        for index, data in enumerate(self.data):
            yield index, rb.read_header(data)

    def read_at(self, pos: int, _size: int) -> bytes:
        return self.data[pos]


@dataclass(slots=True)
class Rewrite:
    """What one run changes: per batch that changed, its base offset, its bytes as read, and the batch
    replacing it (None: it goes)."""

    changes: list[tuple[int, bytes, Pending | None]] = field(default_factory=list)
    markers: set[int] = field(default_factory=set)  # offsets of the markers removed
    records_before: int = 0
    records_after: int = 0


def _cleanable(batches: list[tuple[int, bytes]], txn: TxnCleaning, lag_ms: int, now_ms: int) -> int:
    """How many batches from the first are cleanable."""
    count = 0
    for _, data in batches:
        header = rb.read_header(data)
        if (txn.limit is not None and header.next_offset > txn.limit) or \
                (lag_ms > 0 and header.max_timestamp > now_ms - lag_ms):
            break
        count += 1
    return count


def clean(batches: list[tuple[int, bytes]], cleanable: int, horizon_ms: int, txn: TxnCleaning) -> Rewrite:
    """The heavy part (worker thread): it only reads `batches`, a snapshot."""
    view = _Batches(batches)
    newest = _newest_offsets([view], txn)  # type: ignore[list-item]  # walked as a segment
    limit = rb.read_header(batches[cleanable - 1][1]).next_offset
    if txn.limit is not None:
        limit = min(limit, txn.limit)
    out = Rewrite()
    out.markers = removable_markers([view], lambda h, rs: bool(_survivors(rs, h, newest, horizon_ms, txn)),
                                    horizon_ms, limit)
    for base, data in batches[:cleanable]:
        header = rb.read_header(data)
        if header.is_control:
            if header.base_offset in out.markers:
                out.changes.append((base, data, None))
            continue
        try:
            _, records = rb.decode_batch(data)
        except KafkaError:
            continue  # damaged: kept byte for byte, never half-cleaned
        survivors = _survivors(records, header, newest, horizon_ms, txn)
        out.records_before += len(records)
        out.records_after += len(survivors)
        if len(survivors) == len(records):
            continue
        if not survivors:
            out.changes.append((base, data, None))
            continue
        new = _rewrite_batch(data, header, survivors)
        out.changes.append((base, data, (survivors[0].offset, header.last_offset, rb.read_header(new), new)))
    return out


def dirtiness(store: PostgresPartitionStore, now_ms: int) -> tuple[float, bool]:
    """(the share of the cleanable bytes not cleaned yet, whether max.compaction.lag.ms forces a run),
    as broker/storage/log/cleaner.py measures a segment log (Kafka's LogCleanerManager)."""
    state = store.producer_state
    batches = store.committed_batches()
    cleanable = _cleanable(batches, TxnCleaning(state.first_unstable_offset(), []),
                           store.config.min_compaction_lag_ms, now_ms)
    clean = dirty = 0
    oldest_dirty = -1
    for _, data in batches[:cleanable]:
        header = rb.read_header(data)
        if header.next_offset <= store.cleaned_to:
            clean += len(data)
            continue
        if oldest_dirty < 0:
            oldest_dirty = header.base_timestamp
        dirty += len(data)
    total = clean + dirty
    forced = dirty > 0 and 0 <= oldest_dirty and now_ms - oldest_dirty > store.config.max_compaction_lag_ms
    return (dirty / total if total else 0.0), forced


def needs_cleaning(store: PostgresPartitionStore, now_ms: int) -> bool:
    if not store.config.compact or store.closed or store.offline is not None:
        return False
    if not store.resident:  # made compact after it opened with a tail only: once read back whole (engine.py)
        return False
    ratio, forced = dirtiness(store, now_ms)
    if ratio > store.config.min_cleanable_dirty_ratio or forced:
        return True
    # a tombstone or marker past delete.retention.ms since the last run: a clean log still has work
    last = store.last_compaction
    return last is not None and ratio == 0.0 and now_ms - last[1] >= store.config.delete_retention_ms


async def compact_store(store: PostgresPartitionStore, now_ms: int) -> int:
    """One compaction run of a partition this node leads; returns how many batches changed."""
    config = store.config
    if not config.compact or store.closed or store.offline is not None or not store.resident:
        return 0
    fingerprint = (store.log_start_offset, store.high_watermark)
    last = store.last_compaction
    if last is not None and last[0] == fingerprint and now_ms - last[1] < config.delete_retention_ms:
        return 0  # nothing appended or trimmed, and no tombstone aged out since the last run
    batches = store.committed_batches()
    state = store.producer_state
    txn = TxnCleaning(state.first_unstable_offset(), list(state.aborted))
    cleanable = _cleanable(batches, txn, config.min_compaction_lag_ms, now_ms)
    if not cleanable:
        return 0
    horizon_ms = now_ms - config.delete_retention_ms
    rewrite = await asyncio.to_thread(clean, batches, cleanable, horizon_ms, txn)
    store.last_compaction = (fingerprint, now_ms)
    if store.closed or store.offline is not None:
        return 0
    dirty_from = store.cleaned_to
    applied = store.apply_rewrite([(base, data, new) for base, data, new in rewrite.changes])
    store.cleaned(rb.read_header(batches[cleanable - 1][1]).next_offset)  # stored in the same round
    if rewrite.markers:  # a removed abort marker's entry must not be reported to fetches any more
        state.aborted = [a for a in state.aborted if a[2] not in rewrite.markers]
    # every run, as Kafka's cleaner logs each log it cleaned with its dirty section
    log.info("partition_compacted", topic=store.topic, partition=store.partition, dirty_from=dirty_from,
             cleaned_to=store.cleaned_to, batches_changed=applied, records_before=rewrite.records_before,
             records_after=rewrite.records_after)
    return applied


def still_there(bases: Sequence[int], data: list[bytes | None], base: int, old: bytes) -> int | None:
    """The index of the batch at `base` if it is still the one read (not trimmed away meanwhile)."""
    i = bisect_left(bases, base)
    return i if i < len(bases) and bases[i] == base and data[i] is old else None
