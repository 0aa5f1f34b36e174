"""A partition's batches as its leader over PostgreSQL knows them (issue 44): the index of the whole log
in memory, the bytes of its tail only (memory.py says how much), older batches through the read cache.

Per batch, oldest first: base offset, last offset, size, largest timestamp (what reads, retention and
ListOffsets by timestamp need without the bytes), and the bytes themselves or None. Bytes are held
from `tail_from` on (every index below it has None): the newest committed batches within the tail
budget, and every batch not committed yet. A partition whose log the node replays or compacts
(`resident`: coordinators' internal topics, `cleanup.policy=compact`) keeps every batch's bytes, as
before: compaction and the coordinators' replays walk the whole log synchronously.

Pure (no database, no event loop); store.py drives it and tests/unit/test_postgres_memory.py tests it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any

from .memory import ReadCache, TailBudget

if TYPE_CHECKING:
    from ..log.config import LogConfig

# (base offset, last offset, size, largest timestamp, bytes or None)
IndexEntry = tuple[int, int, int, int, "bytes | None"]
# Partitions a coordinator replays synchronously at its load (broker/partitions/replay_read.py)
REPLAYED = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def kept_whole(topic: str, config: LogConfig) -> bool:
    """Whether a partition keeps every batch's bytes in memory: compacted (compaction walks every key)
    or replayed by a coordinator."""
    return config.compact or topic in REPLAYED


class StoredBatches:
    def __init__(self, cache_key: Any, entries: list[IndexEntry], *, resident: bool, budget: TailBudget,
                 cache: ReadCache) -> None:
        self.cache_key = cache_key  # the partition's part of its batches' keys in the read cache
        self.resident = resident
        self.budget = budget
        self.cache = cache
        # 8 bytes a number (a list of ints costs 36): the index of a log of a million batches is 40 MB
        self.bases = array("q", (e[0] for e in entries))
        self.lasts = array("q", (e[1] for e in entries))
        self.sizes = array("q", (e[2] for e in entries))
        self.max_timestamps = array("q", (e[3] for e in entries))
        self.data: list[bytes | None] = [e[4] for e in entries]
        self.size = sum(self.sizes)
        # the bytes held are a suffix: every batch from the first whose bytes (and all after) are here
        self.tail_from = len(entries)
        while self.tail_from > 0 and self.data[self.tail_from - 1] is not None:
            self.tail_from -= 1
        for i in range(self.tail_from):
            self.data[i] = None  # a control batch read whole at the open, below the tail
        self.tail_bytes = sum(self.sizes[self.tail_from:])
        if resident and self.tail_from:
            raise ValueError("a resident partition needs every batch's bytes")
        if not resident:
            budget.partitions += 1
        self._counted = not resident
        self.holding = False  # being read back whole (its topic became compact): the tail is not trimmed

    def __len__(self) -> int:
        return len(self.bases)

    def let_go(self, committed_end: int) -> None:
        """No longer kept whole (its topic's cleanup.policy left compact): a tail from now on."""
        self.holding = False
        if self.resident:
            self.resident = False
            self.budget.partitions += 1
            self._counted = True
            self.trim(committed_end)

    def below_tail(self, max_bytes: int) -> tuple[int, int] | None:
        """The (first, last) base offsets of the newest batches below the tail, up to `max_bytes` (one
        at least): the next span to read back into memory. None: none left."""
        last = self.tail_from - 1
        if last < 0:
            return None
        first, size = last, self.sizes[last]
        while first > 0 and size + self.sizes[first - 1] <= max_bytes:
            first -= 1
            size += self.sizes[first]
        return self.bases[first], self.bases[last]

    def hold(self, rows: list[tuple[int, bytes]]) -> None:
        """Batches read back, newest first, held as the tail's oldest where the index still has them as
        they were; once every batch is held, the partition is kept whole (resident)."""
        for base, data in sorted(rows, reverse=True):
            i = self.tail_from - 1
            if i < 0 or self.bases[i] != base or self.sizes[i] != len(data):
                break
            self.data[i] = data
            self.tail_from = i
            self.tail_bytes += len(data)
        if self.tail_from == 0:
            self.holding = False
            if not self.resident:
                self.resident = True
                self.release()

    def release(self) -> None:
        """The store closed: its share of the node's budget goes back, its cached batches go."""
        if self._counted:
            self.budget.partitions -= 1
            self._counted = False
            self.cache.drop_partition(self.cache_key)

    def first_holding(self, offset: int) -> int:
        """The index of the first batch that holds `offset` or later."""
        return bisect_right(self.lasts, offset - 1)

    def count_below(self, offset: int) -> int:
        """How many batches start below `offset`."""
        return bisect_left(self.bases, offset)

    def batch(self, i: int) -> bytes | None:
        """The bytes of batch `i`: held, or cached from an earlier read (None: to be read)."""
        data = self.data[i]
        if data is None:
            data = self.cache.get((self.cache_key, self.bases[i]))
        return data

    def append(self, base: int, last: int, max_timestamp: int, data: bytes) -> None:
        self.bases.append(base)
        self.lasts.append(last)
        self.sizes.append(len(data))
        self.max_timestamps.append(max_timestamp)
        self.data.append(data)
        self.size += len(data)
        self.tail_bytes += len(data)

    def trim(self, committed_end: int) -> int:
        """Let go of the oldest held bytes of committed batches past the tail budget (nothing for a
        resident partition); returns how many batches were let go."""
        if self.resident or self.holding:
            return 0
        limit = self.budget.per_partition()
        committed = self.count_below(committed_end)
        start = self.tail_from
        while self.tail_bytes > limit and self.tail_from < committed:
            self.tail_bytes -= self.sizes[self.tail_from]
            self.data[self.tail_from] = None
            self.tail_from += 1
        return self.tail_from - start

    def drop_first(self, count: int) -> None:
        """The first `count` batches are gone (the log start passed them)."""
        if count <= 0:
            return
        held = sum(self.sizes[self.tail_from:count]) if count > self.tail_from else 0
        self.size -= sum(self.sizes[:count])
        self.tail_bytes -= held
        del self.bases[:count], self.lasts[:count], self.sizes[:count], self.max_timestamps[:count], self.data[:count]
        self.tail_from = max(0, self.tail_from - count)

    def drop_from(self, index: int) -> None:
        """Every batch from `index` on is gone (uncommitted appends dropped: always held)."""
        for i in range(index, len(self.bases)):
            self.size -= self.sizes[i]
            if i >= self.tail_from:
                self.tail_bytes -= self.sizes[i]
        del self.bases[index:], self.lasts[index:], self.sizes[index:], self.max_timestamps[index:], \
            self.data[index:]
        self.tail_from = min(self.tail_from, len(self.bases))

    def replace(self, i: int, new: tuple[int, int, int, bytes] | None) -> None:
        """Compaction's rewrite of batch `i` (held: compaction runs on resident partitions only):
        new = (base, last, largest timestamp, bytes), None to remove it."""
        self.size -= self.sizes[i]
        self.tail_bytes -= self.sizes[i]
        if new is None:
            del self.bases[i], self.lasts[i], self.sizes[i], self.max_timestamps[i], self.data[i]
            return
        base, last, max_timestamp, data = new
        self.bases[i], self.lasts[i], self.sizes[i], self.max_timestamps[i], self.data[i] = \
            base, last, len(data), max_timestamp, data
        self.size += len(data)
        self.tail_bytes += len(data)

    def to_read(self, i: int, max_bytes: int, upto: int) -> tuple[int, int] | None:
        """The (first, last) base offsets to read from the database for a read from batch `i` of up to
        `max_bytes` (one batch at least) below offset `upto`: the span of those batches neither held nor
        cached, None when every one is here."""
        first = last = None
        size = 0
        j = i
        while j < self.tail_from and self.bases[j] < upto and (size < max_bytes or j == i):
            if (self.cache_key, self.bases[j]) not in self.cache:
                first = self.bases[j] if first is None else first
                last = self.bases[j]
            size += self.sizes[j]
            j += 1
        return None if first is None or last is None else (first, last)

    def cache_read(self, rows: list[tuple[int, bytes]]) -> None:
        """Batches read from the database: cached where the index still has them as they were."""
        for base, data in rows:
            i = bisect_left(self.bases, base)
            if i < len(self.bases) and self.bases[i] == base and self.sizes[i] == len(data) and i < self.tail_from:
                self.cache.put((self.cache_key, base), data)
