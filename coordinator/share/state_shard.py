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
from .persisted import PersistedStates

E = ErrorCode


@dataclass(frozen=True, slots=True)
class Written:
    """The answer to a WriteState: NONE once durable, else the error."""

    error: ErrorCode = E.NONE

    def failed(self, code: ErrorCode) -> Written:
        return Written(code)


@dataclass(slots=True)
class WriteState:
    """Persist `record` (a snapshot or a tombstone) as the share-partition's state."""

    record: ShareStateRecord
    reply_to: Any = None


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
        if not record.tombstone:
            previous = self.states.states.get(record.key)
            record = dataclasses.replace(
                record, snapshot_epoch=0 if previous is None else previous.snapshot_epoch + 1,
                create_timestamp=now_ms if previous is None else previous.create_timestamp, write_timestamp=now_ms)
        outcome = Outcome()
        outcome.write([record], replies=[Reply(cmd.reply_to, Written())], durability=Durability.PIPELINED)
        return outcome

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
