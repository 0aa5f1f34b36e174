"""Partitions that hold nothing and have not been used since the broker made or loaded them.

A topic of thousands of partitions, most of them never written, is what test clusters create; each
partition's log object with its segment costs about 1 KB. So a partition found empty (one segment,
no bytes) right after creation or start-up keeps no objects: the manager records only its segment's
base offset here, and builds its log with the first use (`LogManager.get_log`). Nothing touches a
dormant partition's files meanwhile, so the log built then is the one a load would have built, but
for its segment's creation time (the wake's, as a load's would be the load's), which only a
time-based roll of batches without timestamps reads. Its producer state (producer_state.py) is
read with its first use too, as a new partition's is.

Per topic: one byte per partition (1 = dormant) and the base offsets that are not 0 (a log emptied
by retention or truncation keeps its offsets; one just created starts at 0).

A start that finds a partition's directory holding one empty segment and nothing else
(`sole_empty_segment`) records it here without loading it: the load would find exactly that,
clean shutdown or not. Anything more (records, a stale index, a checkpoint, a producer snapshot, a
half-written file) is loaded, checked and repaired as before.
"""

from __future__ import annotations

import os
from stat import S_ISREG
from typing import Iterator

from .segment import SEGMENT_FILE_SUFFIXES, segment_file_name

_SORTED_SUFFIXES = tuple(sorted(SEGMENT_FILE_SUFFIXES))  # as a sorted listing has them


def sole_empty_segment(directory: str) -> int | None:
    """The base offset when `directory` holds one segment's three files, all empty, and nothing else
    (what a new partition leaves, or one that stayed empty); None for anything else, a missing
    directory included."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    if len(names) != 3:
        return None
    names.sort()
    stem = names[0].partition(".")[0]
    if len(stem) != 20 or not (stem.isascii() and stem.isdigit()):  # int() refuses other digits
        return None
    base = int(stem)
    if names != [segment_file_name(base, suffix) for suffix in _SORTED_SUFFIXES]:
        return None
    try:
        for name in names:
            found = os.stat(os.path.join(directory, name))
            if found.st_size or not S_ISREG(found.st_mode):  # anything odd is the load's to report
                return None
    except OSError:
        return None
    return base


class _Topic:
    __slots__ = ("flags", "bases", "count")

    def __init__(self) -> None:
        self.flags = bytearray()
        self.bases: dict[int, int] = {}
        self.count = 0


class DormantPartitions:
    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, topic: str, partition: int, base_offset: int) -> None:
        entry = self._topics.get(topic)
        if entry is None:
            entry = self._topics[topic] = _Topic()
        flags = entry.flags
        if partition >= len(flags):
            flags.extend(bytes(partition + 1 - len(flags)))
        if not flags[partition]:
            flags[partition] = 1
            entry.count += 1
            self._count += 1
        if base_offset:
            entry.bases[partition] = base_offset
        else:
            entry.bases.pop(partition, None)

    def __contains__(self, key: tuple[str, int]) -> bool:
        entry = self._topics.get(key[0])
        partition = key[1]
        return entry is not None and 0 <= partition < len(entry.flags) and entry.flags[partition] == 1

    def take(self, topic: str, partition: int) -> int | None:
        """Remove the partition; its segment's base offset, or None when it is not dormant."""
        if (topic, partition) not in self:
            return None
        entry = self._topics[topic]
        entry.flags[partition] = 0
        entry.count -= 1
        self._count -= 1
        base = entry.bases.pop(partition, 0)
        if not entry.count:
            del self._topics[topic]
        return base

    def items(self) -> Iterator[tuple[str, int, int]]:
        """(topic, partition, base offset) of every dormant partition."""
        for topic, entry in list(self._topics.items()):
            for partition, flag in enumerate(entry.flags):
                if flag:
                    yield topic, partition, entry.bases.get(partition, 0)
