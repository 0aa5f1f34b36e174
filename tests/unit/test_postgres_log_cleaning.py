"""Retention and compaction of a partition over PostgreSQL (broker/storage/postgres/retention.py and
compaction.py) on stored batches, with a manual clock: which log start retention asks for, and what
compaction keeps, rewrites and drops (the database side is tests/integration/test_postgres_admin.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.broker.storage.log.config import LogConfig
from kbroker.broker.storage.log.txn_cleaning import TxnCleaning
from kbroker.broker.storage.postgres.compaction import _cleanable, clean, dirtiness, needs_cleaning
from kbroker.broker.storage.postgres.retention import retention_start
from kbroker.protocol import record_batch as rb

NOW = 10_000_000


def batch(base: int, *records: tuple[bytes | None, bytes | None], timestamp: int = NOW, pid: int = -1,
          transactional: bool = False) -> tuple[int, bytes]:
    encoded = rb.encode_batch([rb.Record(base + i, timestamp, key, value) for i, (key, value) in enumerate(records)],
                              base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                              base_sequence=base if pid >= 0 else -1, is_transactional=transactional)
    return base, encoded


@dataclass
class Store:
    """What retention and the cleaner read of a PostgresPartitionStore (and of its producer state)."""

    config: LogConfig
    batches: list[tuple[int, bytes]] = field(default_factory=list)
    log_start_offset: int = 0
    topic: str = "t"
    partition: int = 0

    cleaned_to: int = 0
    last_compaction: tuple[object, int] | None = None
    closed: bool = False
    offline: Exception | None = None
    resident: bool = True  # every batch's bytes in memory, as compaction needs

    def committed_batches(self) -> list[tuple[int, bytes]]:
        return self.batches

    def committed_index(self) -> list[tuple[int, int, int]]:
        return [(base, len(data), rb.read_header(data).max_timestamp) for base, data in self.batches]

    @property
    def producer_state(self) -> "Store":
        return self

    def first_unstable_offset(self) -> int | None:
        return None

    @property
    def high_watermark(self) -> int:
        return rb.read_header(self.batches[-1][1]).next_offset if self.batches else self.log_start_offset


def config(**overrides: str) -> LogConfig:
    return LogConfig.from_topic_configs(overrides, LogConfig())


def test_retention_by_time_stops_at_the_first_batch_it_keeps() -> None:
    store = Store(config(**{"retention.ms": "1000"}), [
        batch(0, (b"a", b"1"), timestamp=NOW - 5000), batch(1, (b"b", b"2"), (b"c", b"3"), timestamp=NOW - 2000),
        batch(3, (b"d", b"4"), timestamp=NOW - 10), batch(4, (b"e", b"5"), timestamp=NOW - 9000)])
    assert retention_start(store, NOW) == 3  # the old batch after a young one stays with it
    store.log_start_offset = 3
    assert retention_start(store, NOW) is None  # never backwards, nothing more to do
    every = Store(config(**{"retention.ms": "1000"}), [batch(0, (b"a", b"1"), timestamp=NOW - 5000)])
    assert retention_start(every, NOW) == 1  # all expired: the log start is the end


def test_retention_by_size_keeps_the_partition_at_least_that_large() -> None:
    batches = [batch(i, (b"k", b"x" * 100)) for i in range(5)]
    size = len(batches[0][1])
    assert retention_start(Store(config(**{"retention.bytes": str(2 * size)}), batches), NOW) == 3
    assert retention_start(Store(config(**{"retention.bytes": str(2 * size + 1)}), batches), NOW) == 2
    assert retention_start(Store(config(**{"retention.bytes": str(2 * size + 1), "cleanup.policy": "compact"}),
                                 batches), NOW) is None  # retention only with cleanup.policy delete


def test_compaction_keeps_each_keys_newest_and_rewrites_partial_batches() -> None:
    batches = [batch(0, (b"a", b"1"), (b"b", b"1")), batch(2, (b"a", b"2")), batch(3, (b"c", None), timestamp=0),
               batch(4, (b"b", b"2"), (b"d", b"1"))]
    txn = TxnCleaning(None, [])
    assert _cleanable(batches, txn, 0, NOW) == 4
    out = clean(batches, 4, NOW - 1000, txn)
    changed = {base: new for base, _, new in out.changes}
    assert set(changed) == {0, 3}  # batch 0 lost both keys, the old tombstone went; 2 and 4 stay whole
    assert changed[0] is None and changed[3] is None
    assert (out.records_before, out.records_after) == (6, 3)
    # a batch partly superseded keeps its last offset, starts at its first survivor
    partial = [batch(0, (b"a", b"1"), (b"b", b"1"), (b"c", b"1")), batch(3, (b"a", b"2"))]
    out = clean(partial, 2, NOW - 1000, txn)
    (base, _, new), = out.changes
    assert base == 0 and new is not None
    new_base, new_last, header, data = new
    assert (new_base, new_last, header.base_offset, header.last_offset) == (1, 2, 1, 2)
    assert [(r.offset, r.key) for r in rb.decode_batch(data)[1]] == [(1, b"b"), (2, b"c")]


def test_compaction_respects_the_lag_the_unstable_offset_and_aborted_transactions() -> None:
    batches = [batch(0, (b"a", b"1"), timestamp=NOW - 5000),
               batch(1, (b"a", b"2"), timestamp=NOW - 5000, pid=7, transactional=True),
               batch(2, (b"a", b"3"), timestamp=NOW)]
    aborted = TxnCleaning(None, [(7, 1, 5)])  # producer 7's transaction from offset 1 aborted
    out = clean(batches, 3, NOW - 1000, aborted)
    assert {base for base, _, new in out.changes if new is None} == {0, 1}  # superseded; aborted
    assert _cleanable(batches, TxnCleaning(2, []), 0, NOW) == 2  # nothing from the first unstable offset
    assert _cleanable(batches, TxnCleaning(None, []), 1000, NOW) == 2  # the youngest is within the lag


def test_the_cleaner_picks_partitions_by_dirty_ratio_and_max_compaction_lag() -> None:
    batches = [batch(i, (b"k", b"v" * 50), timestamp=NOW - 60_000) for i in range(4)]
    store = Store(config(**{"cleanup.policy": "compact"}), batches)
    assert dirtiness(store, NOW) == (1.0, False) and needs_cleaning(store, NOW)  # never cleaned
    store.cleaned_to = 3  # three of four cleaned: 25 % dirty, under the default ratio 0.5
    assert dirtiness(store, NOW) == (0.25, False) and not needs_cleaning(store, NOW)
    store.config = config(**{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"})
    assert needs_cleaning(store, NOW)
    store.config = config(**{"cleanup.policy": "compact", "max.compaction.lag.ms": "30000"})
    assert dirtiness(store, NOW) == (0.25, True) and needs_cleaning(store, NOW)  # its dirty batch waited too long
    store.config = config(**{"cleanup.policy": "delete"})
    assert not needs_cleaning(store, NOW)
