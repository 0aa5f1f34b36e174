"""What a node over PostgreSQL keeps of a partition's log in memory (broker/storage/postgres/memory.py and
batch_index.py): the read cache's eviction, the tail's budget, and which batches a read must fetch
(the database side is tests/integration/test_postgres_tail.py)."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.broker.storage.postgres.batch_index import StoredBatches
from kbroker.broker.storage.postgres.memory import InFlight, ReadCache, TailBudget

P = ("topic-id", 0)


def test_the_read_cache_lets_the_least_recently_used_go_first() -> None:
    cache = ReadCache(max_bytes=30)
    for base in (0, 1, 2):
        cache.put((P, base), bytes(10))
    assert cache.bytes == 30 and len(cache) == 3
    assert cache.get((P, 0)) is not None  # 0 is now the most recently used
    cache.put((P, 3), bytes(10))
    assert (P, 1) not in cache and (P, 0) in cache and (P, 2) in cache and (P, 3) in cache
    cache.put((P, 4), bytes(25))  # needs 25 of 30: 2, 0 and 3 go, oldest use first
    assert [k for k in [(P, 0), (P, 2), (P, 3), (P, 4)] if k in cache] == [(P, 4)] and cache.bytes == 25
    cache.put((P, 5), bytes(31))  # larger than the whole cache: not kept, nothing evicted for it
    assert (P, 5) not in cache and (P, 4) in cache
    cache.put((P, 4), bytes(5))  # replaced: counted once
    assert cache.bytes == 5
    assert cache.get((P, 9)) is None and cache.misses == 1
    cache.drop_partition(P)  # what eviction took is not dropped twice
    assert len(cache) == 0 and cache.bytes == 0


def test_the_read_cache_forgets_a_closed_partitions_batches_only() -> None:
    cache = ReadCache(max_bytes=100)
    other = ("other-id", 0)
    cache.put((P, 0), bytes(10))
    cache.put((other, 0), bytes(10))
    cache.drop_partition(P)
    assert (P, 0) not in cache and (other, 0) in cache and cache.bytes == 10


def test_a_partitions_share_of_the_node_budget() -> None:
    budget = TailBudget(partition_bytes=100, node_bytes=300)
    assert budget.per_partition() == 100
    budget.partitions = 6
    assert budget.per_partition() == 50


def batches(count: int, size: int, *, budget: TailBudget, cache: ReadCache, held: int | None = None) -> StoredBatches:
    """`count` batches of one record each and `size` bytes, the last `held` with their bytes."""
    held = count if held is None else held
    return StoredBatches(P, [(i, i, size, 1000 + i, bytes(size) if i >= count - held else None) for i in range(count)],
                         resident=False, budget=budget, cache=cache)


def test_the_tail_keeps_the_newest_committed_batches_within_the_budget() -> None:
    budget = TailBudget(partition_bytes=30, node_bytes=1000)
    cache = ReadCache(1000)
    log = batches(10, 10, budget=budget, cache=cache)
    assert budget.partitions == 1 and log.tail_from == 0 and log.tail_bytes == 100
    assert log.trim(committed_end=8) == 7  # the last two are not committed: held whatever the budget
    assert (log.tail_from, log.tail_bytes, log.size) == (7, 30, 100)
    assert log.batch(6) is None and log.batch(7) is not None
    log.append(10, 10, 2000, bytes(10))
    assert log.trim(committed_end=11) == 1 and log.tail_bytes == 30
    log.drop_first(log.first_holding(9))  # the log start moved to 9: 9 batches go, two of them held
    assert (len(log), log.bases[0], log.tail_from, log.tail_bytes, log.size) == (2, 9, 0, 20, 20)
    log.drop_from(1)  # batch 10 was not committed after all
    assert (len(log), log.tail_bytes, log.size) == (1, 10, 10)
    log.release()
    log.release()
    assert budget.partitions == 0


def test_a_read_below_the_tail_fetches_only_what_is_neither_held_nor_cached() -> None:
    budget = TailBudget(partition_bytes=1000, node_bytes=1000)
    cache = ReadCache(1000)
    log = batches(10, 10, budget=budget, cache=cache, held=3)  # 7, 8, 9 held
    assert log.tail_from == 7
    assert log.to_read(0, 35, upto=10) == (0, 3)  # 35 bytes from batch 0: 0..3
    assert log.to_read(0, 1, upto=10) == (0, 0)  # one batch at least
    assert log.to_read(5, 1000, upto=10) == (5, 6)  # up to the tail
    assert log.to_read(7, 1000, upto=10) is None
    log.cache_read([(1, bytes(10)), (2, bytes(10)), (3, bytes(99))])  # 3's bytes are not those of the index
    assert (P, 1) in cache and (P, 3) not in cache
    assert log.to_read(1, 20, upto=10) is None  # 1 and 2 cached
    assert log.to_read(0, 40, upto=10) == (0, 3)  # the span of the missing ones, cached ones between
    assert log.to_read(0, 1000, upto=2) == (0, 0)  # nothing past the high watermark


def test_a_resident_partition_keeps_every_batch_outside_the_budget() -> None:
    budget = TailBudget(partition_bytes=10, node_bytes=10)
    log = StoredBatches(P, [(i, i, 10, 0, bytes(10)) for i in range(5)], resident=True, budget=budget,
                        cache=ReadCache(100))
    assert budget.partitions == 0 and log.trim(5) == 0 and log.tail_bytes == 50
    with pytest.raises(ValueError):
        StoredBatches(P, [(0, 0, 10, 0, None)], resident=True, budget=budget, cache=ReadCache(100))
    log.let_go(committed_end=5)  # its topic is not compacted any more: a tail within the budget
    assert (log.resident, budget.partitions, log.tail_from, log.tail_bytes) == (False, 1, 4, 10)
    log.release()
    assert budget.partitions == 0


def test_a_partition_made_compact_is_read_back_whole_newest_first() -> None:
    budget = TailBudget(partition_bytes=20, node_bytes=1000)
    cache = ReadCache(1000)
    log = batches(6, 10, budget=budget, cache=cache, held=2)  # 4 and 5 held
    log.cache_read([(0, bytes(10))])
    log.holding = True
    assert log.trim(committed_end=6) == 0  # nothing let go while it is read back
    assert log.below_tail(25) == (2, 3)  # the newest below the tail, up to 25 bytes
    log.hold([(2, bytes(10)), (3, bytes(10))])
    assert (log.tail_from, log.tail_bytes, log.resident) == (2, 40, False)
    log.hold([(1, bytes(99))])  # not the batch the index has: nothing held
    assert log.tail_from == 2
    log.hold([(0, bytes(10)), (1, bytes(10))])
    assert (log.tail_from, log.tail_bytes, log.resident, log.holding) == (0, 60, True, False)
    assert budget.partitions == 0 and (P, 0) not in cache  # outside the tails' budget now, its cache gone
    assert log.below_tail(25) is None


async def test_readers_of_one_range_share_one_read() -> None:
    reads = InFlight()
    first = reads.start(("p", (0, 9)))
    assert reads.get(("p", (0, 9))) is first and reads.get(("p", (10, 19))) is None
    reads.finish(("p", (0, 9)))
    assert first.done() and len(reads) == 0
    failed = reads.start("q")
    reads.finish("q", OSError("database gone"))
    with pytest.raises(OSError):
        await asyncio.wait_for(failed, 1)
