"""The share-partition's delivery state kept record by record: kbroker's SharePartition before it kept
runs (coordinator/share/share_partition.py until 2026-11-29, with share.version 2's ARCHIVING as the
dlq branch wrote it), kept as the model the run-based one is checked against
(tests/unit/test_share_partition_runs.py). Every offset in flight is its own InFlight; the behaviour
is the specification, the cost is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.coordinator.share.share_partition import (  # what the two share: the wire's and Kafka's ids
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, ARCHIVING, AVAILABLE, GAP, RELEASE, REJECT, RENEW, Acquired, Batch, InFlight,
    _extend,
)
from kbroker.protocol.errors import ErrorCode

E = ErrorCode
_DONE = (ACKNOWLEDGED, ARCHIVED)
_KEPT = (ACKNOWLEDGED, ARCHIVING, ARCHIVED)  # what a restart finds as it was


@dataclass(slots=True)
class Undo:
    """The in-flight records before a change (offset -> state, delivery count, member, lock deadline)."""

    start: int
    before: dict[int, tuple[int, int, str | None, int]]
    archived: int = 0  # records the change archived (the metrics' total takes them back)


class SharePartition:
    def __init__(self, lock_ms: int, delivery_limit: int, max_locks: int) -> None:
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_locks = max_locks
        self.start = -1  # -1: not initialized (its first fetch sets it from share.auto.offset.reset)
        self.end = -1
        self.records: dict[int, InFlight] = {}
        self.acquired = 0  # how many offsets are ACQUIRED (bounded by max_locks)
        # Where the next persisted state starts, and the done records the start moved past since the
        # last one (offset -> state, delivery count): Kafka's SharePartition writes the start as it
        # was before the change it persists, and moves its start only once that write is done, so
        # its persisted start (what DescribeShareGroupOffsets shows) is one write behind.
        self.persist_from = -1
        self.passed: dict[int, tuple[int, int]] = {}
        self.archived_total = 0  # records archived by a reject or the delivery count limit (metrics)
        self.dlq = False  # archived records go through ARCHIVING to the group's dead letter queue

    # -- life ----------------------------------------------------------------------------------

    @property
    def initialized(self) -> bool:
        return self.start >= 0

    def initialize(self, start: int) -> None:
        self.start = self.end = self.persist_from = start
        self.records.clear()
        self.passed.clear()
        self.acquired = 0

    def restore(self, start: int, states: Iterable[tuple[int, int, int, int]]) -> None:
        """Back from the persisted state (first, last, state, delivery count): ACKNOWLEDGED, ARCHIVING
        and ARCHIVED ranges stay; every other in-flight offset is AVAILABLE again with its count, as
        Kafka's share coordinator gives back what a restart leaves acquired."""
        self.initialize(start)
        for first, last, state, count in states:
            for offset in range(max(first, start), last + 1):
                self.records[offset] = InFlight(state if state in _KEPT else AVAILABLE, count)
                self.end = max(self.end, offset + 1)
        for offset in range(start, self.end):
            self.records.setdefault(offset, InFlight(ARCHIVED))
        self._advance()

    def truncate_below(self, log_start: int) -> None:
        """Records below the log's start are gone (retention, DeleteRecords): the start follows."""
        if log_start <= self.start:
            return
        for offset in range(self.start, min(log_start, self.end)):
            entry = self.records.pop(offset, None)
            if entry is not None and entry.state == ACQUIRED:
                self.acquired -= 1
        self.start = log_start
        self.end = max(self.end, log_start)
        self._advance()
        self.persist_from = self.start  # the records below are gone: nothing of them is written
        self.passed.clear()

    # -- fetching ------------------------------------------------------------------------------

    def next_fetch_offset(self, high_watermark: int) -> int | None:
        """Where a fetch reads the log from: the first AVAILABLE record in flight, else `end`; None
        when nothing can be acquired (nothing available, or the lock limit reached)."""
        if self.acquired >= self.max_locks:
            return None
        for offset in range(self.start, self.end):
            if self.records[offset].state == AVAILABLE:
                return offset
        return self.end if self.end < high_watermark else None

    def acquire(self, member: str, batches: Iterable[Batch], high_watermark: int, max_records: int,
                now_ms: int, whole_batches: bool = False) -> list[Acquired]:
        """Acquire for `member` what the log read holds (`batches`, in offset order): AVAILABLE records
        in flight, then new ones below the high watermark, `max_records` at most (KIP-1206's
        record_limit mode), or with `whole_batches` (its batch_optimized mode, ShareFetch v1's) the
        batch in which the limit falls taken to its end, as Kafka's acquireNewBatchRecords does."""
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        room = min(max_records, self.max_locks - self.acquired)
        deadline = now_ms + self.lock_ms
        for batch in batches:
            if room <= 0:
                break
            if batch.base > self.end and batch.base < high_watermark:
                self._archive_new(self.end, batch.base)  # a gap in the log (compaction): nothing to deliver
            if batch.control:
                if batch.base <= self.end <= batch.last:
                    self._archive_new(self.end, min(batch.last + 1, high_watermark))
                continue
            for offset in range(max(batch.base, self.start), min(batch.last + 1, high_watermark)):
                if room <= 0 and not (whole_batches and taken and taken[-1][0] >= batch.base):
                    break
                entry = self.records.get(offset)
                if entry is None:
                    if offset != self.end:
                        continue  # beyond a part of the log this read did not cover
                    entry = self.records[offset] = InFlight()
                    self.end = offset + 1
                if entry.state != AVAILABLE:
                    continue
                entry.state, entry.member, entry.deadline = ACQUIRED, member, deadline
                entry.count += 1
                self.acquired += 1
                room -= 1
                taken.append((offset, entry.count))
        return _runs(taken)

    def has_available(self, high_watermark: int) -> bool:
        return self.initialized and self.next_fetch_offset(high_watermark) is not None

    # -- acknowledging -------------------------------------------------------------------------

    def acknowledge(self, member: str, first: int, last: int, types: list[int], now_ms: int) -> ErrorCode:
        """One acknowledgement batch; all or nothing. INVALID_RECORD_STATE when an offset is not
        acquired by `member`; INVALID_REQUEST for a malformed batch."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1) or any(
                t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            return E.INVALID_REQUEST
        if last < self.start:  # all done already: Kafka's SharePartition skips such a batch, no error
            return E.NONE
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            entry = self.records.get(offset)
            if kind == GAP and (entry is None or entry.state != ACQUIRED):
                continue
            if entry is None or entry.state != ACQUIRED or entry.member != member:
                return E.INVALID_RECORD_STATE
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            entry = self.records.get(offset)
            if entry is None or entry.state != ACQUIRED:
                continue
            if kind == RENEW:
                entry.deadline = now_ms + self.lock_ms
            elif kind == RELEASE:
                self._give_back(entry)
            else:
                # Kafka's recordStateWithDlq: only a reject goes through ARCHIVING; a gap is ARCHIVED
                entry.state = ACKNOWLEDGED if kind == ACCEPT else self._archive_state() if kind == REJECT else ARCHIVED
                entry.member, entry.rejected = None, kind == REJECT
                self.acquired -= 1
                self.archived_total += kind != ACCEPT
        self._advance()
        return E.NONE

    def acknowledge_all(self, member: str, batches: Iterable[tuple[int, int, list[int]]], now_ms: int
                        ) -> tuple[ErrorCode, Undo | None]:
        """A request's acknowledgement batches, each on its own (the error of the last that failed),
        and what puts them all back (`rollback`) if their state write fails; None if nothing changed."""
        undo = Undo(self.start, {offset: (e.state, e.count, e.member, e.deadline) for offset, e in self.records.items()})
        archived, error, changed = self.archived_total, E.NONE, False
        for first, last, types in batches:
            code = self.acknowledge(member, first, last, types, now_ms)
            if code is E.NONE:
                changed = True
            else:
                error = code
        undo.archived = self.archived_total - archived
        return error, undo if changed else None

    def rollback(self, undo: Undo) -> int:
        """An acknowledgement's state write failed (Kafka's rollbackOrProcessStateUpdates): each record
        it took from ACQUIRED is acquired again by its member, under its lock, unless something else
        changed it since (acquired again by another fetch, moved away by the log's start). How many."""
        restored = 0
        below = range(undo.start, self.start)  # offsets the start moved past since
        if all(offset in undo.before for offset in below):
            for offset in below:
                state, count, member, deadline = undo.before[offset]
                # ARCHIVING ones ARCHIVED: the start passed them, so their copies were written since
                self.records[offset] = InFlight(ARCHIVED if state == ARCHIVING else state, count, member, deadline)
                restored += state == ACQUIRED
            self.start = min(self.start, undo.start)
        for offset, (state, count, member, deadline) in undo.before.items():
            entry = self.records.get(offset)
            if offset in below or entry is None or state != ACQUIRED or entry.state == ACQUIRED or entry.count != count:
                continue
            entry.state, entry.member, entry.deadline = ACQUIRED, member, deadline
            restored += 1
        self.archived_total -= undo.archived
        self.persist_from = min(self.persist_from, self.start)
        self.passed = {o: v for o, v in self.passed.items() if o < self.start}
        self.acquired = sum(e.state == ACQUIRED for e in self.records.values())
        self._advance()
        return restored

    # -- locks ---------------------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks past their deadline give their records back; how many did."""
        expired = 0
        for entry in self.records.values():
            if entry.state == ACQUIRED and entry.deadline <= now_ms:
                self._give_back(entry)
                expired += 1
        if expired:
            self._advance()
        return expired

    def next_deadline(self) -> int | None:
        deadlines = [e.deadline for e in self.records.values() if e.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def release_member(self, member: str) -> int:
        """The member's session closed, or it left: what it holds goes back (Kafka's releaseSession)."""
        released = 0
        for entry in self.records.values():
            if entry.state == ACQUIRED and entry.member == member:
                self._give_back(entry)
                released += 1
        if released:
            self._advance()
        return released

    # -- the dead letter queue (KIP-1191) -------------------------------------------------------

    def archiving(self) -> list[tuple[int, int, bool]]:
        """(offset, delivery count, rejected) of each record waiting for its copy in the dead letter
        queue. Restored ones were rejected unless their count reached the limit (Kafka infers it so:
        the cause is not persisted)."""
        return [(offset, e.count, e.rejected or e.count < self.delivery_limit)
                for offset, e in sorted(self.records.items()) if e.state == ARCHIVING]

    def archived_to_dlq(self, offsets: Iterable[int]) -> int:
        """Their copies are written (or could not be: Kafka archives them regardless): ARCHIVING records
        become ARCHIVED, and the start may move past them. How many changed."""
        changed = 0
        for offset in offsets:
            entry = self.records.get(offset)
            if entry is not None and entry.state == ARCHIVING:
                entry.state = ARCHIVED
                changed += 1
        if changed:
            self._advance()
        return changed

    # -- what is persisted ---------------------------------------------------------------------

    def snapshot(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """The state to persist now, as Kafka writes it: from the start before the change being
        written (the done records the start has passed since included), then `state_batches`."""
        start = self.persist_from if 0 <= self.persist_from < self.start else self.start
        runs: list[tuple[int, int, int, int]] = []
        for offset in range(start, self.start):
            state, count = self.passed.get(offset, (ARCHIVED, 0))
            _extend(runs, offset, state, count)
        for first, last, state, count in self.state_batches():
            _extend(runs, first, state, count, last)
        self.persist_from = self.start
        self.passed.clear()
        return start, runs

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The in-flight state as Kafka's share coordinator stores it: runs of (first, last, state,
        delivery count), with ACQUIRED written as AVAILABLE (a lock does not survive a restart)."""
        runs: list[tuple[int, int, int, int]] = []
        for offset in range(self.start, self.end):
            entry = self.records[offset]
            _extend(runs, offset, entry.state if entry.state in _KEPT else AVAILABLE, entry.count)
        return runs

    def counts(self) -> dict[str, int]:
        by_state = {AVAILABLE: 0, ACQUIRED: 0, ACKNOWLEDGED: 0, ARCHIVING: 0, ARCHIVED: 0}
        for entry in self.records.values():
            by_state[entry.state] += 1
        return {"start": self.start, "end": self.end, "available": by_state[AVAILABLE],
                "acquired": by_state[ACQUIRED], "acknowledged": by_state[ACKNOWLEDGED],
                "archived": by_state[ARCHIVING] + by_state[ARCHIVED]}

    # -- inside --------------------------------------------------------------------------------

    def _give_back(self, entry: InFlight) -> None:
        entry.state = self._archive_state() if entry.count >= self.delivery_limit else AVAILABLE
        entry.rejected = False
        self.archived_total += entry.state != AVAILABLE
        entry.member = None
        self.acquired -= 1

    def _archive_state(self) -> int:
        return ARCHIVING if self.dlq else ARCHIVED

    def _archive_new(self, first: int, stop: int) -> None:
        for offset in range(max(first, self.end), stop):
            self.records[offset] = InFlight(ARCHIVED)
            self.end = offset + 1

    def _advance(self) -> None:
        records = self.records
        while self.start < self.end and records[self.start].state in _DONE:
            entry = records.pop(self.start)
            self.passed[self.start] = (entry.state, entry.count)
            self.start += 1


def _runs(taken: list[tuple[int, int]]) -> list[Acquired]:
    runs: list[Acquired] = []
    for offset, count in taken:
        if runs and runs[-1].last == offset - 1 and runs[-1].delivery_count == count:
            runs[-1] = Acquired(runs[-1].first, offset, count)
        else:
            runs.append(Acquired(offset, offset, count))
    return runs
