"""What compaction must respect of transactions (Kafka's LogCleaner does the same):

* nothing at or past the first unstable offset is cleanable, and it never counts as a key's newest
  value: an open transaction may still abort, and its value must not have replaced the committed one;
* records of aborted transactions are removed, and never count as a key's newest value;
* a commit or abort marker is removed once no record of its transaction is left and the marker is
  older than delete.retention.ms (so a consumer part-way through the transaction still sees it); the
  aborted-transaction index forgets a removed abort marker's entry with it.

The transaction facts come from the partition's producer state (broker/storage/producer_state.py), which
attaches itself to the log as `plog.txn_state`; a log without one has no transactions to respect.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable

from ....protocol import record_batch as rb
from ....protocol.errors import KafkaError


class TxnCleaning:
    def __init__(self, first_unstable: int | None, aborted: list[tuple[int, int, int]]) -> None:
        self.limit = first_unstable  # offsets >= limit are not cleanable
        self._by_producer: dict[int, tuple[list[int], list[int]]] = {}
        for pid, first, last in sorted(aborted, key=lambda a: a[1]):
            firsts, lasts = self._by_producer.setdefault(pid, ([], []))
            firsts.append(first)
            lasts.append(last)

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        ranges = self._by_producer.get(producer_id)
        if ranges is None:
            return False
        i = bisect_right(ranges[0], offset) - 1
        return i >= 0 and offset <= ranges[1][i]

    def counts(self, producer_id: int, offset: int) -> bool:
        """May this record be a key's newest value?"""
        return (self.limit is None or offset < self.limit) and not self.is_aborted(producer_id, offset)


def removable_markers(segments: Any, survives: Callable[[rb.BatchHeader, list[rb.Record]], bool],
                      horizon_ms: int, limit: int | None) -> set[int]:
    """Offsets of markers whose transaction has no surviving record, older than `horizon_ms`.

    `segments` is every segment in order; `survives(header, records)` says whether any record of a
    data batch outlives this compaction. A transaction's records precede its marker, so one pass in
    offset order, per producer, sees them all before the marker that ends them."""
    alive: dict[int, bool] = {}
    out: set[int] = set()
    for segment in segments:
        for pos, header in segment.iter_headers():
            if header.producer_id < 0 or not header.is_transactional:
                continue
            if limit is not None and header.base_offset >= limit:
                return out
            if header.is_control:
                if not alive.pop(header.producer_id, False) and header.max_timestamp < horizon_ms:
                    out.add(header.base_offset)
                continue
            if not alive.get(header.producer_id):
                try:
                    _, records = rb.decode_batch(segment.read_at(pos, header.size))
                except KafkaError:  # damaged: what it held is unknowable, so its marker stays
                    alive[header.producer_id] = True
                    continue
                if survives(header, records):
                    alive[header.producer_id] = True
    return out


def forget_markers(plog: Any, offsets: set[int]) -> None:
    """Drop the aborted-index entries of removed abort markers: a fetch must not report them, or a
    client would drop that producer's later records until its next marker. The snapshot is rewritten
    at once, so a crash cannot bring the forgotten entries back from an older one."""
    state = getattr(plog, "txn_state", None)
    if state is not None and offsets:
        kept = [a for a in state.aborted if a[2] not in offsets]
        if len(kept) != len(state.aborted):
            state.aborted = kept
            state.write_snapshot(state.snapshot_offset(plog.log_end_offset))


def for_log(plog: Any) -> TxnCleaning:
    state = getattr(plog, "txn_state", None)
    if state is None:
        return TxnCleaning(None, [])
    return TxnCleaning(state.first_unstable_offset(), list(state.aborted))


def cleanable_below_limit(segments: list, txn: TxnCleaning) -> list:
    """The cleanable segments (oldest first) that lie wholly below the first unstable offset."""
    if txn.limit is None:
        return segments
    out = []
    for segment in segments:
        if segment.next_offset > txn.limit:
            break
        out.append(segment)
    return out
