"""The share coordinator's answers to the state RPCs (KIP-932: InitializeShareGroupState 83,
ReadShareGroupState 84, WriteShareGroupState 85, DeleteShareGroupState 86,
ReadShareGroupStateSummary 87), as Kafka's ShareCoordinatorService and ShareCoordinatorShard give
them, over this node's share coordinator (share_state.py).

A data partition's leader asks them of the node leading the `__share_group_state` partition of the
share-partition's key (FindCoordinator key type SHARE, "group:topicId:partition"). Per partition of a
request: NOT_COORDINATOR when this node does not lead that state partition (over PostgreSQL, or
another node of `serve --nodes N`), COORDINATOR_LOAD_IN_PROGRESS while it replays it,
COORDINATOR_NOT_AVAILABLE before the topic exists; UNKNOWN_TOPIC_OR_PARTITION for a data partition
the catalogue does not know (reads and writes, as the shard's metadata image check); then the shard:
a write or a read carrying a leader epoch below the last recorded one is FENCED_LEADER_EPOCH (a
deposed data leader's late write changes nothing), a write or an initialize carrying a state epoch
below the last one is FENCED_STATE_EPOCH. A write is answered once durable. An empty group id is
INVALID_REQUEST for every partition (ShareCoordinatorService's check), a negative partition too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...coordinator.share.persisted import PersistedState, Run
from ...coordinator.share.state_shard import WriteState
from ...protocol.errors import ErrorCode
from ...protocol.records.share_state_records import SNAPSHOT, ShareStateRecord
from .share_state import TOPIC, partition_for

if TYPE_CHECKING:
    from ..services import BrokerServices

E = ErrorCode
UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory: a share-partition with no state
COMPLETE = (2, 4)  # ACKNOWLEDGED, ARCHIVED: their delivery is complete


@dataclass(slots=True)
class StateAnswer:
    """One partition's answer: its error, or its state (Read, ReadSummary)."""

    error: ErrorCode = E.NONE
    message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = UNINITIALIZED_START_OFFSET
    batches: list[Run] = field(default_factory=list)
    complete: int | None = None  # as a ReadShareGroupStateSummary answered it (else counted from `batches`)

    @property
    def delivery_complete_count(self) -> int:
        if self.complete is not None:
            return self.complete
        return sum(last - first + 1 for first, last, state, _ in self.batches if state in COMPLETE)


def _error(code: ErrorCode, message: str | None = None) -> StateAnswer:
    return StateAnswer(code, message if message is not None else _MESSAGES.get(code))


# Errors.message() of the codes these answers carry (Kafka puts them in ErrorMessage)
_MESSAGES = {
    E.NOT_COORDINATOR: "This is not the correct coordinator.",
    E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    E.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    E.FENCED_STATE_EPOCH: "The state epoch in the request is older than the current state epoch.",
}


class ShareStateRpcs:
    """What this node's share coordinator answers a state RPC's partition."""

    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker

    def check(self, group: str, topic_id: uuid.UUID, partition: int, *, known_topic: bool) -> StateAnswer | None:
        """Why this node does not serve the key now (None: it does)."""
        if not group:
            return _error(E.INVALID_REQUEST, "Group id must be specified and non-empty")
        if partition < 0:
            return _error(E.INVALID_REQUEST, "Partition id cannot be negative.")
        broker = self.broker
        log = broker.share_state
        info = broker.catalogue.topic(TOPIC)
        if info is None:
            return _error(E.COORDINATOR_NOT_AVAILABLE)
        state_partition = partition_for(group, topic_id, partition, info.num_partitions)
        if not broker.catalogue.leads(info, state_partition, broker.node_id):
            return _error(E.NOT_COORDINATOR)  # another node of `--nodes N` leads it
        why = log.runtime.precheck(state_partition)
        if why is not None:
            return _error(why)
        if known_topic:
            name = broker.catalogue.names_by_id().get(topic_id)
            if name is None or not broker.catalogue.has_partition(name, partition):
                return _error(E.UNKNOWN_TOPIC_OR_PARTITION)
        return None

    def _state(self, group: str, topic_id: uuid.UUID, partition: int) -> tuple[object, PersistedState | None]:
        log = self.broker.share_state
        shard = log.runtime.shard(partition_for(group, topic_id, partition, log.num_partitions))
        return shard, None if shard is None else shard.states.states.get((group, topic_id, partition))

    def read(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateAnswer:
        """ReadShareGroupState (and its summary): the state, start offset -1 and state epoch 0 when
        there is none; the leader epoch recorded."""
        refused = self.check(group, topic_id, partition, known_topic=True)
        if refused is not None:
            return refused
        shard, state = self._state(group, topic_id, partition)
        if state is None:
            return StateAnswer()
        fenced = shard.read_epoch((group, topic_id, partition), leader_epoch)  # type: ignore[attr-defined]
        if fenced is not None:
            return _error(fenced)
        return StateAnswer(E.NONE, None, state.state_epoch, state.leader_epoch, state.start, list(state.batches))

    async def write(self, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[Run]) -> StateAnswer:
        """WriteShareGroupState: the batches laid over the state (a start of -1 keeps it), once durable."""
        refused = self.check(group, topic_id, partition, known_topic=True)
        if refused is not None:
            return refused
        record = ShareStateRecord(SNAPSHOT, group, topic_id, partition, 0, start_offset, tuple(batches),
                                  state_epoch=state_epoch, leader_epoch=leader_epoch)
        return await self._submit(WriteState(record, merge=True))

    async def initialize(self, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> StateAnswer:
        """InitializeShareGroupState: the state starts at `start_offset` with nothing in flight."""
        refused = self.check(group, topic_id, partition, known_topic=False)
        if refused is not None:
            return refused
        record = ShareStateRecord(SNAPSHOT, group, topic_id, partition, 0, start_offset, (),
                                  state_epoch=state_epoch, leader_epoch=-1)
        return await self._submit(WriteState(record, initialize=True))

    async def delete(self, group: str, topic_id: uuid.UUID, partition: int) -> StateAnswer:
        """DeleteShareGroupState: a tombstone of the key, once durable."""
        refused = self.check(group, topic_id, partition, known_topic=False)
        if refused is not None:
            return refused
        if self._state(group, topic_id, partition)[1] is None:
            return StateAnswer()  # nothing to forget
        record = ShareStateRecord(SNAPSHOT, group, topic_id, partition, -1, -1, (), tombstone=True)
        return await self._submit(WriteState(record))

    async def _submit(self, cmd: WriteState) -> StateAnswer:
        written = await self.broker.share_state.submit(cmd)
        return StateAnswer() if written.error is E.NONE else _error(written.error)
