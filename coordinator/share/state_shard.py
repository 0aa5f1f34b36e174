"""The share coordinator's shard of one `__share_group_state` partition (Kafka's
ShareCoordinatorShard), run by the generic coordinator runtime (coordinator/runtime/).

It holds the persisted state of every share-partition whose key falls in its partition, rebuilt from
the log by the runtime's loader (`replay`, at the broker's start, while the partition answers
COORDINATOR_LOAD_IN_PROGRESS) and changed only by its own writes: a write is a `WriteState` command
in its share-partition's turn (one key: group, topic id, partition), decided here (the snapshot epoch
follows the last one, the creation time is kept), appended by the runtime through the share-state
log's writer and replayed at once (PIPELINED), then answered once durable, as Kafka's runtime applies
at append and answers at commit. An append the log refuses leaves the state as it was; a failed fsync
unloads the partition. Either is answered with the error (already translated for clients by the
runtime); `persister_error` is what Kafka's SharePartition makes of it.

Pure: no clock but the one the runtime hands in, no I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.records.share_state_records import ShareStateRecord
from ..runtime.outcome import Durability, Outcome, Reply
from .persisted import PersistedStates, StateKey, overlay

E = ErrorCode


@dataclass(frozen=True, slots=True)
class Written:
    """The answer to a WriteState: NONE once durable, else the error."""

    error: ErrorCode = E.NONE

    def failed(self, code: ErrorCode) -> Written:
        return Written(code)


@dataclass(slots=True)
class WriteState:
    """Persist `record` (a snapshot or a tombstone) as the share-partition's state. Its state and
    leader epochs are checked as Kafka's ShareCoordinatorShard checks a WriteShareGroupState's (lower
    than the last recorded: FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, nothing written); -1 keeps the
    last one (the writes of the share-partitions this node leads, in-process). `initialize`: an
    InitializeShareGroupState (only its state epoch is checked; the state starts afresh)."""

    record: ShareStateRecord
    reply_to: Any = None
    initialize: bool = False
    merge: bool = False  # a WriteShareGroupState: its batches laid over the last state's (start -1: kept)


def state_key(record: ShareStateRecord) -> str:
    return f"{record.group}:{record.topic_id}:{record.partition}"


def persister_error(code: ErrorCode) -> ErrorCode:
    """What a share-partition answers when its state write failed with `code` (Kafka's
    SharePartition.fetchPersisterError): coordinator errors are COORDINATOR_NOT_AVAILABLE to the client."""
    if code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.GROUP_ID_NOT_FOUND, E.UNKNOWN_TOPIC_OR_PARTITION):
        return code
    if code in (E.FENCED_LEADER_EPOCH, E.FENCED_STATE_EPOCH):
        return E.NOT_LEADER_OR_FOLLOWER
    return E.UNKNOWN_SERVER_ERROR


class ShareStateShard:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.states = PersistedStates()

    def handle(self, cmd: WriteState, now_ms: int) -> Outcome:
        record = cmd.record
        outcome = Outcome()
        if not record.tombstone:
            previous = self.states.states.get(record.key)
            fenced = self.fenced(cmd)
            if fenced is not None:
                outcome.reply(cmd.reply_to, Written(fenced))
                return outcome
            leader_epoch, state_epoch = record.leader_epoch, record.state_epoch
            if previous is not None:
                leader_epoch = previous.leader_epoch if leader_epoch < 0 else leader_epoch
                state_epoch = previous.state_epoch if state_epoch < 0 else state_epoch
            if cmd.merge and previous is not None:
                start = previous.start if record.start_offset < 0 else record.start_offset
                record = dataclasses.replace(record, start_offset=start, batches=tuple(
                    overlay(previous.batches, list(record.batches), start)))
            record = dataclasses.replace(
                record, snapshot_epoch=0 if previous is None else previous.snapshot_epoch + 1,
                leader_epoch=max(leader_epoch, 0), state_epoch=max(state_epoch, 0),
                create_timestamp=now_ms if previous is None else previous.create_timestamp, write_timestamp=now_ms)
        outcome.write([record], replies=[Reply(cmd.reply_to, Written())], durability=Durability.PIPELINED)
        return outcome

    def fenced(self, cmd: WriteState) -> ErrorCode | None:
        """Kafka's maybeGetWriteStateError and maybeGetInitializeStateError: an epoch lower than the
        last recorded one of the key (reads record the leader epoch they carry: `read_epoch`)."""
        record, previous = cmd.record, self.states.states.get(cmd.record.key)
        if previous is None:
            return None
        if not cmd.initialize and 0 <= record.leader_epoch < previous.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        if 0 <= record.state_epoch < previous.state_epoch:
            return E.FENCED_STATE_EPOCH
        return None

    def read_epoch(self, key: StateKey, leader_epoch: int) -> ErrorCode | None:
        """A ReadShareGroupState (or its summary) of the key by a data leader of `leader_epoch`:
        FENCED_LEADER_EPOCH below the last recorded one, else recorded (-1: not checked), as Kafka's
        readStateAndMaybeUpdateLeaderEpoch does (kept in memory here: the next write persists it)."""
        state = self.states.states.get(key)
        if state is None or leader_epoch < 0:
            return None
        if leader_epoch < state.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        state.leader_epoch = leader_epoch
        return None

    def replay(self, record: ShareStateRecord) -> None:
        self.states.replay(record)

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        return Outcome()

    def begin_load(self) -> None:
        self.states = PersistedStates()

    def finish_load(self, now_ms: int) -> Outcome:
        return Outcome()

    def unload(self, now_ms: int) -> Outcome:
        self.states = PersistedStates()
        return Outcome()

    def key_of(self, cmd: WriteState) -> str:
        return state_key(cmd.record)

    def error_result(self, cmd: Any, code: ErrorCode) -> Written:
        return Written(code)
