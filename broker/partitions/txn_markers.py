"""Writing a transaction's commit or abort markers into its partitions (Kafka's WriteTxnMarkers, but
local: this one node leads every partition, so a marker is an append, not a request).

Every marker is appended first (fencing producers with an older epoch at once), then all are awaited
to be durable; only then is each partition's open transaction closed, which is what lets the last
stable offset move past it, and are parked read_committed fetches woken.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Iterable

import structlog

from ...protocol.control_records import encode_marker
from ...protocol.errors import KafkaError

if TYPE_CHECKING:
    from ..services import BrokerServices

log = structlog.get_logger("kbroker.txn_markers")

LEADER_EPOCH = 0


async def write_markers(broker: BrokerServices, producer_id: int, producer_epoch: int, commit: bool,
                        partitions: Iterable[tuple[str, int]], coordinator_epoch: int) -> None:
    """Append one marker per partition, wait until all are durable, then close the transactions.
    A partition whose topic is gone is skipped (Kafka answers UNKNOWN_TOPIC_OR_PARTITION and moves on);
    a failed append or fsync raises, and the caller retries the whole set (markers are idempotent)."""
    now_ms = broker.clock.wall_ms()
    appended = []
    for topic, partition in sorted(partitions):
        plog = broker.logs.get_log(topic, partition)
        if plog is None:
            log.info("txn_marker_skipped", topic=topic, partition=partition, producer_id=producer_id,
                     reason="unknown partition")
            continue
        state = broker.producer_states.for_log(plog)
        try:
            state.check_marker(producer_id, producer_epoch)
        except KafkaError as exc:
            # Kafka logs and skips a marker older than the producer's epoch: a newer one supersedes it.
            log.warning("txn_marker_stale", topic=topic, partition=partition, error=str(exc))
            continue
        batch = encode_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        info = plog.append(batch, leader_epoch=LEADER_EPOCH, now_ms=now_ms, single_batch=True, control=True)
        state.update_marker_epoch(producer_id, producer_epoch, now_ms, coordinator_epoch)
        state.marker_appended(producer_id, info.last_offset)
        appended.append((topic, partition, plog, state, info.last_offset))
    await asyncio.gather(*(plog.wait_durable(offset) for _, _, plog, _, offset in appended))
    for topic, partition, _, state, offset in appended:
        state.complete_txn(producer_id, commit, offset)
        broker.fetch_purgatory.notify(topic, partition)
