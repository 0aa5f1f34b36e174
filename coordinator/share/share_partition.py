"""One share-partition's delivery state (KIP-932; Kafka's SharePartition): which records of a topic
partition a share group has delivered, to whom, how often, and with what outcome.

    start (SPSO)                                     end                    high watermark
    |  in flight: AVAILABLE / ACQUIRED / ACKNOWLEDGED / ARCHIVED  |  never delivered yet  |

Every offset in [start, end) has a state; offsets from `end` on were never acquired. A fetch acquires
records for one member: first the AVAILABLE ones in flight (redeliveries), then new ones from `end`,
each under an acquisition lock until `now + lock_ms` and with its delivery count bumped. The member
acknowledges each record it holds: accept (ACKNOWLEDGED), release (AVAILABLE again), reject
(ARCHIVED), renew (the lock starts again). A lock that expires, or a member that goes, returns the
records to AVAILABLE; a record delivered `delivery_limit` times is ARCHIVED instead (a poison
record stops coming back). The start moves past every leading ACKNOWLEDGED or ARCHIVED offset.
Offsets that hold no record the client can take (control batches, compacted gaps) are ARCHIVED when
`end` passes them, so they never hold the start back.

The in-flight offsets are kept as runs (`Run`: first, last, and the one state, delivery count, member
and lock deadline all its offsets share), as Kafka's cachedState keeps an acquired batch as one
InFlightBatch: a fetch of a few thousand records makes one run, a whole-run acknowledgement changes
it in place, and a run is split only where its records' fates diverge (part of it acknowledged,
released or expired apart from the rest), then joined again with a neighbour in the same state. So
the cost of a fetch, an acknowledgement or a snapshot follows the number of runs, not of records.

With a dead letter queue (KIP-1191: share.version 2 and the group's errors.deadletterqueue.topic.name,
`dlq`), a rejected record or one over the delivery count limit is ARCHIVING first, as in Kafka's
SharePartition: persisted so, then copied to the DLQ topic, then ARCHIVED (`archived_to_dlq`).
ARCHIVING is not done: it holds the start back until its copy is written, and a restart finds it
ARCHIVING again, so its copy is written then. Whether a member rejected it (`rejected`, what its copy's
headers say) is part of a run's state: an ARCHIVING run splits where that differs.

Pure: no clock (`now_ms` is given), no I/O; the broker's share-partition manager reads the log, arms
the timers and persists the state.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter

from ...protocol.errors import ErrorCode
from .persisted import overlay

E = ErrorCode

# Kafka's RecordState ids (2, 3 and 4 are persisted; 3 only with a dead letter queue)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED = 0, 1, 2, 3, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4  # the acknowledge types on the wire
_KINDS = frozenset((GAP, ACCEPT, RELEASE, REJECT, RENEW))
_DONE = (ACKNOWLEDGED, ARCHIVED)
_KEPT = (ACKNOWLEDGED, ARCHIVING, ARCHIVED)  # what a restart finds as it was
SHARE_VERSION_BUILT = 2  # the highest share.version whose behaviour kbroker has built
DLQ_SHARE_VERSION = 2  # share.version 2: share groups' dead letter queues (KIP-1191)


class Run:
    """The in-flight offsets [first, last], all in one state (Kafka's InFlightBatch): `member` and
    `deadline` (its acquisition lock) only while ACQUIRED, None and 0 otherwise; `rejected` only while
    ARCHIVING (a member rejected its records; else the delivery count limit archived them), False
    otherwise."""

    __slots__ = ("first", "last", "state", "count", "member", "deadline", "rejected")

    def __init__(self, first: int, last: int, state: int = AVAILABLE, count: int = 0, member: str | None = None,
                 deadline: int = 0, rejected: bool = False) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline
        self.rejected = rejected

    def joins(self, other: Run) -> bool:
        """`other` follows this run and its records are in the same state: one run can hold both."""
        return (self.last + 1 == other.first and self.state == other.state and self.count == other.count
                and self.member == other.member and self.deadline == other.deadline
                and self.rejected == other.rejected)

    def as_tuple(self) -> tuple[int, int, int, int, str | None, int]:
        return self.first, self.last, self.state, self.count, self.member, self.deadline

    def __repr__(self) -> str:
        return f"Run{self.as_tuple()}"


_FIRST = attrgetter("first")


class InFlight:
    """One in-flight offset's state (a view of its run, `SharePartition.records`)."""

    __slots__ = ("state", "count", "member", "deadline", "rejected")

    def __init__(self, state: int = AVAILABLE, count: int = 0, member: str | None = None, deadline: int = 0,
                 rejected: bool = False) -> None:
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline
        self.rejected = rejected  # ARCHIVING because a member rejected it (else: the delivery count limit)


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of acquired offsets with one delivery count (the wire's AcquiredRecords)."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Batch:
    """What the log holds at [base, last]: a control batch holds nothing to deliver."""

    base: int
    last: int
    control: bool = False


@dataclass(slots=True)
class Undo:
    """The in-flight runs before a change (first, last, state, delivery count, member, lock deadline)."""

    start: int
    before: list[tuple[int, int, int, int, str | None, int]]
    archived: int = 0  # records the change archived (the metrics' total takes them back)


class SharePartition:
    def __init__(self, lock_ms: int, delivery_limit: int, max_locks: int) -> None:
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_locks = max_locks
        self.start = -1  # -1: not initialized (its first fetch sets it from share.auto.offset.reset)
        self.end = -1
        self.runs: list[Run] = []  # covering [start, end) in order, no two neighbours joinable
        self.acquired = 0  # how many offsets are ACQUIRED (bounded by max_locks)
        # Where the next persisted state starts, and the done records the start moved past since the
        # last one (runs of first, last, state, delivery count): Kafka's SharePartition writes the
        # start as it was before the change it persists, and moves its start only once that write is
        # done, so its persisted start (what DescribeShareGroupOffsets shows) is one write behind.
        self.persist_from = -1
        self.passed: list[tuple[int, int, int, int]] = []
        self.archived_total = 0  # records archived by a reject or the delivery count limit (metrics)
        self.dlq = False  # archived records go through ARCHIVING to the group's dead letter queue

    # -- life ----------------------------------------------------------------------------------

    @property
    def initialized(self) -> bool:
        return self.start >= 0

    def initialize(self, start: int) -> None:
        self.start = self.end = self.persist_from = start
        self.runs = []
        self.passed = []
        self.acquired = 0

    def restore(self, start: int, states: Iterable[tuple[int, int, int, int]]) -> None:
        """Back from the persisted state (first, last, state, delivery count): ACKNOWLEDGED, ARCHIVING
        and ARCHIVED ranges stay; every other in-flight offset is AVAILABLE again with its count, as
        Kafka's share coordinator gives back what a restart leaves acquired. Offsets between the
        ranges (none in Kafka's snapshots) are ARCHIVED; where ranges overlap the later one wins."""
        self.initialize(start)
        ranges = [(max(first, start), last, state if state in _KEPT else AVAILABLE, count)
                  for first, last, state, count in states if last >= max(first, start)]
        if any(b[0] <= a[1] for a, b in zip(ranges, ranges[1:])):
            ranges = overlay([], ranges, start)
        for first, last, state, count in ranges:
            if first > self.end:
                self._append(Run(self.end, first - 1, ARCHIVED))
            self._append(Run(first, last, state, count))
            self.end = last + 1
        self._advance()

    def truncate_below(self, log_start: int) -> None:
        """Records below the log's start are gone (retention, DeleteRecords): the start follows."""
        if log_start <= self.start:
            return
        gone = self._cut(min(log_start, self.end))
        self.acquired -= sum(r.last - r.first + 1 for r in self.runs[:gone] if r.state == ACQUIRED)
        del self.runs[:gone]
        self.start = log_start
        self.end = max(self.end, log_start)
        self._advance()
        self.persist_from = self.start  # the records below are gone: nothing of them is written
        self.passed = []

    # -- fetching ------------------------------------------------------------------------------

    def next_fetch_offset(self, high_watermark: int) -> int | None:
        """Where a fetch reads the log from: the first AVAILABLE record in flight, else `end`; None
        when nothing can be acquired (nothing available, or the lock limit reached)."""
        if self.acquired >= self.max_locks:
            return None
        for run in self.runs:
            if run.state == AVAILABLE:
                return run.first
        return self.end if self.end < high_watermark else None

    def acquire(self, member: str, batches: Iterable[Batch], high_watermark: int, max_records: int,
                now_ms: int, whole_batches: bool = False) -> list[Acquired]:
        """Acquire for `member` what the log read holds (`batches`, in offset order): AVAILABLE records
        in flight, then new ones below the high watermark, `max_records` at most (KIP-1206's
        record_limit mode), or with `whole_batches` (its batch_optimized mode, ShareFetch v1's) the
        batch in which the limit falls taken to its end, as Kafka's acquireNewBatchRecords does."""
        taken: list[Acquired] = []
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
            low, high = max(batch.base, self.start), min(batch.last + 1, high_watermark)
            whole = False  # with whole_batches, once a record of the batch is taken the rest of it follows
            at = low
            while at < min(high, self.end):  # in flight: the AVAILABLE ones (redeliveries)
                run = self.runs[self._index(at)]
                if run.state != AVAILABLE:
                    at = run.last + 1
                    continue
                if room <= 0 and not whole:
                    break
                stop = min(run.last + 1, high)
                if not whole_batches:
                    stop = min(stop, at + room)
                i, j = self._span(at, stop - 1)
                run = self.runs[i]
                run.state, run.member, run.deadline = ACQUIRED, member, deadline
                run.count += 1
                _took(taken, at, stop - 1, run.count)
                self._join(i, j)
                self.acquired += stop - at
                room -= stop - at
                whole = whole_batches
                at = stop
            else:  # new ones, from `end` (an offset past `end` is beyond a part of the log this read did not cover)
                if low <= self.end < high and (room > 0 or whole):
                    first = self.end
                    stop = high if whole_batches else min(high, first + room)
                    self._append(Run(first, stop - 1, ACQUIRED, 1, member, deadline))
                    self.end = stop
                    _took(taken, first, stop - 1, 1)
                    self.acquired += stop - first
                    room -= stop - first
        return taken

    def has_available(self, high_watermark: int) -> bool:
        return self.initialized and self.next_fetch_offset(high_watermark) is not None

    # -- acknowledging -------------------------------------------------------------------------

    def acknowledge(self, member: str, first: int, last: int, types: list[int], now_ms: int) -> ErrorCode:
        """One acknowledgement batch; all or nothing. INVALID_RECORD_STATE when an offset is not
        acquired by `member`; INVALID_REQUEST for a malformed batch. Applied run by run: a batch
        covering a whole acquired run changes it in place; one covering part of it splits it."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1) or not _KINDS.issuperset(types):
            return E.INVALID_REQUEST
        if last < self.start:  # all done already: Kafka's SharePartition skips such a batch, no error
            return E.NONE
        parts = [(first, last, types[0])] if len(types) == 1 else list(_same_kind(first, types))
        for low, high, kind in parts:
            if kind != GAP and (low < self.start or high >= self.end):
                return E.INVALID_RECORD_STATE  # not in flight: never acquired, or done before the start
            for run in self._overlapping(low, high):
                if (kind != GAP or run.state == ACQUIRED) and (run.state != ACQUIRED or run.member != member):
                    return E.INVALID_RECORD_STATE
        for low, high, kind in parts:
            if high < self.start or max(low, self.start) >= self.end:
                continue
            i, j = self._span(low, high)
            for run in self.runs[i:j]:
                if run.state != ACQUIRED:
                    continue
                if kind == RENEW:
                    run.deadline = now_ms + self.lock_ms
                elif kind == RELEASE:
                    self._give_back(run)
                else:
                    # Kafka's recordStateWithDlq: only a reject goes through ARCHIVING; a gap is ARCHIVED
                    run.state = ACKNOWLEDGED if kind == ACCEPT else self._archive_state() if kind == REJECT else ARCHIVED
                    run.member, run.deadline, run.rejected = None, 0, run.state == ARCHIVING
                    self.acquired -= run.last - run.first + 1
                    if kind != ACCEPT:
                        self.archived_total += run.last - run.first + 1
            self._join(i, j)
        self._advance()
        return E.NONE

    def acknowledge_all(self, member: str, batches: Iterable[tuple[int, int, list[int]]], now_ms: int
                        ) -> tuple[ErrorCode, Undo | None]:
        """A request's acknowledgement batches, each on its own (the error of the last that failed),
        and what puts them all back (`rollback`) if their state write fails; None if nothing changed."""
        undo = Undo(self.start, [run.as_tuple() for run in self.runs])
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
        passed_since = self.start  # the offsets in [undo.start, passed_since) the start moved past since
        undo_end = undo.before[-1][1] + 1 if undo.before else undo.start
        if undo.start < passed_since <= undo_end:  # all of them were in flight then: they come back as they were,
            # but ARCHIVING ones ARCHIVED: the start passed them, so their copies were written since
            head = [Run(first, min(last, passed_since - 1), ARCHIVED if state == ARCHIVING else state, count, member,
                        deadline) for first, last, state, count, member, deadline in undo.before if first < passed_since]
            restored += sum(r.last - r.first + 1 for r in head if r.state == ACQUIRED)
            self.runs[0:0] = head
            self.start = undo.start
        for first, last, state, count, member, deadline in undo.before:
            low, high = max(first, passed_since), min(last, self.end - 1)
            if state != ACQUIRED or low > high:
                continue
            i, j = self._span(low, high)
            for run in self.runs[i:j]:
                if run.state != ACQUIRED and run.count == count:
                    run.state, run.member, run.deadline, run.rejected = ACQUIRED, member, deadline, False
                    restored += run.last - run.first + 1
            self._join(i, j)
        self.archived_total -= undo.archived
        self.persist_from = min(self.persist_from, self.start)
        self.passed = [(f, min(la, self.start - 1), s, c) for f, la, s, c in self.passed if f < self.start]
        self.acquired = sum(r.last - r.first + 1 for r in self.runs if r.state == ACQUIRED)
        self._join(0, len(self.runs))
        self._advance()
        return restored

    # -- locks ---------------------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks past their deadline give their records back; how many did."""
        expired = 0
        for run in self.runs:
            if run.state == ACQUIRED and run.deadline <= now_ms:
                expired += run.last - run.first + 1
                self._give_back(run)
        if expired:
            self._join(0, len(self.runs))
            self._advance()
        return expired

    def next_deadline(self) -> int | None:
        return min((r.deadline for r in self.runs if r.state == ACQUIRED), default=None)

    def release_member(self, member: str) -> int:
        """The member's session closed, or it left: what it holds goes back (Kafka's releaseSession)."""
        released = 0
        for run in self.runs:
            if run.state == ACQUIRED and run.member == member:
                released += run.last - run.first + 1
                self._give_back(run)
        if released:
            self._join(0, len(self.runs))
            self._advance()
        return released

    # -- the dead letter queue (KIP-1191) -------------------------------------------------------

    def archiving(self) -> list[tuple[int, int, bool]]:
        """(offset, delivery count, rejected) of each record waiting for its copy in the dead letter
        queue. Restored ones were rejected unless their count reached the limit (Kafka infers it so:
        the cause is not persisted)."""
        return [(offset, run.count, run.rejected or run.count < self.delivery_limit)
                for run in self.runs if run.state == ARCHIVING for offset in range(run.first, run.last + 1)]

    def archived_to_dlq(self, offsets: Iterable[int]) -> int:
        """Their copies are written (or could not be: Kafka archives them regardless): ARCHIVING records
        become ARCHIVED, and the start may move past them. How many changed."""
        changed = 0
        for first, last in _ranges(o for o in sorted(set(offsets)) if self.start <= o < self.end):
            i, j = self._span(first, last)
            for run in self.runs[i:j]:
                if run.state == ARCHIVING:
                    run.state, run.rejected = ARCHIVED, False
                    changed += run.last - run.first + 1
            self._join(i, j)
        if changed:
            self._advance()
        return changed

    # -- what is persisted ---------------------------------------------------------------------

    def snapshot(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """The state to persist now, as Kafka writes it: from the start before the change being
        written (the done records the start has passed since included), then `state_batches`."""
        start = self.persist_from if 0 <= self.persist_from < self.start else self.start
        runs: list[tuple[int, int, int, int]] = []
        at = start  # offsets below the start the passed runs do not name are ARCHIVED, count 0
        for first, last, state, count in self.passed:
            first, last = max(first, at), min(last, self.start - 1)
            if first > last:
                continue
            if first > at:
                _extend(runs, at, ARCHIVED, 0, first - 1)
            _extend(runs, first, state, count, last)
            at = last + 1
        if at < self.start:
            _extend(runs, at, ARCHIVED, 0, self.start - 1)
        for first, last, state, count in self.state_batches():
            _extend(runs, first, state, count, last)
        self.persist_from = self.start
        self.passed = []
        return start, runs

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The in-flight state as Kafka's share coordinator stores it: runs of (first, last, state,
        delivery count), with ACQUIRED written as AVAILABLE (a lock does not survive a restart)."""
        runs: list[tuple[int, int, int, int]] = []
        for run in self.runs:
            _extend(runs, run.first, run.state if run.state in _KEPT else AVAILABLE, run.count, run.last)
        return runs

    def counts(self) -> dict[str, int]:
        by_state = {AVAILABLE: 0, ACQUIRED: 0, ACKNOWLEDGED: 0, ARCHIVING: 0, ARCHIVED: 0}
        for run in self.runs:
            by_state[run.state] += run.last - run.first + 1
        return {"start": self.start, "end": self.end, "available": by_state[AVAILABLE],
                "acquired": by_state[ACQUIRED], "acknowledged": by_state[ACKNOWLEDGED],
                "archived": by_state[ARCHIVING] + by_state[ARCHIVED]}

    @property
    def records(self) -> dict[int, InFlight]:
        """Each in-flight offset's state, one by one (for tests and inspection: it costs a record each)."""
        return {offset: InFlight(r.state, r.count, r.member, r.deadline, r.rejected)
                for r in self.runs for offset in range(r.first, r.last + 1)}

    # -- inside --------------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """The index of the run holding `offset` (start <= offset < end)."""
        return bisect_right(self.runs, offset, key=_FIRST) - 1

    def _cut(self, offset: int) -> int:
        """The index of the run starting at `offset` (start <= offset <= end; len(runs) at `end`),
        splitting the run that holds it if it starts lower."""
        if offset >= self.end:
            return len(self.runs)
        i = self._index(offset)
        run = self.runs[i]
        if run.first == offset:
            return i
        self.runs.insert(i + 1, Run(offset, run.last, run.state, run.count, run.member, run.deadline, run.rejected))
        run.last = offset - 1
        return i + 1

    def _span(self, first: int, last: int) -> tuple[int, int]:
        """runs[i:j] cover exactly [first, last] within [start, end), split off their neighbours."""
        i = self._cut(max(first, self.start))
        return i, self._cut(min(last + 1, self.end))

    def _overlapping(self, first: int, last: int) -> Iterator[Run]:
        first = max(first, self.start)
        if last < first or first >= self.end:
            return
        runs = self.runs
        for i in range(self._index(first), len(runs)):
            if runs[i].first > last:
                return
            yield runs[i]

    def _join(self, i: int, j: int) -> None:
        """Join the runs in runs[i:j] and their neighbours that hold the same state into one."""
        runs = self.runs
        low, high = max(i - 1, 0), min(j + 1, len(runs))
        joined: list[Run] = []
        for run in runs[low:high]:
            if joined and joined[-1].joins(run):
                joined[-1].last = run.last
            else:
                joined.append(run)
        if len(joined) != high - low:
            runs[low:high] = joined

    def _append(self, run: Run) -> None:
        if self.runs and self.runs[-1].joins(run):
            self.runs[-1].last = run.last
        else:
            self.runs.append(run)

    def _give_back(self, run: Run) -> None:
        size = run.last - run.first + 1
        run.state = self._archive_state() if run.count >= self.delivery_limit else AVAILABLE
        if run.state != AVAILABLE:
            self.archived_total += size
        run.member, run.deadline, run.rejected = None, 0, False
        self.acquired -= size

    def _archive_state(self) -> int:
        return ARCHIVING if self.dlq else ARCHIVED

    def _archive_new(self, first: int, stop: int) -> None:
        first = max(first, self.end)
        if stop > first:
            self._append(Run(first, stop - 1, ARCHIVED))
            self.end = stop

    def _advance(self) -> None:
        runs = self.runs
        done = 0
        while done < len(runs) and runs[done].state in _DONE:
            run = runs[done]
            _extend(self.passed, run.first, run.state, run.count, run.last)
            done += 1
        if done:
            self.start = runs[done - 1].last + 1
            del runs[:done]


def _extend(runs: list[tuple[int, int, int, int]], offset: int, state: int, count: int, last: int = -1) -> None:
    """Runs of (first, last, state, count), with [offset, last] (or the one offset) added at the end."""
    last = max(last, offset)
    if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (state, count):
        runs[-1] = (runs[-1][0], last, state, count)
    else:
        runs.append((offset, last, state, count))


def _took(taken: list[Acquired], first: int, last: int, count: int) -> None:
    """The acquired runs, with [first, last] of delivery count `count` added at the end."""
    if taken and taken[-1].last == first - 1 and taken[-1].delivery_count == count:
        taken[-1] = Acquired(taken[-1].first, last, count)
    else:
        taken.append(Acquired(first, last, count))


def _ranges(offsets: Iterable[int]) -> Iterator[tuple[int, int]]:
    """Ascending offsets as runs of (first, last)."""
    first = last = -2
    for offset in offsets:
        if offset != last + 1:
            if first >= 0:
                yield first, last
            first = offset
        last = offset
    if first >= 0:
        yield first, last


def _same_kind(first: int, types: list[int]) -> Iterator[tuple[int, int, int]]:
    """A batch's per-offset acknowledge types as runs of (first, last, type)."""
    low = first
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[i - 1]:
            yield low, first + i - 1, types[i - 1]
            low = first + i
