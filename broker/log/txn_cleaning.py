"""What compaction must respect of transactions (Kafka's LogCleaner does the same):

* nothing at or past the first unstable offset is cleanable, and it never counts as a key's newest
  value: an open transaction may still abort, and its value must not have replaced the committed one;
* records of aborted transactions are removed, and never count as a key's newest value.

The transaction facts come from the partition's producer state (broker/producer_state.py), which
attaches itself to the log as `plog.txn_state`; a log without one has no transactions to respect.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any


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


def for_log(plog: Any) -> TxnCleaning | None:
    state = getattr(plog, "txn_state", None)
    if state is None or (not state.ongoing and not state.aborted):
        return None
    return TxnCleaning(state.first_unstable_offset(), list(state.aborted))


def cleanable_below_limit(plog: Any, indexes: list[int], txn: TxnCleaning | None) -> list[int]:
    """The cleanable segments that lie wholly below the first unstable offset."""
    if txn is None or txn.limit is None:
        return indexes
    out = []
    for i in indexes:
        if plog.segments[i].next_offset > txn.limit:
            break
        out.append(i)
    return out
