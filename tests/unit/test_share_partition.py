"""A share-partition's delivery state (KIP-932) driven by hand with a manual clock: acquisition,
acknowledgement (accept, release, reject, renew), lock expiry, the delivery count limit, members
leaving, control batches and the state persisted and restored."""

from __future__ import annotations

from kbroker.coordinator.share.share_partition import (
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, GAP, RELEASE, REJECT, RENEW, Acquired, Batch, SharePartition,
)
from kbroker.protocol.errors import ErrorCode

E = ErrorCode
LOCK_MS = 30_000


def make(limit: int = 5, max_locks: int = 2000) -> SharePartition:
    sp = SharePartition(LOCK_MS, limit, max_locks)
    sp.initialize(0)
    return sp


def test_two_members_split_the_records_and_each_is_acknowledged_once() -> None:
    sp = make()
    log = [Batch(0, 9)]
    assert sp.next_fetch_offset(10) == 0
    a = sp.acquire("a", log, 10, 4, 0)
    assert a == [Acquired(0, 3, 1)]
    b = sp.acquire("b", log, 10, 100, 0)
    assert b == [Acquired(4, 9, 1)]
    assert sp.next_fetch_offset(10) is None  # everything acquired
    assert sp.acknowledge("b", 0, 3, [ACCEPT], 0) is E.INVALID_RECORD_STATE  # not b's
    assert sp.acknowledge("a", 0, 3, [ACCEPT], 0) is E.NONE
    assert sp.start == 4
    # twice: below the start they are done, and Kafka's SharePartition skips such a batch (no error)
    assert sp.acknowledge("a", 0, 3, [ACCEPT], 0) is E.NONE
    assert sp.acknowledge("b", 5, 5, [ACCEPT], 0) is E.NONE
    assert sp.acknowledge("b", 5, 5, [ACCEPT], 0) is E.INVALID_RECORD_STATE  # twice, above the start: refused
    assert sp.acknowledge("b", 4, 4, [ACCEPT], 0) is E.NONE
    assert sp.acknowledge("b", 6, 9, [REJECT, ACCEPT, ACCEPT, ACCEPT], 0) is E.NONE
    assert (sp.start, sp.end, sp.records) == (10, 10, {})


def test_an_expired_lock_redelivers_with_a_higher_count_and_the_limit_archives() -> None:
    sp = make(limit=2)
    sp.acquire("a", [Batch(0, 1)], 2, 10, 0)
    assert sp.expire_locks(LOCK_MS - 1) == 0
    assert sp.next_deadline() == LOCK_MS
    assert sp.expire_locks(LOCK_MS) == 2
    assert sp.acquire("b", [Batch(0, 1)], 2, 10, LOCK_MS) == [Acquired(0, 1, 2)]
    assert sp.acknowledge("a", 0, 1, [ACCEPT], LOCK_MS) is E.INVALID_RECORD_STATE  # a's lock is gone
    # released at the limit: archived, the start moves past them
    assert sp.acknowledge("b", 0, 1, [RELEASE], LOCK_MS) is E.NONE
    assert (sp.start, sp.records) == (2, {})


def test_release_and_a_leaving_member_give_records_back_renew_keeps_them() -> None:
    sp = make()
    sp.acquire("a", [Batch(0, 3)], 4, 10, 0)
    assert sp.acknowledge("a", 0, 0, [RELEASE], 0) is E.NONE
    assert sp.records[0].state == AVAILABLE and sp.next_fetch_offset(4) == 0
    assert sp.acknowledge("a", 1, 1, [RENEW], 20_000) is E.NONE
    assert sp.expire_locks(LOCK_MS) == 2  # 2 and 3; 1 was renewed until 50 000
    assert sp.records[1].deadline == 20_000 + LOCK_MS
    assert sp.release_member("a") == 1
    assert [sp.records[o].state for o in range(4)] == [AVAILABLE] * 4
    assert sp.acquire("b", [Batch(0, 3)], 4, 10, 0) == [Acquired(0, 3, 2)]


