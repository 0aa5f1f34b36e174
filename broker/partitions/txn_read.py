"""What a fetch may return of a partition under each isolation level (Kafka's FetchIsolation), and the
shape of one partition's read.

read_uncommitted: whole batches up to the high watermark. read_committed: whole batches that start
below the last stable offset (a batch never straddles it: the LSO is the first offset of an open
transaction's first batch, or the high watermark), plus the aborted transactions overlapping the
returned range, which the client uses to drop aborted records. Either way the answer reports the LSO.
The store cuts the records at the bound (broker/storage/api.py, `Isolation`); this module adds the
aborted transactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol import record_batch as rb

if TYPE_CHECKING:
    from ...protocol.messages.fetch_response import AbortedTransaction
    from ..storage.api import PartitionStore


class PartitionRead:
    """One partition's read (the fetch handler turns it into PartitionData; fetch sessions compare
    its high watermark and log start with what they sent last)."""

    __slots__ = ("error_code", "high_watermark", "log_start_offset", "records", "last_stable_offset", "aborted")

    def __init__(self, error_code: int, high_watermark: int, log_start_offset: int,
                 records: bytes | memoryview = b"", last_stable_offset: int = -1,
                 aborted: list[AbortedTransaction] | None = None) -> None:
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.records = records  # a view of the segment bytes read, when big
        self.last_stable_offset = last_stable_offset
        self.aborted = aborted  # None under read_uncommitted (null in the response)


def aborted_in(store: PartitionStore, fetch_offset: int, records: bytes | memoryview) -> list[AbortedTransaction]:
    """The aborted transactions overlapping what a read_committed fetch from `fetch_offset` returns
    (Kafka's collectAbortedTransactions). Without any aborted one the walk over the batches is skipped."""
    if not store.has_aborted_transactions():
        return []
    from ...protocol.messages.fetch_response import AbortedTransaction  # with the first Fetch, not at start-up

    upper = fetch_offset
    for _, header in rb.iter_batches(records):
        upper = header.next_offset
    return [AbortedTransaction(pid, first) for pid, first in store.aborted_transactions(fetch_offset, upper)]
