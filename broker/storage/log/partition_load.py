"""Loading a partition's files (PartitionLog's start-up): the checkpoint, every segment (validated where
a crash or damage may have left it unsound), gaps and a tail lost while the broker was stopped, and
the leader-epoch history, rebuilt from the batches' headers when the checkpoint is damaged."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import structlog

from .checkpoint import read_checkpoint
from .epochs import LeaderEpochs
from .segment import LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = structlog.get_logger("kbroker.broker.storage.log.partition_log")


def load_partition_files(plog: PartitionLog, clean_shutdown: bool) -> None:
    directory = plog._dir
    # One listing of plain names: a start loads every partition, and three pathlib globs each were
    # most of the time to open 2,000 of them.
    names = os.listdir(directory)
    for name in names:
        # compaction output that never got swapped in, and half-written checkpoints
        if name.endswith(".cleaned") or name.endswith(".tmp"):
            os.unlink(os.path.join(directory, name))
    checkpoint = read_checkpoint(directory, plog.topic, plog.partition)
    checkpoint_start, recovery_point, checkpoint_end = (checkpoint.log_start_offset, checkpoint.recovery_point,
                                                        checkpoint.log_end_offset)
    plog.epochs = checkpoint.epochs
    bases = sorted(int(name[:-4]) for name in names if name.endswith(".log") and name[:-4].isdigit())
    interval = plog.config.index_interval_bytes
    segments = plog.segments
    damaged = False
    for i, base in enumerate(bases):
        last = i == len(bases) - 1
        # The active segment is always validated, clean shutdown or not: appends must never land
        # behind a batch that does not validate. Older ones are when the stop was unclean and they
        # are past the recovery point, when their index fails its sanity check, or when an
        # earlier segment was damaged.
        recover = last or damaged or (not clean_shutdown and base >= recovery_point)
        segment, result = LogSegment.open(directory, base, interval, recover=recover,
                                          created_ms=plog.clock.wall_ms())
        if segment.next_offset > base and segments and segments[-1].next_offset > base:
            # Overlaps the segment before it (which must have been damaged into nonsense): keep the
            # earlier data, never serve two batches for one offset.
            log.warning("segment_deleted_overlapping", file=str(segment.log_path), base_offset=base)
            segment.delete()
            continue
        segments.append(segment)
        if result is not None and result.truncated_bytes and not last:
            # Unlike Kafka (which refetches from replicas) we have no other copy: later segments
            # are kept, each validated, and the offsets lost in between become a gap readers skip.
            damaged = True
            log.warning("segment_truncated_in_middle_of_log", file=str(segment.log_path),
                        lost_from_offset=segment.next_offset, next_segment_base=bases[i + 1],
                        bytes=result.truncated_bytes)
    if not segments:
        segments.append(LogSegment(directory, checkpoint_start or 0, interval, created_ms=plog.clock.wall_ms()))
    plog._segment_bases = [s.base_offset for s in segments]
    if not plog.config.compact:  # compaction leaves gaps on purpose; elsewhere a gap is lost data
        for before, after in zip(segments, segments[1:]):
            if before.next_offset < after.base_offset:
                log.warning("log_gap_between_segments", file=str(before.log_path),
                            lost_from_offset=before.next_offset, lost_to_offset=after.base_offset - 1)
    if checkpoint_end is not None and plog.log_end_offset < checkpoint_end:
        # The log was cut (on a batch boundary, or recovery just truncated it) while the broker was
        # stopped after a clean close. The records are gone; their offsets must not be reused, or
        # consumers positioned past them would silently skip new records: restart at the old end.
        log.warning("log_end_behind_checkpoint", topic=plog.topic, partition=plog.partition,
                    log_end_offset=plog.log_end_offset, checkpointed_log_end_offset=checkpoint_end,
                    offsets_lost=checkpoint_end - plog.log_end_offset)
        plog.start_segment_at(checkpoint_end)
    first = plog.segments[0].base_offset
    start = first if checkpoint_start is None else max(checkpoint_start, first)
    plog.log_start_offset = min(start, plog.log_end_offset)
    plog._recovery_point = plog.active.base_offset
    if checkpoint.damaged and plog.log_end_offset > plog.log_start_offset:
        _rebuild_epochs(plog)


def _rebuild_epochs(plog: PartitionLog) -> None:
    """The leader-epoch history from the batches' headers, its checkpoint being damaged: every batch
    carries the epoch it was appended in."""
    epochs = LeaderEpochs()
    for segment in plog.segments:
        if segment.size == 0:
            continue
        for _, header in segment.iter_headers():
            epochs.assign(header.partition_leader_epoch, header.base_offset)
    plog.epochs = epochs
    log.warning("leader_epochs_rebuilt", topic=plog.topic, partition=plog.partition, epochs=epochs.to_json())
