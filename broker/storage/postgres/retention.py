"""Time- and size-based retention of the partitions a node leads over PostgreSQL (issue 44; Kafka's
deleteOldSegments, broker/storage/log/retention.py on the segment engine).

Only the leader applies it, at the broker's retention check (`log.retention.check.interval.ms`), and
only to topics whose `cleanup.policy` contains "delete". The unit is the stored batch, not a segment:
the new log start is the base offset of the first committed batch that retention keeps (the committed
end when none is kept), and the move is DeleteRecords' (store.py): at once for reads here, then in
the database by the node's next round, fenced as appends are, with the batches wholly below it
deleted. A deposed leader's move is refused there, as its appends are.

* retention.ms: a batch expires when its largest timestamp is older than that (Kafka ages a segment
  by its largest timestamp); the log start passes every expired batch up to the first one that is
  not, so one late batch keeps those after it.
* retention.bytes: the oldest batches go while the partition stays at least that large without them
  (Kafka keeps the active segment; here each batch is its own unit, so a partition ends at most one
  batch above the limit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from ....protocol.errors import KafkaError

if TYPE_CHECKING:
    from .store import PostgresPartitionStore

log = structlog.get_logger("kbroker.storage.postgres")


def retention_start(store: PostgresPartitionStore, now_ms: int) -> int | None:
    """The log start retention asks for, None when it keeps everything."""
    config = store.config
    if not config.delete or (config.retention_ms < 0 and config.retention_bytes < 0):
        return None
    batches = store.committed_index()  # (base, size, largest timestamp): no batch's bytes needed
    keep_from = 0
    if config.retention_ms >= 0:
        while keep_from < len(batches) and now_ms - batches[keep_from][2] > config.retention_ms:
            keep_from += 1
    reason = "time" if keep_from else None
    if config.retention_bytes >= 0:
        excess = sum(size for _, size, _ in batches[keep_from:]) - config.retention_bytes
        while keep_from < len(batches) and excess - batches[keep_from][1] >= 0:
            excess -= batches[keep_from][1]
            keep_from += 1
            reason = reason or "size"
    if not keep_from:
        return None
    start = batches[keep_from][0] if keep_from < len(batches) else store.high_watermark
    if start <= store.log_start_offset:
        return None
    log.info("retention_delete", topic=store.topic, partition=store.partition, reason=reason, batches=keep_from,
             log_start_offset=start)
    return start


def apply_retention(stores: list[PostgresPartitionStore], now_ms: int) -> int:
    """Retention over the partitions this node leads; returns how many moved their log start."""
    moved = 0
    for store in stores:
        if store.closed or store.offline is not None:
            continue
        start = retention_start(store, now_ms)
        if start is None:
            continue
        try:
            store.delete_records_before(start)
        except KafkaError as exc:  # deposed or fenced meanwhile: its next leader applies it
            log.info("retention_skipped", topic=store.topic, partition=store.partition, error=str(exc))
            continue
        moved += 1
    return moved
