"""What one target assignment of the uniform assignor costs the coordinator's loop, as groups grow.

    python -m bench.assignor_cost [--members 500,2000] [--topics 20] [--partitions 500] [--seed 1]

A consumer group of the new protocol (KIP-848) recomputes the whole group's target assignment on
the coordinator's event loop each time its epoch moves: every join, leave or subscription change.
For each size this prints, in ms, one computation from nothing, one after a member subscribed to
every topic joined the settled group, and one after half the members left. Two kinds of group:

- homogeneous: every member subscribes to every topic;
- heterogeneous: each member to a random subset of the topics (seeded), the case that
  `coordinator/groups/consumer/assignors.py` balances topic by topic.

No peer: Tansu has no server-side assignor. Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid


def _timed(members: dict, topics: dict) -> tuple[float, dict]:
    from kbroker.coordinator.groups.consumer.assignors import uniform_assign

    started = time.perf_counter()
    result = uniform_assign(members, topics)
    return 1000 * (time.perf_counter() - started), result


def measure(members: int, topics: int, partitions: int, heterogeneous: bool, seed: int) -> dict[str, float]:
    from kbroker.coordinator.groups.consumer.assignors import MemberSubscription

    rng = random.Random(seed)
    sizes = {uuid.UUID(int=rng.getrandbits(128)): partitions for _ in range(topics)}
    ids = list(sizes)

    def subscription() -> frozenset:
        return frozenset(rng.sample(ids, rng.randint(1, topics)) if heterogeneous else ids)

    group = {f"member-{i:06d}": MemberSubscription(subscription()) for i in range(members)}
    out: dict[str, float] = {}
    out["from nothing"], first = _timed(group, sizes)
    settled = {m: MemberSubscription(s.subscribed_topic_ids, current=first[m]) for m, s in group.items()}
    out["one joins"], _ = _timed({**settled, "member-joining": MemberSubscription(frozenset(ids))}, sizes)
    half = {m: s for i, (m, s) in enumerate(settled.items()) if i % 2}
    out["half leave"], _ = _timed(half, sizes)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.assignor_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", default="500,2000", help="comma-separated group sizes")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=500, help="partitions per topic")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"uniform assignor, {args.topics} topics of {args.partitions} partitions; ms per computation")
    print(f"{'group':<28}{'from nothing':>14}{'one joins':>12}{'half leave':>12}")
    for n in (int(x) for x in args.members.split(",")):
        for heterogeneous in (False, True):
            row = measure(n, args.topics, args.partitions, heterogeneous, args.seed)
            label = f"{n:,} members, {'heterogeneous' if heterogeneous else 'homogeneous'}"
            print(f"{label:<28}" + "".join(f"{v:>{w},.0f}" for v, w in zip(row.values(), (14, 12, 12))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
