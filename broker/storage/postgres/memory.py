"""What a node over PostgreSQL keeps of its partitions' logs in memory (issue 44): a bounded tail per
partition and a bounded cache of older batches read back from the database.

A partition's leader keeps the index of its whole log (per batch: base and last offset, size, largest
timestamp; tens of bytes a batch) but the bytes of its newest batches only, the **tail**: at most
`--postgres-tail-bytes` per partition and `--postgres-memory-bytes` over every partition of the node
(each partition's share is the node's budget divided by the partitions it leads, never above the
per-partition one). Uncommitted batches stay whatever the budget: their round has yet to write them.

Reads below the tail go to the database (store.py's `prepare_read`, awaited by the fetch path before its
synchronous read) and land in the node's **read cache**: least recently used batches go first once the
cache holds `--postgres-read-cache-bytes`. Readers of the same range at once share one query
(`InFlight`).

Pure: no database, no event loop but the futures handed over; unit-tested in
tests/unit/test_postgres_memory.py.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable

# (the partition's key: its topic's id and its number, base offset): a batch, wherever it is cached
BatchKey = tuple[Hashable, int]

DEFAULT_TAIL_BYTES = 8 * 1024 * 1024
DEFAULT_MEMORY_BYTES = 256 * 1024 * 1024
DEFAULT_READ_CACHE_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class TailBudget:
    """The bytes a partition's tail may hold: `partition_bytes`, and `node_bytes` shared by the
    partitions the node keeps a tail of (`partitions`, counted by the stores as they open and close)."""

    partition_bytes: int = DEFAULT_TAIL_BYTES
    node_bytes: int = DEFAULT_MEMORY_BYTES
    partitions: int = 0

    def per_partition(self) -> int:
        return min(self.partition_bytes, self.node_bytes // max(1, self.partitions))


class ReadCache:
    """Batches read back from the database, least recently used first out once over `max_bytes`. A batch
    larger than the whole cache is not kept (its reader got it already)."""

    def __init__(self, max_bytes: int = DEFAULT_READ_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._batches: OrderedDict[BatchKey, bytes] = OrderedDict()
        self._of_partition: dict[Hashable, set[int]] = {}  # so a closed partition's go without a scan
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._batches)

    def __contains__(self, key: BatchKey) -> bool:
        return key in self._batches

    def get(self, key: BatchKey) -> bytes | None:
        data = self._batches.get(key)
        if data is None:
            self.misses += 1
            return None
        self._batches.move_to_end(key)
        self.hits += 1
        return data

    def put(self, key: BatchKey, data: bytes) -> None:
        self._remove(key)
        if len(data) > self.max_bytes:
            return
        self._batches[key] = data
        self._of_partition.setdefault(key[0], set()).add(key[1])
        self.bytes += len(data)
        while self.bytes > self.max_bytes:
            self._remove(next(iter(self._batches)))

    def _remove(self, key: BatchKey) -> None:
        old = self._batches.pop(key, None)
        if old is None:
            return
        self.bytes -= len(old)
        bases = self._of_partition[key[0]]
        bases.discard(key[1])
        if not bases:
            del self._of_partition[key[0]]

    def drop_partition(self, partition: Hashable) -> None:
        """Forget a partition's batches (its store closed: whoever opens it next reads afresh)."""
        for base in list(self._of_partition.get(partition, ())):
            self._remove((partition, base))


class InFlight:
    """One future per read under way: a second reader of the same range waits for the first's query."""

    def __init__(self) -> None:
        self._reads: dict[Hashable, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._reads)

    def get(self, key: Hashable) -> asyncio.Future[None] | None:
        return self._reads.get(key)

    def start(self, key: Hashable) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reads[key] = future
        return future

    def finish(self, key: Hashable, error: BaseException | None = None) -> None:
        future = self._reads.pop(key, None)
        if future is None or future.done():
            return
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
            future.exception()  # retrieved: a reader that gave up leaves no "never retrieved" warning
