"""The share-partition keeps its in-flight records as runs (Kafka's InFlightBatch): a fetch makes one
run, acknowledgements split a run only where its records' fates diverge, and neighbours in the same
state join again. Checked by hand (splits, joins, what each costs in runs) and against the
record-by-record model it replaced (tests/unit/share_partition_model.py), driven with the same
random operations from fixed seeds: every answer, every record's state and every snapshot equal."""

from __future__ import annotations

import random

import pytest

from kbroker.coordinator.share.share_partition import (
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, ARCHIVING, AVAILABLE, GAP, RELEASE, REJECT, RENEW, Acquired, Batch, SharePartition,
)
from kbroker.protocol.errors import ErrorCode

from . import share_partition_model as model
from .test_share_partition import LOCK_MS, make

E = ErrorCode


def shape(sp: SharePartition) -> list[tuple[int, int, int, int, str | None]]:
    return [(r.first, r.last, r.state, r.count, r.member) for r in sp.runs]


def test_a_fetch_is_one_run_and_a_whole_acknowledgement_keeps_it_one() -> None:
    sp = make()
    assert sp.acquire("a", [Batch(0, 4999)], 5000, 500, 0, whole_batches=True) == [Acquired(0, 4999, 1)]
    assert shape(sp) == [(0, 4999, ACQUIRED, 1, "a")]
    assert sp.acknowledge("a", 0, 4999, [ACCEPT], 0) is E.NONE
    assert (sp.start, sp.end, sp.runs, sp.passed) == (5000, 5000, [], [(0, 4999, ACKNOWLEDGED, 1)])
    assert sp.snapshot() == (0, [(0, 4999, ACKNOWLEDGED, 1)])


def test_diverging_acknowledgements_split_a_run_and_the_same_state_joins_it_again() -> None:
    sp = make()
    sp.acquire("a", [Batch(0, 99)], 100, 100, 0)
    assert sp.acknowledge("a", 10, 19, [RELEASE], 0) is E.NONE  # splits in three
    assert shape(sp) == [(0, 9, ACQUIRED, 1, "a"), (10, 19, AVAILABLE, 1, None), (20, 99, ACQUIRED, 1, "a")]
    assert sp.acknowledge("a", 50, 50, [RENEW], 1_000) is E.NONE  # a lock of its own: its own run
    assert shape(sp)[2:] == [(20, 49, ACQUIRED, 1, "a"), (50, 50, ACQUIRED, 1, "a"), (51, 99, ACQUIRED, 1, "a")]
    assert sp.runs[3].deadline == 1_000 + LOCK_MS
    # records acquired again by the same member under the same lock join their neighbours
    assert sp.acquire("a", [Batch(0, 99)], 100, 100, 0) == [Acquired(10, 19, 2)]
    assert shape(sp)[:3] == [(0, 9, ACQUIRED, 1, "a"), (10, 19, ACQUIRED, 2, "a"), (20, 49, ACQUIRED, 1, "a")]
    # per-record types: one part per run of equal types
    assert sp.acknowledge("a", 0, 3, [ACCEPT, ACCEPT, REJECT, ACCEPT], 0) is E.NONE
    assert sp.start == 4 and sp.passed == [(0, 1, ACKNOWLEDGED, 1), (2, 2, ARCHIVED, 1), (3, 3, ACKNOWLEDGED, 1)]
    # the lock of 50 expires later than the rest: the rest goes back at LOCK_MS, and joins as one run
    assert sp.expire_locks(LOCK_MS) == 95
    assert shape(sp) == [(4, 9, AVAILABLE, 1, None), (10, 19, AVAILABLE, 2, None), (20, 49, AVAILABLE, 1, None),
                         (50, 50, ACQUIRED, 1, "a"), (51, 99, AVAILABLE, 1, None)]
    assert sp.release_member("a") == 1
    assert shape(sp) == [(4, 9, AVAILABLE, 1, None), (10, 19, AVAILABLE, 2, None), (20, 99, AVAILABLE, 1, None)]
    assert sp.state_batches() == [(4, 9, AVAILABLE, 1), (10, 19, AVAILABLE, 2), (20, 99, AVAILABLE, 1)]


