"""What one OffsetCommit naming very many partitions costs other clients, and the broker's memory.

    python -m bench.commit_stall [--partitions N] [--topics T] [--topic-partitions P]

A fresh kbroker (`--max-partitions` raised to hold the topics) gets T topics of P partitions, then
one simple-consumer OffsetCommit v8 (generation -1, no member) naming N partitions in all, spread
over the T topics (partition i % P, offset i), while another connection sends ApiVersions every
10 ms: how long the commit took, the other client's worst round trip, and the broker's peak RSS
(VmHWM). Past about 25,000 partitions a commit's records cannot fit one `__consumer_offsets` batch
(max.message.bytes), so it is answered UNKNOWN_SERVER_ERROR, as Kafka answers it. Not part of
`make bench`: no peer is measured, the figure is kbroker's own before and after a change.
"""

from __future__ import annotations

import argparse
import asyncio
import time


async def _run(bootstrap: str, partitions: int, topics: int, per_topic: int) -> tuple[float, float, set[int]]:
    from kbroker.bench.wire import Connection, worst_round_trip
    from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from kbroker.protocol.messages.offset_commit_request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    admin = await Connection.open(bootstrap, "bench-commit")
    for t in range(topics):
        r = await admin.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
            name=f"wide-{t}", num_partitions=per_topic, replication_factor=1)], timeout_ms=30_000, validate_only=False))
        assert r.topics[0].error_code == 0, r.topics[0]
    each = partitions // topics
    request = OffsetCommitRequest(group_id="bench-wide", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=f"wide-{t}", partitions=[
            OffsetCommitRequestPartition(i % per_topic, i, -1, "") for i in range(each)]) for t in range(topics)])
    other = await Connection.open(bootstrap, "bench-other")
    started = time.perf_counter()
    committing = asyncio.get_running_loop().create_task(admin.call(8, 8, request))
    worst, _ = await worst_round_trip(other, committing, every_s=0.01)
    answer = await committing
    took = time.perf_counter() - started
    codes = {p.error_code for t in answer.topics for p in t.partitions}
    await admin.close()
    await other.close()
    return took, worst, codes


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    from kbroker.bench import brokers

    parser = argparse.ArgumentParser(prog="python -m bench.commit_stall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=200_000, help="partitions the commit names in all")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--topic-partitions", type=int, default=10_000, help="partitions of each topic")
    args = parser.parse_args(argv)
    handle = brokers.start_kbroker(extra=("--max-partitions", str(args.topics * args.topic_partitions + 1_000)))
    try:
        took, worst, codes = asyncio.run(_run(handle.bootstrap, args.partitions, args.topics, args.topic_partitions))
        print(f"OffsetCommit of {args.partitions:,} partitions over {args.topics} topics: answered in {took:.2f} s "
              f"(error codes {sorted(codes)}), another client's worst round trip {1000 * worst:,.0f} ms, "
              f"broker peak RSS {_peak_rss_mib(handle.pid):,.0f} MiB", flush=True)
    finally:
        handle.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