def test_malformed_acknowledgements_and_gaps() -> None:
    sp = make()
    sp.acquire("a", [Batch(0, 2)], 3, 10, 0)
    assert sp.acknowledge("a", 0, 2, [ACCEPT, ACCEPT], 0) is E.INVALID_REQUEST
    assert sp.acknowledge("a", 2, 0, [ACCEPT], 0) is E.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 0, [9], 0) is E.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 5, [ACCEPT, GAP, ACCEPT, GAP, GAP, GAP], 0) is E.NONE
    assert sp.start == 3


def test_control_batches_and_log_gaps_are_never_delivered() -> None:
    sp = make()
    got = sp.acquire("a", [Batch(0, 1), Batch(2, 2, control=True), Batch(5, 6)], 7, 10, 0)
    assert got == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    assert sp.records[2].state == ARCHIVED and sp.records[3].state == ARCHIVED
    sp.acknowledge("a", 0, 1, [ACCEPT], 0)
    assert sp.start == 5


def test_the_lock_limit_caps_acquisition() -> None:
    sp = make(max_locks=3)
    assert sp.acquire("a", [Batch(0, 9)], 10, 100, 0) == [Acquired(0, 2, 1)]
    assert sp.next_fetch_offset(10) is None


def test_the_persisted_state_comes_back_with_acquired_records_available() -> None:
    sp = make()
    sp.acquire("a", [Batch(0, 5)], 6, 10, 0)
    sp.acknowledge("a", 1, 1, [ACCEPT], 0)
    sp.acknowledge("a", 2, 2, [REJECT], 0)
    batches = sp.state_batches()
    assert batches == [(0, 0, AVAILABLE, 1), (1, 1, ACKNOWLEDGED, 1), (2, 2, ARCHIVED, 1), (3, 5, AVAILABLE, 1)]
    again = SharePartition(LOCK_MS, 5, 2000)
    again.restore(sp.start, batches)
    assert (again.start, again.end) == (0, 6)
    assert again.acquire("b", [Batch(0, 5)], 6, 10, 0) == [Acquired(0, 0, 2), Acquired(3, 5, 2)]
    assert again.acknowledge("b", 0, 0, [ACCEPT], 0) is E.NONE
    assert again.start == 3
    again.truncate_below(4)
    assert again.start == 4 and again.acquired == 2


def test_a_rollback_gives_the_member_back_what_a_failed_write_acknowledged() -> None:
    """Kafka's rollbackOrProcessStateUpdates: the start goes back below the accepted records, each
    is the member's again under its lock, and what changed since (a released record acquired by
    another member) stays as it is."""
    sp = make()
    log = [Batch(0, 5)]
    assert sp.acquire("a", log, 6, 4, 0) == [Acquired(0, 3, 1)]
    error, undo = sp.acknowledge_all("a", [(0, 3, [ACCEPT, ACCEPT, REJECT, RELEASE]), (5, 5, [ACCEPT])], 0)
    assert error is E.INVALID_RECORD_STATE and undo is not None  # 5 is not a's: the first batch stands
    assert (sp.start, sp.archived_total) == (3, 1)
    assert sp.acquire("b", log, 6, 1, 5) == [Acquired(3, 3, 2)]  # released, taken by b meanwhile
    assert sp.rollback(undo) == 3
    assert sp.start == 0 and sp.acquired == 4 and sp.archived_total == 0
    assert [(o, e.state, e.member, e.count, e.deadline) for o, e in sorted(sp.records.items())] == [
        (0, 1, "a", 1, LOCK_MS), (1, 1, "a", 1, LOCK_MS), (2, 1, "a", 1, LOCK_MS), (3, 1, "b", 2, 5 + LOCK_MS)]
    assert sp.acknowledge("a", 0, 2, [ACCEPT], 0) is E.NONE  # the member acknowledges them again
    assert sp.start == 3


