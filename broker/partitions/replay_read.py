"""Reading a coordinator's own partition from its log start, as its replay does.

The coordinators replay their internal partitions (`__consumer_offsets`, `__transaction_state`,
`__share_group_state`) from the log start to the end the log had when the read began, oldest first.
A damaged batch (the log's CRC check fails) costs what it held, not the partition nor the broker's
start: it is handed to the caller, who reports it, and the read goes on from where the log says the
next good batch starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ...protocol.errors import CorruptRecordError
from ...protocol.record_batch import decode_batches, iter_batches
from ..storage.api import Isolation, PartitionStore

READ_CHUNK = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size

# on_damaged(offset the read failed at, the log's end when the read began, the error) -> the offset to
# go on from; at or before the failed offset ends the read.
OnDamaged = Callable[[int, int, CorruptRecordError], int]


def chunks(store: PartitionStore, on_damaged: OnDamaged) -> Iterator[tuple[int, bytes]]:
    """(offset it was read from, whole batches) of the store, oldest first; each step reads from disk."""
    offset, end = store.log_start_offset, store.log_end_offset
    while offset < end:
        try:
            chunk = bytes(store.read(offset, READ_CHUNK, Isolation.LOG_END))  # CRC-checked by the log
        except CorruptRecordError as exc:
            resume = on_damaged(offset, end, exc)
            if resume <= offset:
                break
            offset = resume
            continue
        if not chunk:
            break
        next_offset = max([offset] + [header.next_offset for _, header in iter_batches(chunk)])
        yield offset, chunk
        if next_offset <= offset:
            break
        offset = next_offset


def keyed_records(store: PartitionStore, on_damaged: OnDamaged) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record with a key in the store's data batches (control batches
    are the transaction markers, not a coordinator's records)."""
    for offset, chunk in chunks(store, on_damaged):
        for header, records in decode_batches(chunk):
            if header.is_control:
                continue
            for r in records:
                if r.offset >= offset and r.key is not None:
                    yield r.offset, r.key, r.value
