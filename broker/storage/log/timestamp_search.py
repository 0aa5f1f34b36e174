"""A ListOffsets search by timestamp inside one batch, and when it is too costly for the event loop.

Finding the first record at or after a timestamp walks the records of the batch the time index
leads to, in Python: about 2 us a record on the slow host, so a batch of nine million 7-byte
records (90 KiB of gzip, any client may produce it) held every client for about 20 s. A batch of
more records than what is left of the request's allowance for walking on the loop (one
validation.InlineBudget per request, as for Produce's checks: batches whose headers claim a
timestamp their records do not hold are walked in vain, one after another), or compressed and
larger than INLINE_COMPRESSED_BYTES (inflating may cost more than its size says), comes back from
the log as a `BatchToWalk`, which the handler walks on the `offset-search` worker. Pure: bytes in,
an answer out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....protocol.record_batch import COMPRESSION_NONE, BatchHeader
from ....protocol.record_framing import record_times
from .validation import InlineBudget

INLINE_COMPRESSED_BYTES = 256 * 1024


def walk_inline(header: BatchHeader, budget: InlineBudget | None) -> bool:
    """Whether the batch is walked on the loop, spending `budget` (None: walk whatever it costs)."""
    if budget is None:
        return True
    if header.records_count > budget.records or (
            header.compression != COMPRESSION_NONE and header.size > INLINE_COMPRESSED_BYTES):
        return False
    budget.records -= header.records_count
    return True


def first_at_or_after(batch: bytes, timestamp: int, start_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the batch's first record at or after `timestamp` with an offset of at
    least `start_offset`; None if it has none. CORRUPT_MESSAGE (KafkaError) for a damaged batch."""
    for offset, record_timestamp in record_times(batch):
        if offset >= start_offset and record_timestamp >= timestamp:
            return offset, record_timestamp
    return None


def first_at(batch: bytes, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the batch's first record at exactly `timestamp`; None if it has none."""
    for offset, record_timestamp in record_times(batch):
        if record_timestamp == timestamp:
            return offset, record_timestamp
    return None


@dataclass(frozen=True, slots=True)
class BatchToWalk:
    """A batch a search must walk off the loop: its bytes as read, what is looked for, and what the
    search does when no record of it qualifies (a header's max timestamp is the producer's word)."""

    batch: bytes
    timestamp: int
    start_offset: int
    resume_offset: int | None = None  # a timestamp search goes on from this offset
    otherwise: tuple[int, int] | None = None  # the max-timestamp search answers this
    exact: bool = False  # the max-timestamp search: the first record at exactly `timestamp`

    def walk(self) -> tuple[int, int] | None:
        if self.exact:
            return first_at(self.batch, self.timestamp)
        return first_at_or_after(self.batch, self.timestamp, self.start_offset)
