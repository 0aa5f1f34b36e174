"""Share groups' dead letter queues (KIP-1191, share.version 2; Kafka 4.4's ShareGroupDLQStateManager):
a record a share group archives (a member rejected it, or it was delivered
`share.delivery.count.limit` times) is copied to the topic the group's
`errors.deadletterqueue.topic.name` names, before it is ARCHIVED.

What is written, as Kafka writes it: one record per archived offset, into partition
`source partition % the DLQ topic's partitions`, uncompressed, CreateTime at the write's wall
clock, durable (Kafka produces with acks=all) before the record is ARCHIVED; its key and value the
original's only when the group's `errors.deadletterqueue.copy.record.enable` is true (else null),
and these headers, in this order: `__dlq.errors.topic`, `__dlq.errors.partition`,
`__dlq.errors.offset`, `__dlq.errors.group`, `__dlq.errors.delivery.count` and
`__dlq.errors.message` ("Offset rejected by client." or "Offset delivery count exceeded the
threshold.").

Refused as Kafka's validateDlqTopic refuses them (logged; the record is archived all the same, as
Kafka's "Failed to write to DLQ, proceeding to ARCHIVED regardless"): a name starting with `__`, an
existing topic without `errors.deadletterqueue.group.enable=true`, a missing topic while the broker's
`errors.deadletterqueue.auto.create.topics.enable` is false (when true it is created with the default
partitions and that config, and `message.timestamp.type=CreateTime`), a name without the broker's
`errors.deadletterqueue.topic.name.prefix` (`dlq.` by default; empty: any name).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from ...coordinator.share.share_partition import DLQ_SHARE_VERSION
from ...protocol import record_batch as rb

if TYPE_CHECKING:
    from ..services import BrokerServices

log = structlog.get_logger("kbroker.share.dlq")

CLIENT_REJECT = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."
GROUP_ENABLE = "errors.deadletterqueue.group.enable"  # the topic config that admits a share group's copies
_READ_BYTES = 1 << 20
_CHUNK = 500  # archived records whose originals are read at once


@dataclass(frozen=True, slots=True)
class Archived:
    """One record waiting for its copy: its offset, delivery count, and whether a member rejected it."""

    offset: int
    delivery_count: int
    rejected: bool


def share_version(broker: BrokerServices) -> int:
    """The finalized share.version: the release's (4.4: 2, capped to what kbroker builds), or the level
    UpdateFeatures set since (operations/features.py)."""
    return broker.features.level("share.version")


class ShareDeadLetters:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        # per group: copies written (Kafka's DeadLetterQueueRecordCount), and refused or failed (the
        # record archived without one)
        self.written_total: Counter[str] = Counter()
        self.failed_total: Counter[str] = Counter()

    def enabled(self, group_id: str) -> bool:
        """Kafka's isDLQEnabledForGroup: share.version 2 and a DLQ topic named for the group."""
        return (share_version(self.broker) >= DLQ_SHARE_VERSION
                and self.broker.group_configs.value(group_id, "errors.deadletterqueue.topic.name") != "")

    async def write(self, group_id: str, topic: str, partition: int, records: list[Archived], *,
                    resumed: bool = False) -> None:
        """Copy `records` of topic-partition to the group's DLQ topic, durable before this returns.
        `resumed`: they were found ARCHIVING at a start, so a copy may already be there (written before a
        crash, ARCHIVED not yet persisted): those are not written twice. Never raises."""
        written = 0
        try:
            dlq_topic = await self._destination(group_id)
            info = self.broker.catalogue.topic(dlq_topic)
            if info is None:
                raise ValueError(f"DLQ topic {dlq_topic} is gone")
            dlq_partition = partition % info.num_partitions
            if resumed:
                missing = await self._not_yet_written(dlq_topic, dlq_partition, group_id, topic, partition, records)
                log.info("share_dlq_resumed", group_id=group_id, topic=topic, partition=partition,
                         archiving=len(records), already_written=len(records) - len(missing))
                records = missing
            copy = self.broker.group_configs.value(group_id, "errors.deadletterqueue.copy.record.enable").lower() == "true"
            for chunk in (records[i:i + _CHUNK] for i in range(0, len(records), _CHUNK)):
                originals = await self._originals(topic, partition, chunk) if copy else {}
                for batch, count in self._batches(group_id, topic, partition, chunk, info.config.max_message_bytes,
                                                  originals):
                    result = self.broker.partitions.append(dlq_topic, dlq_partition, batch, now_ms=self._wall_ms(),
                                                           headers=[rb.read_header(batch)])
                    await result.wait_durable()
                    self.written_total[group_id] += count
                    written += count
            if records:
                log.info("share_dlq_written", group_id=group_id, topic=topic, partition=partition,
                         dlq_topic=dlq_topic, dlq_partition=dlq_partition, first=records[0].offset,
                         last=records[-1].offset, count=len(records))
        except Exception as exc:  # noqa: BLE001 - Kafka archives the record regardless, and logs
            self.failed_total[group_id] += len(records) - written
            log.error("share_dlq_write_failed", group_id=group_id, topic=topic, partition=partition,
                      offsets=[r.offset for r in records][:20], error=str(exc))

    # -- where ---------------------------------------------------------------------------------

    async def _destination(self, group_id: str) -> str:
        """The group's DLQ topic, checked as Kafka's validateDlqTopic checks it, created if the broker
        auto-creates DLQ topics. Raises ValueError with Kafka's words."""
        configs, config = self.broker.group_configs, self.broker.config
        name = configs.value(group_id, "errors.deadletterqueue.topic.name")
        if name == "":
            raise ValueError(f"Configured DLQ topic name in share group: {group_id} is empty.")
        if name.startswith("__"):
            raise ValueError(f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
                             f"topic: {name}.")
        info = self.broker.catalogue.topic(name)
        if info is not None and info.overrides.get(GROUP_ENABLE, "false").lower() != "true":
            raise ValueError(f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, topic: {name}.")
        if info is None and not config.errors_deadletterqueue_auto_create_topics_enable:
            raise ValueError(f"DLQ topic does not exist and auto create is disabled on cluster for share group: "
                             f"{group_id}, topic: {name}.")
        prefix = config.errors_deadletterqueue_topic_name_prefix
        if prefix and not name.startswith(prefix):
            raise ValueError(f"Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
                             f"{group_id}, topic: {name}, prefix: {prefix}.")
        if info is None:
            await self.broker.catalogue.create_topic_async(
                name, config.num_partitions, {GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"})
            log.info("share_dlq_topic_created", group_id=group_id, topic=name, partitions=config.num_partitions)
        return name

    # -- what ----------------------------------------------------------------------------------

    def _batches(self, group_id: str, topic: str, partition: int, records: list[Archived], max_bytes: int,
                 originals: dict[int, rb.Record]) -> Iterator[tuple[bytes, int]]:
        """The copies as batches (and how many each holds) of at most the DLQ topic's max.message.bytes,
        as Kafka's produce rounds split them; a record over it on its own goes alone. `originals`: the
        source records to copy the key and value of (errors.deadletterqueue.copy.record.enable)."""
        now = self._wall_ms()
        out: list[rb.Record] = []
        size = rb.HEADER_SIZE
        for archived in records:
            original = originals.get(archived.offset)
            headers: list[tuple[str, bytes | None]] = [
                ("__dlq.errors.topic", topic.encode()),
                ("__dlq.errors.partition", str(partition).encode()),
                ("__dlq.errors.offset", str(archived.offset).encode()),
                ("__dlq.errors.group", group_id.encode()),
                ("__dlq.errors.delivery.count", str(archived.delivery_count).encode()),
                ("__dlq.errors.message", (CLIENT_REJECT if archived.rejected else DELIVERY_COUNT_EXCEEDED).encode()),
            ]
            key, value = (original.key, original.value) if original else (None, None)
            # a record's encoded size, over-estimated: varints of up to 5 bytes for each length
            grows = 25 + len(key or b"") + len(value or b"") + sum(10 + len(k) + len(v or b"") for k, v in headers)
            if out and size + grows > max_bytes:
                yield rb.encode_batch(out), len(out)
                out, size = [], rb.HEADER_SIZE
            out.append(rb.Record(len(out), now, key, value, headers))
            size += grows
        if out:
            yield rb.encode_batch(out), len(out)

    async def _originals(self, topic: str, partition: int, records: list[Archived]) -> dict[int, rb.Record]:
        """The source records (key and value) at those offsets, read as a consumer reads (up to the
        high watermark); one that cannot be read is copied with headers only, as Kafka's fetcher does."""
        wanted = {r.offset for r in records}
        return {record.offset: record async for read in self._reads(topic, partition, min(wanted), max(wanted) + 1)
                for record in read if record.offset in wanted}

    async def _not_yet_written(self, dlq_topic: str, dlq_partition: int, group_id: str, topic: str, partition: int,
                               records: list[Archived]) -> list[Archived]:
        """Those of `records` with no copy in the DLQ partition yet (a scan of it, done only at a start
        that found records ARCHIVING: a crash between a copy's write and ARCHIVED's), a MiB at a time,
        letting the others run between reads."""
        wanted = {r.offset for r in records}
        ident = (topic.encode(), str(partition).encode(), group_id.encode())
        error, log_start, high_watermark = self.broker.partitions.bounds(dlq_topic, dlq_partition)
        async for read in self._reads(dlq_topic, dlq_partition, log_start, high_watermark if error == 0 else log_start):
            for record in read:
                h = dict(record.headers)
                if (h.get("__dlq.errors.topic"), h.get("__dlq.errors.partition"), h.get("__dlq.errors.group")) == ident:
                    wanted.discard(int(h.get("__dlq.errors.offset") or -1))
            if not wanted:
                break
            await asyncio.sleep(0)
        return [r for r in records if r.offset in wanted]

    async def _reads(self, topic: str, partition: int, offset: int, end: int) -> AsyncIterator[list[rb.Record]]:
        """The records of a topic-partition from `offset` to `end` (exclusive), read as a consumer reads
        (up to the high watermark) a MiB at a time: one list per read. It stops early at a read that
        fails, finds nothing or does not advance (what is left cannot be read)."""
        while offset < end:
            # an engine that keeps old batches outside memory (PostgreSQL's) reads them in first
            await self.broker.partitions.prepare_reads([(topic, partition, offset, _READ_BYTES)])
            read = self.broker.partitions.read(topic, partition, offset, _READ_BYTES, min_one_batch=True,
                                               read_committed=False)
            if read.error_code != 0 or not read.records:
                return
            advanced, records = offset, []
            for header, batch in rb.decode_batches(read.records):
                records.extend(batch)
                advanced = max(advanced, header.base_offset + header.last_offset_delta + 1)
            if advanced <= offset:
                return
            yield records
            offset = advanced

    def _wall_ms(self) -> int:
        return self.broker.clock.wall_ms()
