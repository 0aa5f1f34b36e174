"""What a fetch may return of a partition under each isolation level (Kafka's FetchIsolation).

read_uncommitted: everything up to the high watermark. read_committed: whole batches that start
below the last stable offset (a batch never straddles it: the LSO is the first offset of an open
transaction's first batch, or the high watermark), plus the aborted transactions overlapping the
returned range, which the client uses to drop aborted records. Either way the answer reports the LSO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...protocol import record_batch as rb
from ...protocol.messages.fetch_response import AbortedTransaction

if TYPE_CHECKING:
    from ..services import BrokerServices


@dataclass(slots=True)
class TxnFetchInfo:
    last_stable_offset: int
    aborted: list[AbortedTransaction] | None  # None under read_uncommitted (null in the response)


def trim_to_offset(records: bytes | memoryview, limit: int) -> bytes | memoryview:
    """The leading whole batches of `records` whose base offset is below `limit`."""
    end = 0
    for pos, header in rb.iter_batches(records):
        if header.base_offset >= limit:
            break
        end = pos + header.size
    return records[:end]


def committed_view(broker: BrokerServices, plog: Any, fetch_offset: int, records: bytes | memoryview,
                   read_committed: bool) -> tuple[bytes | memoryview, TxnFetchInfo]:
    state = broker.producer_states.for_log(plog)
    lso = state.last_stable_offset(plog.high_watermark)
    if not read_committed:
        return records, TxnFetchInfo(lso, None)
    if fetch_offset >= lso:
        return b"", TxnFetchInfo(lso, [])
    # Without an open transaction the LSO is the log end, which no stored batch reaches, and without
    # an aborted one there is nothing to list: both walks over the batches are then skipped.
    if lso < plog.log_end_offset:
        records = trim_to_offset(records, lso)
    if not state.aborted:
        return records, TxnFetchInfo(lso, [])
    upper = fetch_offset
    for _, header in rb.iter_batches(records):
        upper = header.next_offset
    aborted = [AbortedTransaction(pid, first) for pid, first in state.aborted_between(fetch_offset, upper)]
    return records, TxnFetchInfo(lso, aborted)