def test_a_redelivery_takes_part_of_a_run_and_the_limit_cuts_inside_it() -> None:
    sp = make(max_locks=25)
    sp.acquire("a", [Batch(0, 19)], 20, 20, 0)
    sp.release_member("a")
    assert sp.acquire("b", [Batch(0, 19)], 20, 7, 0) == [Acquired(0, 6, 2)]
    assert shape(sp) == [(0, 6, ACQUIRED, 2, "b"), (7, 19, AVAILABLE, 1, None)]
    # batch_optimized: the batch the limit falls in is taken to its end, past the lock limit (as Kafka)
    assert sp.acquire("c", [Batch(0, 19), Batch(20, 39)], 40, 1, 0, whole_batches=True) == [Acquired(7, 19, 2)]
    assert sp.acquired == 20 and sp.next_fetch_offset(40) == 20
    assert sp.acquire("c", [Batch(20, 39)], 40, 100, 0) == [Acquired(20, 24, 1)]  # 25 locks
    assert sp.next_fetch_offset(40) is None


def test_a_rollback_puts_back_runs_the_start_had_passed() -> None:
    sp = make()
    sp.acquire("a", [Batch(0, 9)], 10, 10, 0)
    error, undo = sp.acknowledge_all("a", [(0, 9, [ACCEPT])], 0)
    assert error is E.NONE and undo is not None and sp.start == 10 and sp.runs == []
    assert sp.rollback(undo) == 10
    assert shape(sp) == [(0, 9, ACQUIRED, 1, "a")] and sp.runs[0].deadline == LOCK_MS
    assert sp.snapshot() == (0, [(0, 9, AVAILABLE, 1)])


def test_restore_fills_holes_and_lets_later_ranges_win() -> None:
    sp = SharePartition(LOCK_MS, 5, 2000)
    sp.restore(10, [(5, 12, ACKNOWLEDGED, 1), (15, 20, AVAILABLE, 2), (18, 19, ARCHIVED, 3)])
    # 10-12 acknowledged and the hole 13-14 archived: the start passes them
    assert (sp.start, sp.end, sp.passed) == (15, 21, [(10, 12, ACKNOWLEDGED, 1), (13, 14, ARCHIVED, 0)])
    assert shape(sp) == [(15, 17, AVAILABLE, 2, None), (18, 19, ARCHIVED, 3, None), (20, 20, AVAILABLE, 2, None)]


def test_archiving_runs_split_where_the_cause_differs_and_join_once_copied() -> None:
    """With a dead letter queue, rejected records and those the delivery count limit archived are
    ARCHIVING runs apart (their copies' headers differ), both holding the start; once copied they are
    one ARCHIVED run the start passes."""
    sp = make(limit=1)
    sp.dlq = True
    sp.acquire("a", [Batch(0, 9)], 10, 10, 0)
    assert sp.acknowledge("a", 0, 4, [REJECT], 0) is E.NONE
    assert sp.expire_locks(LOCK_MS) == 5  # 5-9 delivered once: the limit
    assert [(r.first, r.last, r.state, r.count, r.rejected) for r in sp.runs] == [
        (0, 4, ARCHIVING, 1, True), (5, 9, ARCHIVING, 1, False)]
    assert sp.state_batches() == [(0, 9, ARCHIVING, 1)]  # persisted as one: the cause is not written
    assert sp.archived_to_dlq([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]) == 10
    assert (sp.start, sp.runs, sp.passed) == (10, [], [(0, 9, ARCHIVED, 1)])


# -- the run-based state against the record-by-record model --------------------------------------


def _log(rng: random.Random, size: int) -> list[tuple[int, int, bool]]:
    """Batches (base, last, control) with gaps (compaction) between some."""
    out, at = [], 0
    while at < size:
        at += rng.choice((0, 0, 0, 0, 1, 3))
        n = rng.choice((1, 1, 2, 5, 8, 20))
        out.append((at, at + n - 1, rng.random() < 0.1))
        at += n
    return out


def _equal(new: SharePartition, old: model.SharePartition) -> None:
    assert (new.start, new.end, new.acquired, new.archived_total) == (old.start, old.end, old.acquired,
                                                                       old.archived_total)
    mine = {o: (e.state, e.count, e.member, e.deadline if e.state == ACQUIRED else 0) for o, e in new.records.items()}
    theirs = {o: (e.state, e.count, e.member, e.deadline if e.state == ACQUIRED else 0) for o, e in old.records.items()}
    assert mine == theirs
    assert new.state_batches() == old.state_batches()
    assert new.archiving() == old.archiving()
    assert new.counts() == old.counts() and new.next_deadline() == old.next_deadline()
    for a, b in zip(new.runs, new.runs[1:]):  # contiguous, and no two neighbours that could be one
        assert a.last + 1 == b.first and not a.joins(b)
    assert all(r.state == ARCHIVING or not r.rejected for r in new.runs)  # so it splits ARCHIVING runs only
    assert sum(r.last - r.first + 1 for r in new.runs) == new.end - new.start