def test_the_persisted_start_is_the_one_before_the_change_as_kafka_writes_it() -> None:
    """Kafka's SharePartition writes an acknowledgement's state with the start it had before it, and
    moves its start once the write is done: its persisted start (DescribeShareGroupOffsets) is one
    write behind, the records it passed written as done."""
    sp = make()
    assert sp.acquire("a", [Batch(0, 5)], 6, 4, 0) == [Acquired(0, 3, 1)]
    assert sp.acknowledge("a", 0, 2, [ACCEPT, REJECT, ACCEPT], 0) is E.NONE
    assert sp.start == 3
    assert sp.snapshot() == (0, [(0, 0, ACKNOWLEDGED, 1), (1, 1, ARCHIVED, 1), (2, 2, ACKNOWLEDGED, 1),
                                 (3, 3, AVAILABLE, 1)])
    assert sp.snapshot() == (3, [(3, 3, AVAILABLE, 1)])  # the next write carries the start moved


def test_with_a_dead_letter_queue_archived_records_wait_in_archiving() -> None:
    """KIP-1191: a reject and the delivery count limit go ARCHIVING (persisted as 3), which holds the
    start until the copies are written; a gap is ARCHIVED at once, as Kafka's recordStateWithDlq."""
    from kbroker.coordinator.share.share_partition import ARCHIVING

    sp = make(limit=2)
    sp.dlq = True
    sp.acquire("a", [Batch(0, 3)], 4, 100, 0)
    assert sp.acknowledge("a", 0, 3, [REJECT, RELEASE, GAP, ACCEPT], 0) is E.NONE
    assert sp.acquire("a", [Batch(1, 1)], 4, 100, 0) == [Acquired(1, 1, 2)]
    assert sp.expire_locks(LOCK_MS) == 1  # delivered twice: the limit
    assert sp.start == 0 and sp.archiving() == [(0, 1, True), (1, 2, False)]
    assert sp.next_fetch_offset(5) == 4  # neither is delivered again
    assert sp.state_batches() == [(0, 0, ARCHIVING, 1), (1, 1, ARCHIVING, 2), (2, 2, ARCHIVED, 1),
                                  (3, 3, ACKNOWLEDGED, 1)]
    # a restart finds them ARCHIVING (the cause inferred from the count, as Kafka does)
    again = make(limit=2)
    again.restore(0, sp.state_batches())
    assert again.archiving() == [(0, 1, True), (1, 2, False)]
    assert sp.archived_to_dlq([0, 1]) == 2
    assert (sp.start, sp.archiving()) == (4, [])


def test_a_rollback_does_not_bring_back_archiving_records_whose_copies_were_written() -> None:
    """An acknowledgement's write fails after the DLQ copy of an earlier reject was written and the start
    passed it: the rollback puts the passed records back as they were, but that one stays ARCHIVED (it
    was ARCHIVING then; back in ARCHIVING no copy would be written for it and it held the start)."""
    from kbroker.coordinator.share.share_partition import ARCHIVING

    sp = make()
    sp.dlq = True
    sp.acquire("a", [Batch(0, 2)], 3, 100, 0)
    assert sp.acknowledge("a", 0, 0, [REJECT], 0) is E.NONE  # written; its copy follows
    error, undo = sp.acknowledge_all("a", [(1, 1, [ACCEPT])], 0)  # its write is under way
    assert error is E.NONE and undo is not None and sp.archiving() == [(0, 1, True)]
    assert sp.archived_to_dlq([0]) == 1 and sp.start == 2  # the copy is written
    assert sp.rollback(undo) == 1  # the write of the accept failed
    assert sp.archiving() == [] and sp.start == 1
    assert sp.records[1].state == ACQUIRED and sp.records[1].member == "a"
    assert ARCHIVING not in [state for _, _, state, _ in sp.state_batches()]
