"""The share coordinator's shard (coordinator/share/state_shard.py) deciding the state RPCs' writes as
Kafka's ShareCoordinatorShard does: epochs below the last recorded one are fenced and write nothing,
-1 keeps the last ones (kbroker's in-process writes), a WriteShareGroupState's batches are laid over
the state, an initialize starts it afresh, a read records its leader epoch. Pure: no clock, no I/O."""

from __future__ import annotations

import uuid

from kbroker.coordinator.share.state_shard import ShareStateShard, WriteState, Written
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.records.share_state_records import SNAPSHOT, ShareStateRecord

TID = uuid.UUID(int=7)
KEY = ("g", TID, 0)


def record(start: int, batches=(), state_epoch: int = -1, leader_epoch: int = -1) -> ShareStateRecord:
    return ShareStateRecord(SNAPSHOT, "g", TID, 0, 0, start, tuple(batches), state_epoch=state_epoch,
                            leader_epoch=leader_epoch)


def run(shard: ShareStateShard, cmd: WriteState, now_ms: int = 1000) -> tuple[E, ShareStateRecord | None]:
    """The command's answer, and the record it wrote (replayed at once, as the runtime does)."""
    cmd.reply_to = "the caller"  # as the runtime sets it (a reply to nobody is dropped)
    outcome = shard.handle(cmd, now_ms)
    if not outcome.writes:
        return outcome.replies[0].result.error, None
    (written,) = outcome.writes[0].records
    shard.replay(written)
    return outcome.writes[0].replies[0].result.error, written


def test_epochs_are_kept_checked_and_fenced():
    shard = ShareStateShard(0)
    assert run(shard, WriteState(record(5, state_epoch=1), initialize=True))[0] == E.NONE
    error, written = run(shard, WriteState(record(-1, [(5, 7, 2, 1)], 1, 3), merge=True))
    assert error == E.NONE and (written.start_offset, written.leader_epoch, written.state_epoch) == (5, 3, 1)
    assert written.snapshot_epoch == 1
    # a deposed leader (epoch 2) and a stale state epoch: refused, nothing written
    assert run(shard, WriteState(record(9, [], 1, 2), merge=True)) == (E.FENCED_LEADER_EPOCH, None)
    assert run(shard, WriteState(record(9, [], 0, 3), merge=True)) == (E.FENCED_STATE_EPOCH, None)
    assert run(shard, WriteState(record(0, state_epoch=0), initialize=True)) == (E.FENCED_STATE_EPOCH, None)
    # an in-process write (-1, -1) keeps both epochs and replaces the batches
    error, written = run(shard, WriteState(record(6, [(8, 8, 0, 1)])))
    assert error == E.NONE and (written.leader_epoch, written.state_epoch, written.batches) == (3, 1, ((8, 8, 0, 1),))
    # a read by a newer leader records its epoch: the older one's write is fenced from then on
    assert shard.read_epoch(KEY, 2) == E.FENCED_LEADER_EPOCH
    assert shard.read_epoch(KEY, 4) is None
    assert run(shard, WriteState(record(-1, [], 1, 3), merge=True)) == (E.FENCED_LEADER_EPOCH, None)


def test_a_write_lays_its_batches_over_the_state():
    shard = ShareStateShard(0)
    run(shard, WriteState(record(0, [(0, 9, 0, 1)], 0, 0), merge=True))
    error, written = run(shard, WriteState(record(-1, [(3, 4, 2, 1)], 0, 0), merge=True))
    assert written.batches == ((0, 2, 0, 1), (3, 4, 2, 1), (5, 9, 0, 1)) and written.start_offset == 0
    error, written = run(shard, WriteState(record(4, [(5, 5, 4, 2)], 0, 0), merge=True))  # the start moves
    assert written.batches == ((4, 4, 2, 1), (5, 5, 4, 2), (6, 9, 0, 1)) and written.start_offset == 4
    state = shard.states.states[KEY]
    assert (state.start, state.batches, state.snapshot_epoch) == (4, list(written.batches), 2)


def test_a_tombstone_is_never_fenced():
    shard = ShareStateShard(0)
    run(shard, WriteState(record(0, [], 3, 3), merge=True))
    tombstone = ShareStateRecord(SNAPSHOT, "g", TID, 0, -1, -1, (), tombstone=True)
    assert run(shard, WriteState(tombstone))[0] == E.NONE
    assert KEY not in shard.states.states
    assert isinstance(shard.error_result(None, E.NOT_COORDINATOR), Written)
