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
from kbroker.broker.partitions.service import PartitionService
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

    offsets_topic = OffsetsTopic(PartitionService.offline(logs), 50)
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


# --- transactions and a KIP-848 group -------------------------------------------------------------------

ETL = "etl"  # a classic-less group committing plainly and in transactions
CG = "cg"  # a KIP-848 (consumer protocol) group through four epochs
SESSION_MS = 45_000


@dataclass
class GroupsScenario:
    root: Path
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    latest: dict[tuple[str, str, int], int] = field(default_factory=dict)
    last_commit_ms: dict[tuple[str, str, int], int] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)  # group -> OffsetCommit/TxnOffsetCommit requests
    transactions: dict[str, tuple[int, int]] = field(default_factory=dict)  # group -> (committed, aborted)
    epochs: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    owners: dict[tuple[int, int], str] = field(default_factory=dict)  # (epoch, partition) -> member


def build_groups(root: Path) -> GroupsScenario:
    """`orders` (3 partitions, 40 records each, one per second from T0) and `__consumer_offsets` holding:

    * etl: a plain commit; a committed transaction; an aborted one; a committed one whose partition got a
      plain commit between its record and its marker (Kafka keeps the newer record: the plain one); an
      open one; two members' commits stored in one batch 1 ms apart, and two in the same ms for the
      same partition (four requests in two batches);
    * cg: a consumer group through four epochs (m1 joins; m2 joins; m1's session expires; m2 leaves),
      with the broker's history file lines for them.
    """
    import json

    from kbroker.protocol.records.consumer_records import (
        ConsumerGroupCurrentMemberAssignmentRecord,
        ConsumerGroupCurrentMemberAssignmentTombstone,
        ConsumerGroupMemberMetadataRecord,
        ConsumerGroupMemberMetadataTombstone,
        ConsumerGroupMetadataRecord,
        ConsumerGroupTargetAssignmentMemberRecord,
        ConsumerGroupTargetAssignmentMetadataRecord,
    )
    from kbroker.coordinator.partitioning import partition_for
    from kbroker.protocol.records.codec import encode_record
    from kbroker.protocol.control_records import encode_marker

    sc = GroupsScenario(root)
    logs = LogManager(root, flush_policy="never")
    logs.create_topic(ORDERS, 3, {})
    for p in range(3):
        plog = logs.get_log(ORDERS, p)
        for i in range(40):
            plog.append(encode_batch([Record(0, T0 + i * 1000, None, b"x")]), leader_epoch=0, now_ms=T0 + i * 1000)
        sc.end_offsets[(ORDERS, p)] = plog.log_end_offset
    topic_id = json.loads((root / "topics" / f"{ORDERS}.json").read_text())["topic_id"]
    offsets_topic = OffsetsTopic(PartitionService.offline(logs), 50)
    offsets_topic.ensure()
    plog = logs.get_log("__consumer_offsets", partition_for(ETL, 50))
    cg_log = logs.get_log("__consumer_offsets", partition_for(CG, 50))

    def batch(log, records, at, *, pid=-1, txn=False) -> None:
        encoded = [encode_record(r) for r in records]
        data = encode_batch([Record(i, at, k, v) for i, (k, v) in enumerate(encoded)], producer_id=pid,
                            producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                            is_transactional=txn)
        log.append(data, leader_epoch=0, now_ms=at)

    def marker(log, pid, commit, at) -> None:
        log.append(encode_marker(pid, 0, commit, 0, at), leader_epoch=0, now_ms=at, control=True)

    def oc(p, o, at):
        return OffsetCommitRecord(ETL, ORDERS, p, o, 0, "", at)

    def truth(p, o, at):
        sc.latest[(ETL, ORDERS, p)] = o
        sc.last_commit_ms[(ETL, ORDERS, p)] = at

    t = T0 + 5_000
    batch(plog, [oc(0, 10, t)], t); truth(0, 10, t)
    batch(plog, [oc(0, 20, t + 1000), oc(1, 5, t + 1000)], t + 1000, pid=1000, txn=True)
    marker(plog, 1000, True, t + 1500); truth(0, 20, t + 1000); truth(1, 5, t + 1000)
    batch(plog, [oc(0, 30, t + 2000)], t + 2000, pid=1001, txn=True)
    marker(plog, 1001, False, t + 2500)  # aborted: 30 never counts
    batch(plog, [oc(1, 7, t + 3000)], t + 3000, pid=1000, txn=True)
    batch(plog, [oc(1, 6, t + 3100)], t + 3100); truth(1, 6, t + 3100)
    marker(plog, 1000, True, t + 3500)  # committed, but the plain commit after its record wins
    batch(plog, [oc(2, 9, t + 4000)], t + 4000, pid=1002, txn=True)  # open: no marker
    # two members' commits held in one batch, 1 ms apart; then two in the same ms for one partition
    batch(plog, [oc(0, 21, t + 5000), oc(1, 8, t + 5001)], t + 5001); truth(0, 21, t + 5000); truth(1, 8, t + 5001)
    batch(plog, [oc(2, 3, t + 6000), oc(2, 4, t + 6000)], t + 6000); truth(2, 4, t + 6000)
    sc.commits[ETL] = 1 + 1 + 1 + 1 + 2 + 2  # plain, T1, T3, plain, 2 in one batch, 2 in another
    sc.transactions[ETL] = (2, 1)

    import uuid as _uuid

    tid = _uuid.UUID(topic_id)

    def member(m, at):
        return ConsumerGroupMemberMetadataRecord(CG, m, None, None, f"client-{m}", "/10.0.0.7", (ORDERS,), None,
                                                 300_000, None)

    def assign(m, epoch, parts):
        return [ConsumerGroupTargetAssignmentMemberRecord(CG, m, {tid: frozenset(parts)}),
                ConsumerGroupCurrentMemberAssignmentRecord(CG, m, epoch, epoch - 1, 0, {tid: frozenset(parts)}, {})]

    history = []

    def epoch(n, at, records, members_in, members_out, count, reason, session=None):
        batch(cg_log, records, at)
        sc.epochs.append((n, count, members_in, members_out))
        history.append({"event": "rebalance_completed", "group_id": CG, "group_type": "consumer",
                        "timestamp": _iso(at), "old_generation": n - 1, "new_generation": n, "reason": reason,
                        "client_reason": None, "trigger_member": (members_in or members_out)[0],
                        "members_in": list(members_in), "members_out": list(members_out), "member_count": count,
                        "duration_ms": None, "session_timeout_ms": session})

    c0 = T0 + 1_000
    epoch(1, c0, [member("m1", c0), ConsumerGroupMetadataRecord(CG, 1), *assign("m1", 1, [0, 1, 2])[:1],
                  ConsumerGroupTargetAssignmentMetadataRecord(CG, 1, c0), assign("m1", 1, [0, 1, 2])[1]],
          ("m1",), (), 1, "member joined")
    epoch(2, c0 + 10_000, [member("m2", c0), ConsumerGroupMetadataRecord(CG, 2),
                           ConsumerGroupTargetAssignmentMemberRecord(CG, "m1", {tid: frozenset([0, 1])}),
                           ConsumerGroupTargetAssignmentMemberRecord(CG, "m2", {tid: frozenset([2])}),
                           ConsumerGroupTargetAssignmentMetadataRecord(CG, 2, c0 + 10_000)], ("m2",), (), 2,
          "member joined")
    batch(cg_log, [assign("m1", 2, [0, 1])[1]], c0 + 10_500)
    batch(cg_log, [assign("m2", 2, [2])[1]], c0 + 11_000)
    gone = [ConsumerGroupCurrentMemberAssignmentTombstone(CG, "m1"), ConsumerGroupMemberMetadataTombstone(CG, "m1")]
    epoch(3, c0 + 60_000, [*gone, ConsumerGroupMetadataRecord(CG, 3),
                           ConsumerGroupTargetAssignmentMemberRecord(CG, "m2", {tid: frozenset([0, 1, 2])}),
                           ConsumerGroupTargetAssignmentMetadataRecord(CG, 3, c0 + 60_000)], (), ("m1",), 1,
          "session expired", SESSION_MS)
    batch(cg_log, [assign("m2", 3, [0, 1, 2])[1]], c0 + 62_000)  # m2 reconciles 2 s after the fence
    epoch(4, c0 + 90_000, [ConsumerGroupCurrentMemberAssignmentTombstone(CG, "m2"),
                           ConsumerGroupMemberMetadataTombstone(CG, "m2"), ConsumerGroupMetadataRecord(CG, 4)],
          (), ("m2",), 0, "member left")
    sc.owners = {(1, 0): "m1", (1, 1): "m1", (1, 2): "m1", (2, 0): "m1", (2, 1): "m1", (2, 2): "m2",
                 (3, 0): "m2", (3, 1): "m2", (3, 2): "m2"}
    (root / "rebalances.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    logs.close()
    return sc


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")
