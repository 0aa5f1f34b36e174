"""Time- and size-based retention for `cleanup.policy` containing "delete" (Kafka's deleteOldSegments)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from .partition_log import PartitionLog
    from .segment import LogSegment

log = structlog.get_logger(__name__)


def _segment_age_ms(segment: LogSegment, now_ms: int) -> int:
    # Kafka ages a segment by its largest record timestamp, falling back to the file's mtime when the
    # segment holds no timestamps.
    newest = segment.max_timestamp if segment.max_timestamp >= 0 else segment.last_modified_ms()
    return now_ms - newest


def _expired_prefix_by_time(plog: PartitionLog, now_ms: int) -> int:
    retention_ms = plog.config.retention_ms
    if retention_ms < 0:
        return 0
    count = 0
    for segment in plog.segments:
        if segment.size == 0 or _segment_age_ms(segment, now_ms) <= retention_ms:
            break
        count += 1
    return count


def _excess_prefix_by_size(plog: PartitionLog) -> int:
    retention_bytes = plog.config.retention_bytes
    if retention_bytes < 0:
        return 0
    excess = plog.size_bytes - retention_bytes
    count = 0
    for segment in plog.segments[:-1]:
        if excess - segment.size < 0:
            break
        excess -= segment.size
        count += 1
    return count


def apply_retention(plog: PartitionLog, now_ms: int) -> int:
    """Delete whole inactive segments past retention.ms / retention.bytes; returns how many went.

    When even the active segment has expired, it is rolled first (as Kafka does) so the expired data can
    go while an empty active segment remains. log_start_offset moves to the first remaining segment.
    """
    deleted = 0
    if plog.config.delete:
        expired = _expired_prefix_by_time(plog, now_ms)
        if expired == len(plog.segments):
            plog.roll(now_ms)
        for _ in range(min(expired, len(plog.segments) - 1)):
            reason_ms = _segment_age_ms(plog.segments[0], now_ms)
            log.info("retention_delete", topic=plog.topic, partition=plog.partition, reason="time", age_ms=reason_ms)
            plog.remove_oldest_segment()
            deleted += 1
        for _ in range(_excess_prefix_by_size(plog)):
            log.info("retention_delete", topic=plog.topic, partition=plog.partition, reason="size")
            plog.remove_oldest_segment()
            deleted += 1
    deleted += plog.delete_segments_before_log_start()
    if deleted:
        plog.log_start_offset = max(plog.log_start_offset, plog.segments[0].base_offset)
        plog.persist_checkpoint()
    return deleted
