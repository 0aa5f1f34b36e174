"""A partition's leader-epoch history: (epoch, start offset) per leadership term (Kafka's
LeaderEpochFileCache), kept in the partition's checkpoint (checkpoint.py).

A term starts when the catalogue makes this node the partition's leader with a new epoch
(`PartitionLog.assign_leader_epoch`, Kafka's maybeAssignEpochStartOffset at becomeLeader): its entry
starts at the log end, and every batch appended in it carries the epoch. An empty history means what
every kbroker before epochs wrote: epoch 0 from the log start, the one term of a partition whose
leader never changed, so such a partition writes nothing for it.

`end_offset_for` answers OffsetForLeaderEpoch exactly as Kafka's endOffsetFor: for the latest epoch,
the log end; for an older one, that epoch (or the closest older one we know) and the start of the
next; for one older than any we know, the start of the first we know; for one newer than any,
(-1, -1).
"""

from __future__ import annotations

from bisect import bisect_right

UNDEFINED = -1


class LeaderEpochs:
    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = entries or []

    @classmethod
    def from_json(cls, raw: object) -> LeaderEpochs:
        """From the checkpoint's list of [epoch, start offset]; ValueError when it is not one."""
        if not isinstance(raw, list):
            raise ValueError("leader_epochs must be a list")
        entries = [(int(e), int(s)) for e, s in raw]
        for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
            if e2 <= e1 or s2 < s1:
                raise ValueError(f"leader_epochs out of order: {entries}")
        return cls(entries)

    def to_json(self) -> list[list[int]]:
        return [[e, s] for e, s in self.entries]

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def epoch_at(self, offset: int) -> int:
        """The epoch the record at `offset` was appended in (the term whose start is the last at or
        before it); 0 before every term we know."""
        entries = self.entries
        i = bisect_right([start for _, start in entries], offset)
        return entries[i - 1][0] if i else 0

    def assign(self, epoch: int, start_offset: int) -> bool:
        """A new term from `start_offset`: True when the history changed (it must then be persisted).
        As Kafka's assign: entries that would break the order (an epoch not older, a start not
        earlier) are dropped first."""
        entries = self.entries
        if entries and entries[-1][0] == epoch and start_offset >= entries[-1][1]:
            return False
        if not entries and epoch == 0:
            return False  # what the empty history says already
        while entries and (entries[-1][0] >= epoch or entries[-1][1] >= start_offset):
            entries.pop()
        entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was cut at `end_offset`: terms that started at or after it are gone (Kafka's
        truncateFromEnd). True when the history changed."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if len(kept) == len(self.entries):
            return False
        self.entries = kept
        return True

    def end_offset_for(self, requested: int, log_start_offset: int, log_end_offset: int) -> tuple[int, int]:
        if requested == UNDEFINED:
            return UNDEFINED, UNDEFINED
        entries = self.entries or [(0, log_start_offset)]
        if requested == entries[-1][0]:
            return requested, log_end_offset
        epochs = [e for e, _ in entries]
        higher = bisect_right(epochs, requested)
        if higher == len(entries):
            return UNDEFINED, UNDEFINED  # newer than any term we know
        start_of_higher = max(entries[higher][1], log_start_offset)
        if higher == 0:
            return requested, start_of_higher  # older than any term we know
        return entries[higher - 1][0], start_of_higher
