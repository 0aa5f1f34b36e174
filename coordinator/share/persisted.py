"""Share-partition states as `__share_group_state` holds them, rebuilt from its records (Kafka's
ShareCoordinatorShard replay): a ShareSnapshot replaces a share-partition's state; a ShareUpdate of
the same snapshot epoch lays its batches over it (newer ranges win where they overlap) and, when its
start offset is set, drops what lies below. Pure: the broker's share-state log reads the records.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ...protocol.records.share_state_records import SNAPSHOT, ShareStateRecord

StateKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
Run = tuple[int, int, int, int]  # (first, last, delivery state, delivery count)


@dataclass(slots=True)
class PersistedState:
    snapshot_epoch: int
    start: int
    batches: list[Run] = field(default_factory=list)
    create_timestamp: int = 0
    state_epoch: int = 0  # raised by InitializeShareGroupState (and an alter of the start offset)
    leader_epoch: int = 0  # of the data partition's leader that wrote it last (WriteShareGroupState)


def overlay(old: list[Run], new: list[Run], start: int) -> list[Run]:
    """`old` with the ranges of `new` laid over it, nothing below `start`, sorted by offset."""
    result = list(old)
    for first, last, state, count in new:
        kept: list[Run] = []
        for f, la, s, c in result:
            if la < first or f > last:
                kept.append((f, la, s, c))
                continue
            if f < first:
                kept.append((f, first - 1, s, c))
            if la > last:
                kept.append((last + 1, la, s, c))
        kept.append((first, last, state, count))
        result = kept
    return sorted((max(f, start), la, s, c) for f, la, s, c in result if la >= start)


class PersistedStates:
    """Every share-partition's last persisted state, by key."""

    def __init__(self) -> None:
        self.states: dict[StateKey, PersistedState] = {}

    def replay(self, record: ShareStateRecord) -> None:
        key = record.key
        if record.tombstone:
            self.states.pop(key, None)
            return
        if record.record_type == SNAPSHOT:
            self.states[key] = PersistedState(record.snapshot_epoch, record.start_offset, list(record.batches),
                                              record.create_timestamp, record.state_epoch, record.leader_epoch)
            return
        state = self.states.get(key)
        if state is None or state.snapshot_epoch != record.snapshot_epoch:
            return  # an update of a snapshot this log no longer holds: the later snapshot has it
        if record.start_offset >= 0:
            state.start = record.start_offset
        if record.leader_epoch >= 0:
            state.leader_epoch = record.leader_epoch
        state.batches = overlay(state.batches, list(record.batches), state.start)
