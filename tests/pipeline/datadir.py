"""Offline kbroker data directories for the pipeline tests, written with the broker's own classes
(LogManager, encode_batch, OffsetsTopic), so the files are exactly what a broker would leave."""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from kbroker.broker.storage.log.manager import LogManager
from kbroker.broker.coordinators.offsets_topic import OffsetsTopic
from kbroker.protocol.records.classic_records import (
    GroupMetadataMember,
    GroupMetadataRecord,
    GroupMetadataTombstone,
    OffsetCommitRecord,
    OffsetCommitTombstone,
)
from kbroker.coordinator.groups.classic.subscription import encode_subscription_topics
from kbroker.protocol import codec
from kbroker.protocol.messages import consumer_protocol_assignment as cpa
from kbroker.protocol.record_batch import Record, encode_batch

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z, epoch ms
ORDERS = "orders"
EMPTY = "events"
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd


def assignment_bytes(parts: dict[str, list[int]]) -> bytes:
    body = cpa.ConsumerProtocolAssignment([cpa.TopicPartition(t, p) for t, p in parts.items()])
    return struct.pack(">h", 0) + codec.encode(cpa.SPEC, 0, body)


def member(member_id: str, client: str, parts: dict[str, list[int]]) -> GroupMetadataMember:
    return GroupMetadataMember(member_id, None, client, f"/10.0.0.{len(client)}", 60000, 45000,
                               encode_subscription_topics([ORDERS]), assignment_bytes(parts))


@dataclass
class Scenario:
    root: Path
    produced: dict[tuple[str, int], list[Record]] = field(default_factory=dict)
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    latest: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, partition) -> offset
    last_commit_ms: dict[tuple[str, str, int], int] = field(default_factory=dict)
    generations: dict[str, list[int]] = field(default_factory=dict)
    commit_minutes: dict[str, dict[int, int]] = field(default_factory=dict)  # group -> minute ms -> commits


def _records(partition: int, batch: int, n: int, ts: int) -> list[Record]:
    out = []
    for i in range(n):
        key = None if (i % 4 == 3) else f"k{partition}-{batch}-{i}".encode()
        headers = [("trace", f"{batch}:{i}".encode()), ("empty", None)] if i % 5 == 0 else []
        value = (f"order {partition}/{batch}/{i} " + "x" * (i * 7 % 50)).encode()
        out.append(Record(i, ts + i, key, value, headers))
    return out


def build(root: Path, *, batches_per_partition: int = 12, segment_bytes: int = 2048) -> Scenario:
    """Three partitions of `orders` over several small segments in every codec, an empty topic, and the
    `__consumer_offsets` history of three groups (rebalances, commits, an emptied and a deleted group)."""
    sc = Scenario(root)
    logs = LogManager(root, flush_policy="never")
    logs.create_topic(ORDERS, 3, {"internal.segment.bytes": str(segment_bytes)}, allow_internal_configs=True)
    logs.create_topic(EMPTY, 1, {})
    for p in range(3):
        plog = logs.get_log(ORDERS, p)
        produced: list[Record] = []
        for b in range(batches_per_partition):
            n = 1 + (b * 7 + p * 3) % 20
            ts = T0 + (b * 60 + p) * 1000
            records = _records(p, b, n, ts)
            info = plog.append(encode_batch(records, compression=CODECS[(b + p) % 5]), leader_epoch=0, now_ms=ts)
            produced += [Record(info.base_offset + r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
        sc.produced[(ORDERS, p)] = produced
        sc.end_offsets[(ORDERS, p)] = plog.log_end_offset
    sc.end_offsets[(EMPTY, 0)] = 0

    offsets_topic = OffsetsTopic(logs, 50)
    offsets_topic.ensure()
    from kbroker.coordinator.partitioning import partition_for

    writes: list[tuple[str, list]] = []

    def commit(group: str, at: int, parts: dict[int, int]) -> None:
        records = [OffsetCommitRecord(group, ORDERS, p, o, 0, "", at) for p, o in parts.items()]
        writes.append((group, records))
        for p, o in parts.items():
            sc.latest[(group, ORDERS, p)] = o
            sc.last_commit_ms[(group, ORDERS, p)] = at
        minute = at - at % 60000
        sc.commit_minutes.setdefault(group, {}).setdefault(minute, 0)
        sc.commit_minutes[group][minute] += 1

    def generation(group: str, gen: int, at: int, members: list[GroupMetadataMember], leader: str | None) -> None:
        writes.append((group, [GroupMetadataRecord(group, "consumer", gen, "range" if members else None, leader, at,
                                                   tuple(members))]))
        sc.generations.setdefault(group, []).append(gen)

    # billing: one member, a second joins, the first leaves.
    generation("billing", 1, T0, [member("b-1", "billing-a", {ORDERS: [0, 1, 2]})], "b-1")
    commit("billing", T0 + 10_000, {0: 3, 1: 4, 2: 5})
    commit("billing", T0 + 20_000, {0: 6, 1: 8})
    commit("billing", T0 + 20_000, {2: 7})  # another member, the same millisecond: a second commit
    generation("billing", 2, T0 + 70_000, [member("b-1", "billing-a", {ORDERS: [0, 1]}),
                                             member("b-2", "billing-b", {ORDERS: [2]})], "b-1")
    commit("billing", T0 + 80_000, {0: 9, 1: 10, 2: 11})
    commit("billing", T0 + 95_000, {2: 12})
    generation("billing", 3, T0 + 130_000, [member("b-2", "billing-b", {ORDERS: [0, 1, 2]})], "b-2")
    commit("billing", T0 + 140_000, {0: 20, 1: 21, 2: 22})
    # audit: one generation, then the group empties; one offset deleted (OffsetDelete).
    generation("audit", 1, T0 + 5_000, [member("a-1", "audit", {ORDERS: [0, 1, 2]})], "a-1")
    commit("audit", T0 + 6_000, {0: 1, 1: 1, 2: 1})
    generation("audit", 2, T0 + 200_000, [], None)
    writes.append(("audit", [OffsetCommitTombstone("audit", ORDERS, 2)]))
    del sc.latest[("audit", ORDERS, 2)]
    # old: committed, then deleted (DeleteGroups writes offset tombstones and a group tombstone).
    generation("old", 1, T0 + 1_000, [member("o-1", "old", {ORDERS: [0]})], "o-1")
    commit("old", T0 + 2_000, {0: 2})
    writes.append(("old", [OffsetCommitTombstone("old", ORDERS, 0), GroupMetadataTombstone("old")]))
    del sc.latest[("old", ORDERS, 0)]

    async def append_all() -> None:
        for group, records in writes:
            await offsets_topic.append_records(partition_for(group, 50), records)

    asyncio.run(append_all())
    logs.close()
    return sc


def corrupt_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def now_ms() -> int:
    return int(time.time() * 1000)