@pytest.mark.parametrize("dlq", ["off", "on", "toggled"])
@pytest.mark.parametrize("seed", range(40))
def test_runs_answer_as_the_record_by_record_model(seed: int, dlq: str) -> None:
    """With a dead letter queue (share.version 2) off, on, or set and unset as a group's config is
    (the manager reads it at each change): ARCHIVING records, their copies written at random moments."""
    rng = random.Random(seed)
    limit, max_locks = rng.choice((2, 3, 5)), rng.choice((7, 30, 2000))
    new, old = SharePartition(LOCK_MS, limit, max_locks), model.SharePartition(LOCK_MS, limit, max_locks)
    new.initialize(0)
    old.initialize(0)
    log = _log(rng, 200)
    members, now, undos = ("a", "b", "c"), 0, []
    for _ in range(300):
        now += rng.choice((0, 1_000, 7_000))
        new.dlq = old.dlq = dlq == "on" or (dlq == "toggled" and (new.dlq if rng.random() < 0.9 else not new.dlq))
        if new.dlq and rng.random() < 0.15:  # some of the copies waiting are written (phase 2)
            waiting = [offset for offset, _, _ in old.archiving()]
            written = rng.sample(waiting, rng.randint(0, len(waiting))) + [new.end + 1]
            assert new.archived_to_dlq(written) == old.archived_to_dlq(written)
            _equal(new, old)
        op = rng.random()
        hw = min(log[-1][1] + 1, 20 + now // 500)
        if op < 0.3:
            at = new.next_fetch_offset(hw)
            assert at == old.next_fetch_offset(hw)
            if at is None:
                continue
            read = [b for b in log if b[1] >= at][:rng.choice((1, 2, 4))]
            args = (rng.choice(members), hw, rng.choice((1, 3, 10, 50)), now, rng.random() < 0.5)
            batches = [Batch(*b) for b in read]
            assert new.acquire(args[0], batches, *args[1:]) == old.acquire(args[0], batches, *args[1:])
        elif op < 0.6:
            member = rng.choice(members)
            batches = []
            for _ in range(rng.choice((1, 1, 2, 3))):
                first = rng.randrange(max(0, new.start - 3), new.end + 3)
                last = first + rng.choice((0, 1, 2, 5, 12))
                kinds = (ACCEPT, ACCEPT, RELEASE, REJECT, RENEW, GAP)
                types = ([rng.choice(kinds)] if rng.random() < 0.6 else
                         [rng.choice(kinds) for _ in range(last - first + 1)])
                if rng.random() < 0.03:
                    types = types + [ACCEPT]  # malformed
                batches.append((first, last, types))
            got_error, got_undo = new.acknowledge_all(member, [(f, la, list(t)) for f, la, t in batches], now)
            want_error, want_undo = old.acknowledge_all(member, [(f, la, list(t)) for f, la, t in batches], now)
            assert got_error == want_error and (got_undo is None) == (want_undo is None)
            if got_undo is not None and want_undo is not None:
                undos.append((got_undo, want_undo))
        elif op < 0.68 and undos:
            got_undo, want_undo = undos.pop(rng.randrange(len(undos)))
            assert new.rollback(got_undo) == old.rollback(want_undo)
        elif op < 0.78:
            assert new.expire_locks(now) == old.expire_locks(now)
        elif op < 0.83:
            member = rng.choice(members)
            assert new.release_member(member) == old.release_member(member)
        elif op < 0.93:
            assert new.snapshot() == old.snapshot()
        elif op < 0.96:
            log_start = new.start + rng.choice((1, 4, 30))
            new.truncate_below(log_start)
            old.truncate_below(log_start)
        else:  # a restart: back from the persisted state, locks gone
            start, batches = new.snapshot()
            assert (start, batches) == old.snapshot()
            new, old = SharePartition(LOCK_MS, limit, max_locks), model.SharePartition(LOCK_MS, limit, max_locks)
            new.dlq = old.dlq = dlq != "off"
            new.restore(start, batches)
            old.restore(start, batches)
            undos.clear()
        _equal(new, old)

