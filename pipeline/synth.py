"""A synthetic data directory of consumer groups at scale, for the report's screenshots and the job's
timings (`python -m kbroker.pipeline.synth --groups 1000 --commits 1000000 --out DIR`).

Segment files are written directly in the broker's layout and formats (record batches of records
encoded by the coordinator's record codec, `topics/*.json`, `rebalances.jsonl`), fast enough for
millions of commit records. Each group reads one topic; its lag follows one of a few shapes (keeping
up, falling behind, stuck, stopped committing part-way), classic groups go through a few generations
(one of them a crash: a session expiry), a fifth of the groups are KIP-848 groups with their epochs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import struct
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Sequence

from ..protocol.records.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
)
from ..protocol.records.codec import encode_record
from ..protocol.records.classic_records import GroupMetadataMember, GroupMetadataRecord, OffsetCommitRecord
from ..protocol import codec
from ..protocol.messages import consumer_protocol_assignment as cpa
from ..protocol.messages import consumer_protocol_subscription as cps
from ..protocol.record_batch import Record, encode_batch

OFFSETS_PARTITIONS = 50
_I64 = struct.Struct(">q")
SHAPES = ("ok", "ok", "ok", "lagging", "stalled", "stopped")


@dataclass
class Written:
    commit_records: int
    requests: int
    groups: int
    segments: int
    bytes: int


class _PartitionWriter:
    def __init__(self, folder: Path, segment_bytes: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.segment_bytes = folder, segment_bytes
        self.offset, self.size, self.segments, self.bytes = 0, 0, 0, 0
        self.out: BinaryIO | None = None

    def append(self, records: Sequence[tuple[bytes | None, bytes | None]], at_ms: int) -> None:
        batch = bytearray(encode_batch([Record(i, at_ms, k, v) for i, (k, v) in enumerate(records)]))
        _I64.pack_into(batch, 0, self.offset)
        if self.out is None or self.size + len(batch) > self.segment_bytes:
            if self.out is not None:
                self.out.close()
            self.out = open(self.folder / f"{self.offset:020d}.log", "wb")
            self.segments += 1
            self.size = 0
        self.out.write(batch)
        self.size += len(batch)
        self.bytes += len(batch)
        self.offset += len(records)

    def close(self) -> None:
        if self.out is not None:
            self.out.close()
        else:
            (self.folder / f"{0:020d}.log").touch()
            self.segments += 1


def _topic_json(root: Path, name: str, partitions: int, configs: dict[str, str] | None = None) -> str:
    topic_id = str(uuid.uuid4())
    (root / "topics").mkdir(parents=True, exist_ok=True)
    (root / "topics" / f"{name}.json").write_text(json.dumps(
        {"name": name, "topic_id": topic_id, "partitions": partitions, "configs": configs or {}}))
    return topic_id


def _subscription(topic: str) -> bytes:
    return struct.pack(">h", 0) + codec.encode(cps.SPEC, 0, cps.ConsumerProtocolSubscription(topics=[topic]))


def _offsets_partition(group: str) -> int:
    """Where the group's records go. Synthetic: a stable spread over the partitions, not Kafka's
    abs(hashCode) % 50 (the job reads every partition alike; a broker would look elsewhere)."""
    return zlib.crc32(group.encode()) % OFFSETS_PARTITIONS


def _assignment(topic: str, parts: list[int]) -> bytes:
    body = cpa.ConsumerProtocolAssignment([cpa.TopicPartition(topic, parts)])
    return struct.pack(">h", 0) + codec.encode(cpa.SPEC, 0, body)


def write(root: Path, *, groups: int = 1000, commits: int = 1_000_000, topics: int = 20, partitions: int = 4,
          seconds: int = 3600, rate: int = 20, segment_bytes: int = 100 << 20, seed: int = 1,
          start_ms: int = 1_700_000_000_000) -> Written:
    """`commits` commit records over `groups` groups and `seconds` seconds; each topic of `partitions`
    partitions gets `rate` messages a second per partition, in one batch a second."""
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    names = [f"topic-{i:03d}" for i in range(topics)]
    ids = {n: _topic_json(root, n, partitions) for n in names}
    _topic_json(root, "__consumer_offsets", OFFSETS_PARTITIONS, {"cleanup.policy": "compact"})
    total_segments = total_bytes = 0
    for name in names:  # the data: one batch a second per partition
        for p in range(partitions):
            w = _PartitionWriter(root / f"{name}-{p}", segment_bytes)
            for s in range(seconds):
                w.append([(None, b"m")] * rate, start_ms + s * 1000)
            w.close()
            total_segments += w.segments
            total_bytes += w.bytes
    end_at = lambda s: (s + 1) * rate  # noqa: E731 - the log end offset after second s

    per_group_requests = max(1, commits // partitions // groups)
    events: dict[int, list[tuple[int, list]]] = {p: [] for p in range(OFFSETS_PARTITIONS)}
    history: list[dict] = []
    requests = 0
    for g in range(groups):
        gid = f"group-{g:04d}"
        topic = names[g % topics]
        shape = SHAPES[g % len(SHAPES)]
        consumer = g % 5 == 4
        opart = _offsets_partition(gid)
        out = events[opart]
        interval = max(1, seconds // per_group_requests)
        stop = seconds if shape != "stopped" else seconds * 2 // 3
        stuck = rnd.randrange(seconds // 4, seconds // 2) * rate
        behind = rnd.randrange(0, rate * 3)
        for k in range(per_group_requests):
            s = min(k * interval + rnd.randrange(0, interval), seconds - 1)
            if s >= stop:
                break
            at = start_ms + s * 1000 + rnd.randrange(0, 1000)
            end = end_at(s)
            if shape == "lagging":
                committed = max(0, end - behind - s * rate // 3)
            elif shape == "stalled" and end > stuck:
                committed = stuck
            else:  # keeping up: caught up now and then
                committed = end if k % 3 == 0 else max(0, end - behind)
            out.append((at, [encode_record(OffsetCommitRecord(gid, topic, p, committed, 0, "", at))
                             for p in range(partitions)]))
            requests += 1
        # membership: a first generation, a join, a crash (session expiry), a clean leave
        members = [f"{gid}-m{i}" for i in range(3)]
        times = sorted(rnd.randrange(0, seconds) for _ in range(3))
        plan = [(0, members[:1], "member joined"), (times[0], members[:2], "member joined"),
                (times[1], members[1:2], "session expired"), (times[2], members[1:2] + members[2:], "member joined")]
        before: list[str] = []
        for gen, (s, who, reason) in enumerate(plan, start=1):
            at = start_ms + s * 1000
            if consumer:
                recs = [encode_record(r) for m in before if m not in who for r in (
                    ConsumerGroupCurrentMemberAssignmentTombstone(gid, m), ConsumerGroupMemberMetadataTombstone(gid, m))]
                recs += [encode_record(ConsumerGroupMemberMetadataRecord(gid, m, None, None, m, "/10.1.0.1", (topic,),
                                                                         None, 300_000, None)) for m in who]
                recs.append(encode_record(ConsumerGroupMetadataRecord(gid, gen)))
                tid = uuid.UUID(ids[topic])
                for i, m in enumerate(who):
                    mine = frozenset(p for p in range(partitions) if p % len(who) == i)
                    recs.append(encode_record(ConsumerGroupCurrentMemberAssignmentRecord(gid, m, gen, gen - 1, 0,
                                                                                         {tid: mine}, {})))
            else:
                gm = [GroupMetadataMember(m, None, m, "/10.1.0.1", 300_000, 10_000, _subscription(topic),
                                          _assignment(topic, [p for p in range(partitions) if p % len(who) == i]))
                      for i, m in enumerate(who)]
                recs = [encode_record(GroupMetadataRecord(gid, "consumer", gen, "range", who[0], at, tuple(gm)))]
            out.append((at, recs))
            before = who
            history.append({"event": "rebalance_completed", "group_id": gid,
                            "group_type": "consumer" if consumer else "classic",
                            "timestamp": dt.datetime.fromtimestamp(at / 1000, tz=dt.timezone.utc).isoformat(),
                            "old_generation": gen - 1, "new_generation": gen, "reason": reason, "client_reason": None,
                            "trigger_member": who[-1], "members_in": [], "members_out": [], "member_count": len(who),
                            "duration_ms": None if consumer else 1000,
                            "session_timeout_ms": 10_000 if reason == "session expired" else None})
    records = 0
    for p, evs in events.items():
        w = _PartitionWriter(root / f"__consumer_offsets-{p}", segment_bytes)
        for at, recs in sorted(evs, key=lambda e: e[0]):
            w.append(recs, at)
            records += len(recs)
        w.close()
        total_segments += w.segments
        total_bytes += w.bytes
    (root / "rebalances.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    return Written(records, requests, groups, total_segments, total_bytes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.pipeline.synth", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the data directory to write (must not exist)")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=1_000_000, help="commit records (about)")
    parser.add_argument("--seconds", type=int, default=3600)
    args = parser.parse_args(argv)
    root = Path(args.out)
    if root.exists():
        parser.error(f"{root} exists")
    started = time.perf_counter()
    w = write(root, groups=args.groups, commits=args.commits, seconds=args.seconds)
    print(f"wrote {w.commit_records:,} __consumer_offsets records ({w.requests:,} commit requests) for {w.groups:,} "
          f"groups, {w.segments:,} segments, {w.bytes / 1e6:,.0f} MB in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
