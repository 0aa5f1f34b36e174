"""Which `__consumer_offsets` partition owns a group: `Utils.abs(groupId.hashCode()) % n`.

It must agree with every Java broker and client bit for bit, so it reimplements Java's
`String.hashCode` (over UTF-16 code units, wrapping at 32 bits) and never uses Python's hash().
"""

from __future__ import annotations

from functools import lru_cache

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode`: h = 31*h + c over UTF-16 code units, as a signed 32-bit int.

    A character outside the BMP is two surrogate code units, hence the UTF-16 encoding.
    """
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: like Math.abs but maps Integer.MIN_VALUE to 0, never negative."""
    return 0 if n == _INT_MIN else abs(n)


# Every group request asks, and the hash is a Python loop over the id: a bounded cache of recent ids.
@lru_cache(maxsize=4096)
def partition_for(group_id: str, n: int = 50) -> int:
    if n <= 0:
        raise ValueError("the offsets topic needs at least one partition")
    return kafka_abs(java_string_hash(group_id)) % n


def one_per_partition(prefix: str, n: int = 50) -> list[str]:
    """Ids `prefix-0`, `prefix-1`, ... chosen so that their partitions cover all n, one for each,
    in partition order: a probe that a coordinator has loaded every partition (Kafka loads
    `__consumer_offsets` and `__transaction_state` partition by partition)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        name = f"{prefix}-{i}"
        found.setdefault(partition_for(name, n), name)
        i += 1
    return [found[p] for p in range(n)]
